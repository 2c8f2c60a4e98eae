// Static (single-turn) benchmarks of the Playpen statscore: clembench `static/bbh/master.py` and
// `static/eqbench/master.py` (clembench a717f238). ifeval, cladder and mmlu_pro are not ported (see README).
import { DialogueGameMaster } from "../dialogue-game-master.js";
import { InstanceError } from "../errors.js";
import type { GameDefinition } from "../game.js";
import { type Experiment, field, type GameInstance } from "../instances.js";
import type { Interactions } from "../interactions.js";
import * as M from "../metrics.js";
import { Player, type PlayerBackend } from "../player.js";
import { pyFloat } from "../py.js";
import { GameScorer } from "../scorer.js";

/**
 * Render a BBH prompt: `jinja2.Template(t).render(input=...)`. The shipped templates use only `{{input}}`;
 * anything else is refused rather than rendered wrongly. jinja2 drops one trailing newline of a template.
 */
export function renderBbhPrompt(template: string, input: string): string {
  const stray = template.replace(/\{\{\s*input\s*\}\}/g, "");
  if (/\{\{|\{%|\{#/.test(stray))
    throw new InstanceError("bbh: the prompt template uses jinja syntax other than {{input}}, which is not supported");
  const body = template.endsWith("\n") ? template.slice(0, -1) : template;
  return body.replace(/\{\{\s*input\s*\}\}/g, () => input);
}

/** A single-turn game: one answerer, the prompt as its first context, one reply. */
abstract class SingleTurnMaster extends DialogueGameMaster {
  answerer!: Player;
  success = false;
  failure = false;
  aborted = false;
  requestCounts = 0;
  parsedRequestCounts = 0;
  violatedRequestCounts = 0;

  constructor(
    gameName: string,
    experiment: Experiment,
    private readonly backends: PlayerBackend[],
  ) {
    super(gameName, experiment);
  }

  protected abstract prompt(instance: GameInstance): string;

  protected onSetup(instance: GameInstance): void {
    this.answerer = new Player(this.backends[0], "Answerer");
    this.addPlayer(this.answerer, { initialContext: this.prompt(instance) });
  }

  protected doesGameProceed(): boolean {
    return !(this.aborted || this.failure || this.success);
  }

  protected override onAfterGame(): void {
    this.logRequestOutcome(this);
  }
}

export class BbhMaster extends SingleTurnMaster {
  private target = "";
  protected prompt(instance: GameInstance): string {
    const where = `bbh/${this.experiment.name}/${instance.game_id}`;
    this.target = field<string>(instance, "target", where);
    return renderBbhPrompt(
      field<string>(this.experiment, "initial_prompt", where),
      field<string>(instance, "input", where),
    );
  }
  protected validatePlayerResponse(): boolean {
    this.requestCounts += 1;
    return true; // any reply is accepted; never aborts
  }
  protected onValidPlayerResponse(_p: Player, parsed: string | null): void {
    this.parsedRequestCounts += 1;
    this.logToSelf("metadata", `Target: ${this.target}`);
    if (parsed === this.target) {
      this.logToSelf("correct answer", "game_result = WIN");
      this.success = true;
    } else {
      this.logToSelf("wrong answer", "game_result = LOSE");
      this.failure = true;
    }
  }
}

export class BbhScorer extends GameScorer {
  protected override scoreTurns(): void {}
  protected override logMainScore(interactions: Interactions): void {
    this.logEpisodeScore(M.BENCH_SCORE, interactions[M.METRIC_SUCCESS] ? 100 : 0);
  }
}

/** An EQ-Bench reply that breaks the format (the reference's ParseError; aborts the episode). */
export class EqBenchParseError extends Error {}

/**
 * `parse_response`: every `<word>: <digits>` pair (later duplicates win); exactly the reference's emotions,
 * at least one score > 0, all in 0–10. (Python's `\d` also takes non-ASCII digits; here only ASCII.)
 */
export function parseEqBenchResponse(response: string, reference: Record<string, number>): Map<string, number> {
  const pairs = new Map<string, string>();
  for (const m of response.matchAll(/([\p{L}\p{N}_]+):\s+(\d+)/gu)) pairs.set(m[1], m[2]);
  const refKeys = Object.keys(reference);
  if (pairs.size === 0)
    throw new EqBenchParseError(
      "Response doesn't contain any '<emotion>: <score>' pairs, but this would be the expected format",
    );
  if (pairs.size !== refKeys.length)
    throw new EqBenchParseError(
      `Number of scored emotion is '${pairs.size}', but the expected format lists '${refKeys.length}'`,
    );
  if (refKeys.some((k) => !pairs.has(k)))
    throw new EqBenchParseError(
      `The mentioned emotions ${[...pairs.keys()].join(", ")}, do not match the ones in the expected format ${refKeys.join(", ")}`,
    );
  const values = [...pairs.values()];
  if (!values.some((v) => Number.parseInt(v, 10) > 0))
    throw new EqBenchParseError(
      `At least one score in the response must be greater than 0,but the scores are: ['${values.join("', '")}']`,
    );
  const parsed = new Map([...pairs].map(([k, v]) => [k, Number.parseInt(v, 10)]));
  const violated = [...parsed].filter(([, v]) => !(v >= 0 && v <= 10)).map(([k, v]) => `${k}: ${v}`);
  if (violated.length > 0)
    throw new EqBenchParseError(
      `The scores must be given in range 0 to 10, but there are violations: ${violated.join(", ")}`,
    );
  return parsed;
}

function eqFormat(scores: Iterable<[string, number]>): string {
  return [...scores].map(([k, v]) => `${k}: ${v}`).join("\n");
}

/**
 * EQ-Bench v2 fullscale score: 10 × (10 − 0.7477 · Σ s(d)), d = |pred − ref|, s(0) = 0,
 * s(d) = 6.5 / (1 + e^(−1.2(d − 4))) for d ≤ 5, else d. Summed in the reply's emotion order, as the reference.
 */
export function eqBenchScore(parsed: Map<string, number>, reference: Record<string, number>): number {
  let tally = 0;
  for (const [emotion, score] of parsed) {
    const d = Math.abs(score - Number(reference[emotion]));
    if (d === 0) continue;
    tally += d <= 5 ? 6.5 * (1 / (1 + Math.E ** (-1.2 * (d - 4)))) : d;
  }
  return (10 - tally * 0.7477) * 10;
}

export class EqBenchMaster extends SingleTurnMaster {
  private target: Record<string, number> = {};
  parsedResponse: Map<string, number> | null = null;
  protected prompt(instance: GameInstance): string {
    const where = `eqbench/${this.experiment.name}/${instance.game_id}`;
    this.target = field(instance, "target", where);
    return field<string>(instance, "input", where);
  }
  protected validatePlayerResponse(_p: Player, response: string): boolean {
    this.requestCounts += 1;
    try {
      this.parsedResponse = parseEqBenchResponse(response, this.target);
      this.parsedRequestCounts += 1;
      this.logToSelf("parsed", eqFormat(this.parsedResponse));
      return true;
    } catch (e) {
      if (!(e instanceof EqBenchParseError)) throw e;
      this.violatedRequestCounts += 1;
      this.logToSelf("metadata", `ParseError: ${e.message}`);
      this.aborted = true;
      this.logToSelf("invalid format", "game_result = ABORT");
      return false;
    }
  }
  protected onValidPlayerResponse(): void {
    this.logToSelf("target", eqFormat(Object.entries(this.target)));
    const p = this.parsedResponse!;
    const same = Object.keys(this.target).length === p.size && [...p].every(([k, v]) => this.target[k] === v);
    if (same) {
      this.logToSelf("exact match", "game_result = WIN");
      this.success = true;
    } else {
      this.logToSelf("not exact match", "game_result = LOSE");
      this.failure = true;
    }
  }
  protected override onAfterGame(): void {
    this.logKey("Parsed Response", this.parsedResponse ? Object.fromEntries(this.parsedResponse) : null);
    super.onAfterGame();
  }
}

export class EqBenchScorer extends GameScorer {
  protected override scoreTurns(): void {}
  protected override logMainScore(interactions: Interactions): void {
    const parsed = interactions["Parsed Response"] as Record<string, number> | null;
    if (!parsed) {
      this.logEpisodeScore(M.BENCH_SCORE, Number.NaN);
      return;
    }
    const reference = this.gameInstance.target as Record<string, number>;
    this.logEpisodeScore(M.BENCH_SCORE, pyFloat(eqBenchScore(new Map(Object.entries(parsed)), reference)));
  }
}

export const bbh: GameDefinition = {
  name: "bbh",
  dataPath: "static/bbh",
  players: 1,
  roles: ["Answerer"],
  createMaster: (experiment, backends) => new BbhMaster("bbh", experiment, backends),
  createScorer: (experiment, instance) => new BbhScorer("bbh", experiment, instance),
};

export const eqbench: GameDefinition = {
  name: "eqbench",
  dataPath: "static/eqbench",
  players: 1,
  roles: ["Answerer"],
  createMaster: (experiment, backends) => new EqBenchMaster("eqbench", experiment, backends),
  createScorer: (experiment, instance) => new EqBenchScorer("eqbench", experiment, instance),
};
