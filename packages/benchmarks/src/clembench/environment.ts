// A clembench game as a rollout Environment, so training recipes (ARP) collect, diagnose and
// branch on Wordle and the other games through their own game masters.
//
// The game master pulls replies from its players; an Environment is pushed actions. The bridge
// inverts control: the master's turn loop runs as a pending promise, and the learning player's
// `respond` parks until `step` hands it the agent's reply. The agent sees each context the master
// sends that player as a user message (its initial prompt glued to the first, as clemcore does);
// other LLM roles are played by `partners`. The episode's score is the game's Main Score / 100,
// `success` its Success flag; the state is the instance index plus the learner's replies so far,
// so a saved state replays to the same game position (branching, seeded starts).
import type { Action, Environment, Message, ResetResult, StepResult, ToolSchema } from "@kiln/rollout";
import { resolveDataDir } from "./data-dir.js";
import { playEpisode } from "./episode.js";
import type { GameDefinition } from "./game.js";
import {
  type EpisodeSpec,
  type InstanceFilter,
  type InstancesFile,
  listEpisodes,
  parseInstancesFile,
} from "./instances.js";
import type { ChatTurn, Context, PlayerBackend } from "./player.js";
import { cleanReply, ensureAlternatingRoles } from "./player.js";
import * as M from "./metrics.js";
import { toNumber } from "./py.js";
import { getGame, loadGameInstances } from "./registry.js";

export interface ClemEnvironmentOptions {
  /** Game name of the registry ("wordle", "wordle_withclue", "taboo", …). */
  game: string;
  dataDir?: string;
  /**
   * The instances to play instead of the game's instances.json (validated like it; prompts and other resources
   * still come from `dataDir`): generated instances, e.g. a training corpus's fresh targets.
   */
  instances?: InstancesFile;
  /** Which instances reset() draws from (seed modulo their number). */
  filter?: InstanceFilter;
  /** Keep only the instances (by index in the filtered list) this returns true for, e.g. a train/eval split. */
  pick?: (index: number) => boolean;
  /** Index of the LLM role the agent plays (default 0). */
  role?: number;
  /** Backends of the other LLM roles, in role order without the agent's. */
  partners?: PlayerBackend[];
}

export interface ClemEnvironmentState {
  /** Index into the filtered instance list. */
  instance: number;
  /** The agent's replies so far (replayed by reset({ state })). */
  replies: string[];
}

/**
 * Play one episode to its end and flatten its episode scores (score = Main Score / 100; NaN → 0).
 * `main_score_raw` keeps the Main Score as the game logged it (NaN when the game gives it none, e.g.
 * aborted), so clemscore can be computed from an environment's episodes as clemeval computes it.
 */
async function playEpisodeScores(
  def: GameDefinition,
  spec: EpisodeSpec,
  backends: PlayerBackend[],
  ctx: { dataDir: string },
): Promise<Record<string, number>> {
  const r = await playEpisode(def, spec, backends, ctx);
  if (!r.scores) throw new Error(`clembench ${def.name}: ${r.error ?? "the episode has no scores"}`);
  const s = r.scores["episode scores"];
  const main = toNumber(s[M.BENCH_SCORE]);
  return {
    success: toNumber(s[M.METRIC_SUCCESS]) === 1 ? 1 : 0,
    lose: toNumber(s[M.METRIC_LOSE]) === 1 ? 1 : 0,
    aborted: toNumber(s[M.METRIC_ABORTED]) === 1 ? 1 : 0,
    main_score: Number.isFinite(main) ? main : 0,
    main_score_raw: main,
    score: Number.isFinite(main) ? main / 100 : 0,
  };
}

type Pending =
  | { kind: "request"; context: string; perspective: ChatTurn[] }
  | { kind: "done" }
  | { kind: "error"; error: Error };

class BridgeBackend implements PlayerBackend {
  readonly modelName = "kiln-agent";
  private waiting: ((reply: string) => void) | null = null;
  onRequest: (context: Context, perspective: ChatTurn[]) => void = () => {};

  respond(messages: ChatTurn[], context: Context): Promise<string> {
    return new Promise((resolve) => {
      this.waiting = resolve;
      // Deferred: a game that asks before its first await (privateshared probes in onBeforeGame) asks while
      // reset() is still wiring its listener up; a microtask later the listener is there.
      queueMicrotask(() => this.onRequest(context, messages));
    });
  }

  reply(text: string): void {
    const w = this.waiting;
    if (!w) throw new Error("clembench environment: the game is not waiting for a reply");
    this.waiting = null;
    w(text);
  }
}

export class ClemGameEnvironment implements Environment<ClemEnvironmentState> {
  readonly id: string;
  readonly version = "clembench-2";
  private readonly def: GameDefinition;
  private readonly episodes: EpisodeSpec[];
  private readonly dataDir: string;
  private bridge = new BridgeBackend();
  private next: Promise<Pending> = Promise.resolve({ kind: "done" });
  private state: ClemEnvironmentState = { instance: 0, replies: [] };
  private finished: Promise<Record<string, number>> | null = null;
  private lastScores: Record<string, number> = {};

  constructor(private readonly options: ClemEnvironmentOptions) {
    this.def = getGame(options.game);
    this.dataDir = resolveDataDir(options.dataDir);
    const all = listEpisodes(
      this.def.name,
      options.instances
        ? parseInstancesFile(options.instances, `instances given for ${this.def.name}`)
        : loadGameInstances(this.def.name, this.dataDir),
      options.filter,
    );
    this.episodes = options.pick ? all.filter((_, i) => options.pick?.(i)) : all;
    if (this.episodes.length === 0)
      throw new Error(`clembench environment: no instances of ${options.game} match the filter`);
    const partners = options.partners?.length ?? 0;
    if (partners !== this.def.players - 1)
      throw new Error(
        `clembench environment: ${options.game} has ${this.def.players} LLM roles; give ${this.def.players - 1} partner backend(s), got ${partners}`,
      );
    this.id = `clembench/${options.game}`;
  }

  /** Number of instances reset() cycles through. */
  get instances(): number {
    return this.episodes.length;
  }

  tools(): ToolSchema[] {
    return [];
  }

  getState(): ClemEnvironmentState {
    return { instance: this.state.instance, replies: [...this.state.replies] };
  }

  score(): Record<string, number> {
    return { ...this.lastScores };
  }

  private waitNext(): Promise<Pending> {
    return new Promise<Pending>((resolve) => {
      this.bridge.onRequest = (context, perspective) =>
        resolve({ kind: "request", context: context.content, perspective });
      this.finished?.then(
        () => resolve({ kind: "done" }),
        (error: Error) => resolve({ kind: "error", error }),
      );
    });
  }

  async reset(options: { seed: number; state?: ClemEnvironmentState }): Promise<ResetResult> {
    const index =
      options.state?.instance ?? ((options.seed % this.episodes.length) + this.episodes.length) % this.episodes.length;
    const spec = this.episodes[index];
    this.bridge = new BridgeBackend();
    this.lastScores = {};
    const role = this.options.role ?? 0;
    const backends = [...(this.options.partners ?? [])];
    backends.splice(role, 0, this.bridge);
    this.state = { instance: index, replies: [] };
    this.finished = playEpisodeScores(this.def, spec, backends, { dataDir: this.dataDir }).then((scores) => {
      this.lastScores = scores;
      return scores;
    });
    this.next = this.waitNext();
    let first = await this.next;
    for (const reply of options.state?.replies ?? []) {
      if (first.kind !== "request") break;
      first = await this.advance(reply);
    }
    if (first.kind === "error") throw first.error;
    if (first.kind === "done") return { messages: [], info: { game: this.def.name, instance: spec.instance.game_id } };
    // The player's whole perspective: a game may seed its memory first (privateshared's pseudo turn
    // carries the initial prompt and the answerer's "Ok.").
    return {
      messages: ensureAlternatingRoles(first.perspective),
      info: { game: this.def.name, experiment: spec.experiment.name, instance: spec.instance.game_id },
    };
  }

  private advance(reply: string): Promise<Pending> {
    this.state.replies.push(reply);
    this.next = this.waitNext();
    this.bridge.reply(reply);
    return this.next;
  }

  async step(action: Action): Promise<StepResult> {
    const text = cleanReply(action.message.content ?? "");
    const r = await this.advance(text);
    if (r.kind === "error") throw r.error;
    if (r.kind === "done") {
      const scores = this.lastScores;
      return { observations: [], reward: scores.score ?? 0, done: true, info: { scores } };
    }
    const obs: Message = { role: "user", content: r.context };
    return { observations: [obs], reward: 0, done: false };
  }
}
