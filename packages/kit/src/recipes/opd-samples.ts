// OPD data: every student turn with its sampled tokens and sampler log-probs, plus the teacher's
// log-probs of the same tokens (Tinker train_on_policy: the teacher scores the student's sequence;
// numerics.md §4 "Advantage" steps 1–2).
import type { Message, Policy, ScoreOptions, TokenScores, ToolSchema, Trajectory } from "@kiln/rollout";
import { messagesBeforeTurn } from "@kiln/rollout";
import { RecipeError } from "./errors.js";
import { withSystemNote } from "./system-note.js";

export interface OpdSample {
  episodeId: string;
  turn: number;
  promptIds: number[];
  completionIds: number[];
  /** log q(y_t) recorded by the sampler. */
  samplerLogps: number[];
  /** log p_teacher(y_t) of the same tokens. */
  teacherLogps: number[];
  /**
   * The teacher's most likely tokens at each completion position (scoreWithTeacher's
   * `topLogprobs`): what the full-distribution objectives (OpdObjectiveOptions.divergence) fit.
   */
  teacherTop?: { tokenIds: number[]; logprobs: number[] }[];
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

/**
 * Teacher-score every turn that carries tokens and sampler log-probs (run the student with
 * `params.logprobs: true`). Turns without them are skipped and counted. `view` is applied to the
 * conversation before each turn (use the student's own view, see OpdOptions.view). With
 * `topLogprobs` the teacher also returns its k most likely tokens per position (OpdSample.teacherTop).
 */
export async function scoreWithTeacher(
  trajectories: readonly Trajectory[],
  teacher: Policy,
  options: { onTurn?: () => void; view?: MessageView; topLogprobs?: number } = {},
): Promise<{ samples: OpdSample[]; skipped: number }> {
  if (!teacher.score) throw new RecipeError(`OPD teacher "${teacher.id}" has no score(): it cannot score tokens`);
  const samples: OpdSample[] = [];
  let skipped = 0;
  for (const traj of trajectories) {
    for (const turn of traj.turns) {
      const ids = turn.completionTokenIds;
      if (!turn.promptTokenIds || !ids || !turn.logprobs || ids.length === 0 || turn.logprobs.length !== ids.length) {
        skipped++;
        continue;
      }
      const before = messagesBeforeTurn(traj, turn.index);
      const scoreOptions = options.topLogprobs === undefined ? undefined : { topLogprobs: options.topLogprobs };
      const scores: TokenScores = await teacher.score(
        options.view ? options.view(before) : before,
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
