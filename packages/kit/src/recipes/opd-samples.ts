// OPD data: every student turn with its sampled tokens and sampler log-probs, plus the teacher's
// log-probs of the same tokens (Tinker train_on_policy: the teacher scores the student's sequence;
// docs/NUMERICS.md §4.1 steps 1–2).
import type { Message, Policy, ScoreOptions, TokenScores, ToolSchema, Trajectory } from "@kiln/rollout";
import { messagesBeforeTurn } from "@kiln/rollout";
import type { Tokenizer } from "@kiln/models";
import { RecipeError, UsageError } from "../errors.js";
import type { OpdSample } from "../trainer/objectives/opd.js";
import { withSystemNote } from "./system-note.js";

export type { OpdSample };

/**
 * One sample per episode instead of one per turn, where that changes nothing the loss sees: when
 * every turn's prompt is the previous turn's prompt + completion + what came back (the chat
 * template renders history as it was generated), the last turn's sequence holds every earlier
 * turn's context, so one forward scores all the episode's completion tokens, each with exactly
 * the context it had. An episode of n turns then costs one pass over its final length instead of n
 * passes over growing prefixes. Episodes whose prompts do not extend each other stay per turn.
 */
export function packEpisodeTurns(samples: readonly OpdSample[]): OpdSample[] {
  const byEpisode = new Map<string, OpdSample[]>();
  for (const s of samples) {
    const list = byEpisode.get(s.episodeId);
    if (list) list.push(s);
    else byEpisode.set(s.episodeId, [s]);
  }
  const out: OpdSample[] = [];
  for (const turns of byEpisode.values()) {
    turns.sort((a, b) => a.turn - b.turn);
    if (turns.length < 2 || turns.some((t) => t.trainMask) || !extendsEachOther(turns)) {
      out.push(...turns);
      continue;
    }
    const first = turns[0];
    const last = turns[turns.length - 1];
    const full = [...last.promptIds, ...last.completionIds];
    const n = full.length - first.promptIds.length;
    const packed: OpdSample = {
      episodeId: first.episodeId,
      turn: first.turn,
      promptIds: [...first.promptIds],
      completionIds: full.slice(first.promptIds.length),
      samplerLogps: new Array(n).fill(0),
      teacherLogps: new Array(n).fill(0),
      trainMask: new Array(n).fill(0),
      turns: new Array(n).fill(first.turn),
      ...(turns.every((t) => t.teacherTop) ? { teacherTop: new Array(n).fill({ tokenIds: [], logprobs: [] }) } : {}),
    };
    for (const t of turns) {
      const at = t.promptIds.length - first.promptIds.length;
      t.completionIds.forEach((_, j) => {
        packed.samplerLogps[at + j] = t.samplerLogps[j];
        packed.teacherLogps[at + j] = t.teacherLogps[j];
        packed.trainMask![at + j] = 1;
        packed.turns![at + j] = t.turn;
        if (packed.teacherTop) packed.teacherTop[at + j] = t.teacherTop![j];
      });
    }
    out.push(packed);
  }
  return out;
}

function extendsEachOther(turns: readonly OpdSample[]): boolean {
  for (let k = 1; k < turns.length; k++) {
    const before = [...turns[k - 1].promptIds, ...turns[k - 1].completionIds];
    const prompt = turns[k].promptIds;
    if (prompt.length < before.length) return false;
    for (let i = 0; i < before.length; i++) if (prompt[i] !== before[i]) return false;
  }
  return true;
}

/** What a policy sees of a conversation (e.g. a bounded window of a long episode). */
export type MessageView = (messages: Message[]) => Message[];

/**
 * `policy` answering and scoring from `view(messages)`: the student plays from the view and the
 * teacher scores the same view, so both condition on the prompt the student's tokens came from.
 * `score` and `complete` exist exactly when the inner policy has them; raw scoring
 * (`messages = []`) has no conversation to view and passes through.
 */
export function viewPolicy(policy: Policy, view: MessageView, id = policy.id): Policy {
  return {
    id,
    generate: (messages, tools, params) => policy.generate(view(messages), tools, params),
    score: policy.score
      ? (messages: Message[], completion: string | number[], tools?: ToolSchema[], options?: ScoreOptions) =>
          policy.score!(messages.length === 0 ? messages : view(messages), completion, tools, options)
      : undefined,
    complete: policy.complete ? (prompt, params) => policy.complete!(prompt, params) : undefined,
  };
}

/** A teacher's prompt for turn `turn` of `trajectory`, built from the student's (viewed) prompt `messages`. */
export type TeacherPrompt = (messages: Message[], trajectory: Trajectory, turn: number) => Message[];

/**
 * Teacher-score every turn that carries tokens and sampler log-probs (run the student with
 * `params.logprobs: true`). Turns without them are skipped and counted. `view` is applied to the
 * conversation before each turn (use the student's own view, see OpdOptions.view). With
 * `topLogprobs` the teacher also returns its k most likely tokens per position (OpdSample.teacherTop).
 */
export async function scoreWithTeacher(
  trajectories: readonly Trajectory[],
  teacher: Policy,
  options: {
    onTurn?: () => void;
    view?: MessageView;
    topLogprobs?: number;
    /** Score only the turns this keeps (default all); the others are neither scored nor counted as skipped. */
    include?: (trajectory: Trajectory, turn: number) => boolean;
    /**
     * The teacher's prompt for a turn, from the student's viewed prompt: privileged information the
     * student did not see (OpdOptions.teacherPrompt). Default: the student's prompt as it is.
     */
    teacherPrompt?: TeacherPrompt;
  } = {},
): Promise<{ samples: OpdSample[]; skipped: number }> {
  if (!teacher.score) throw new RecipeError(`OPD teacher "${teacher.id}" has no score(): it cannot score tokens`);
  const samples: OpdSample[] = [];
  let skipped = 0;
  for (const traj of trajectories) {
    for (const turn of traj.turns) {
      if (options.include && !options.include(traj, turn.index)) continue;
      const ids = turn.completionTokenIds;
      if (!turn.promptTokenIds || !ids || !turn.logprobs || ids.length === 0 || turn.logprobs.length !== ids.length) {
        skipped++;
        continue;
      }
      const before = messagesBeforeTurn(traj, turn.index);
      const scoreOptions = options.topLogprobs === undefined ? undefined : { topLogprobs: options.topLogprobs };
      const viewed = options.view ? options.view(before) : before;
      const scores: TokenScores = await teacher.score(
        options.teacherPrompt ? options.teacherPrompt(viewed, traj, turn.index) : viewed,
        ids,
        traj.tools,
        scoreOptions,
      );
      if (scores.logprobs.length !== ids.length)
        throw new RecipeError(
          `OPD teacher "${teacher.id}" returned ${scores.logprobs.length} log-probs for ${ids.length} tokens (${traj.episodeId} turn ${turn.index})`,
        );
      if (options.topLogprobs !== undefined && scores.top?.length !== ids.length)
        throw new RecipeError(
          `OPD teacher "${teacher.id}" returned no top-${options.topLogprobs} log-probs for ${ids.length} tokens (${traj.episodeId} turn ${turn.index}); it cannot serve a full-distribution objective`,
        );
      samples.push({
        episodeId: traj.episodeId,
        turn: turn.index,
        promptIds: [...turn.promptTokenIds],
        completionIds: [...ids],
        samplerLogps: [...turn.logprobs],
        teacherLogps: [...scores.logprobs],
        ...(scores.top && options.topLogprobs !== undefined ? { teacherTop: scores.top } : {}),
      });
      options.onTurn?.();
    }
  }
  return { samples, skipped };
}

/**
 * A scaffolded teacher: the same policy scoring with `scaffold` added to the system prompt
 * (prepended as a system message when there is none). Its advantage then says how much more
 * the scaffolded model likes the student's tokens.
 */
export function scaffoldedTeacher(policy: Policy, scaffold: string, id = `${policy.id}+scaffold`): Policy {
  const withScaffold = (messages: Message[]): Message[] => withSystemNote(messages, scaffold);
  return {
    id,
    generate: (messages, tools, params) => policy.generate(withScaffold(messages), tools, params),
    score: policy.score
      ? (messages: Message[], completion: string | number[], tools?: ToolSchema[], options?: ScoreOptions) =>
          policy.score!(messages.length === 0 ? messages : withScaffold(messages), completion, tools, options)
      : undefined,
  };
}

function stable(v: unknown): string {
  return JSON.stringify(v, (_k, x) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1)))
      : x,
  );
}

/** The teacher scores the student's token ids, so both must tokenize identically. */
export function assertSameTokenizer(student: Tokenizer, teacher: Tokenizer, label: string): void {
  const key = (t: Tokenizer) =>
    stable({ model: (t.tokenizerJson as { model?: unknown }).model, added: t.tokenizerJson.added_tokens });
  if (key(student) !== key(teacher))
    throw new UsageError(
      `${label}: its tokenizer differs from the student's (vocabulary, merges or added tokens); OPD scores the student's token ids, so the teacher must share the tokenizer`,
    );
}

/** What the seed's sampled-token advantage A = log p_teacher − log q of a set of turns looks like. */
export interface AdvantageStats {
  turns: number;
  tokens: number;
  /** Mean advantage per token (nats). */
  mean: number;
  /** Share of tokens the teacher likes more than the student did (A > 0): the ones the update pushes up. */
  positive: number;
  /** Mean |A| per token. */
  meanAbs: number;
  /** Share of tokens whose |A| exceeds the clamp (their advantage is cut to ±clamp). */
  clamped: number;
}

/** Advantage statistics of `samples` (optionally only those `include` keeps) against `clamp`. */
export function advantageStats(
  samples: readonly OpdSample[],
  clamp: number,
  include: (s: OpdSample) => boolean = () => true,
): AdvantageStats {
  let turns = 0;
  let tokens = 0;
  let sum = 0;
  let abs = 0;
  let positive = 0;
  let clamped = 0;
  for (const s of samples) {
    if (!include(s)) continue;
    turns++;
    s.completionIds.forEach((_, j) => {
      if (s.trainMask && !s.trainMask[j]) return;
      const a = s.teacherLogps[j] - s.samplerLogps[j];
      tokens++;
      sum += a;
      abs += Math.abs(a);
      if (a > 0) positive++;
      if (Math.abs(a) > clamp) clamped++;
    });
  }
  const per = (x: number) => (tokens === 0 ? Number.NaN : x / tokens);
  return { turns, tokens, mean: per(sum), positive: per(positive), meanAbs: per(abs), clamped: per(clamped) };
}
