// A bounded view of a questworld conversation for the embedded agent model. A full expert episode
// is 145–300 turns (~20–30k characters rendered), far past what a tiny model can attend to or
// decode in the repro's time budget, so the model plays from a window: the system prompt, the
// opening user message (where the agent starts and what to do next) and the last `keep` messages.
// The corpus documents, the policy at play time and OPD's teacher scoring all use this one view,
// so the model is trained on exactly the contexts it later generates from.
import {
  type Generation,
  type GenerateParams,
  type Message,
  type Policy,
  type TokenScores,
  type ToolSchema,
  cloneMessages,
} from "@kiln/rollout";
import { RecipeError } from "../errors.js";
import { type MessageView, viewPolicy } from "../recipes/opd-samples.js";

/** Messages after the head kept by default: the last three (call, result) pairs. */
export const QUESTWORLD_WINDOW_KEEP = 6;

export interface QuestworldWindowOptions {
  /** Keep the first user message after the system prompt (default true). */
  opening?: boolean;
}

function checkKeep(keep: number): void {
  if (!Number.isSafeInteger(keep) || keep < 1)
    throw new RecipeError(`questworld window: keep must be a positive integer, got ${keep}`);
}

/**
 * The system prompt (when the conversation starts with one), the opening user message (unless
 * `opening: false`) and the last `keep` messages after them. Idempotent: windowing a window gives
 * the same messages, so wrapping an already windowed policy changes nothing. Messages are copies.
 */
export function questworldWindow(
  messages: readonly Message[],
  keep = QUESTWORLD_WINDOW_KEEP,
  options: QuestworldWindowOptions = {},
): Message[] {
  checkKeep(keep);
  let head = 0;
  if (messages[head]?.role === "system") head++;
  const opening = options.opening ?? true;
  if (opening && messages[head]?.role === "user") head++;
  const kept = messages.slice(0, head);
  const rest = messages.slice(head);
  const tail = rest.slice(Math.max(0, rest.length - keep));
  return cloneMessages([...kept, ...tail]);
}

/** The view function of a window, for OpdOptions.view and scoreWithTeacher. */
export function questworldView(keep = QUESTWORLD_WINDOW_KEEP, options: QuestworldWindowOptions = {}): MessageView {
  checkKeep(keep);
  return (messages) => questworldWindow(messages, keep, options);
}

export interface WindowedPolicyOptions extends QuestworldWindowOptions {
  keep?: number;
  id?: string;
}

/**
 * A Policy that answers (and scores) from the questworld window of the conversation. `score` is
 * present exactly when the inner policy has one, and sees the same window `generate` does, so a
 * teacher or the sampler's own re-scoring conditions on the tokens the student generated from.
 */
export class WindowedPolicy implements Policy {
  readonly id: string;
  readonly keep: number;
  readonly inner: Policy;
  readonly view: MessageView;
  readonly score?: (messages: Message[], completion: string | number[], tools?: ToolSchema[]) => Promise<TokenScores>;
  readonly complete?: (prompt: string | number[], params?: GenerateParams) => Promise<Generation>;
  private readonly viewed: Policy;

  constructor(inner: Policy, options: WindowedPolicyOptions = {}) {
    this.inner = inner;
    this.keep = options.keep ?? QUESTWORLD_WINDOW_KEEP;
    this.view = questworldView(this.keep, options);
    this.id = options.id ?? inner.id;
    this.viewed = viewPolicy(inner, this.view, this.id);
    this.score = this.viewed.score;
    this.complete = this.viewed.complete;
  }

  generate(messages: Message[], tools?: ToolSchema[], params?: GenerateParams): Promise<Generation> {
    return this.viewed.generate(messages, tools, params);
  }
}
