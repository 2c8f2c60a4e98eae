// A teacher built from a model and a target reply known only to the teacher (privileged
// information, e.g. a scripted planner's next call): the product of the model's distribution and a
// bonus of `guidance` nats on the token that continues the target,
//
//   p_T(x_t | x_<t) ∝ p(x_t | x_<t) · exp(guidance · [x_<t follows the target and x_t = n_t]),
//
// so p_T(x_t) = p(x_t) · e^{guidance·[x_t = n_t]} / (1 − p(n_t) + p(n_t) e^{guidance}) while the reply
// so far agrees with the target, and p_T = p once it has left it. A small model that cannot learn to
// copy a note still gives a teacher that acts on it, at no training cost: greedy, it makes the
// target's tokens unless the model prefers another by more than `guidance` nats (docs/NUMERICS.md
// §4.4). Scoring a completion costs one forward pass, two where it leaves the target.
import { type LocalPolicy, toGeneration } from "@kiln/models";
import type { GenerateParams, Generation, Message, Policy, ScoreOptions, TokenScores, ToolSchema } from "@kiln/rollout";
import { RecipeError } from "../errors.js";

/** The conversation the model sees and the reply the teacher is guided towards (null: none, the plain model). */
export interface GuidedPrompt {
  messages: Message[];
  target: string | null;
}

export interface GuidedPolicyOptions {
  /** The bonus on the target's next token, in nats (finite, > 0). */
  guidance: number;
  /** Splits the privileged part off a prompt: what the model reads, and the target text. */
  split: (messages: Message[]) => GuidedPrompt;
  id?: string;
}

/** log(1 − p + p·e^g) for p = e^lp: the normaliser of the guided distribution at a position on the target. */
export function guidedLogNormaliser(lp: number, guidance: number): number {
  const a = Math.log1p(-Math.min(1, Math.exp(lp))); // log(1 − p)
  const b = lp + guidance;
  const m = Math.max(a, b);
  return m === Number.NEGATIVE_INFINITY ? m : m + Math.log(Math.exp(a - m) + Math.exp(b - m));
}

/**
 * Guided log-probs of `ids` from the model's log-probs `lp` of the same tokens, the target `target`
 * and, where `ids` leaves the target at position d (< both lengths), the model's log-prob of the
 * target's token there (`targetLpAtDivergence`).
 */
export function guidedLogprobs(
  ids: readonly number[],
  lp: readonly number[],
  target: readonly number[],
  guidance: number,
  targetLpAtDivergence?: number,
): number[] {
  const d = divergence(ids, target);
  return lp.map((x, t) => {
    if (t > d || t >= target.length) return x;
    if (t < d) return x + guidance - guidedLogNormaliser(x, guidance);
    if (targetLpAtDivergence === undefined)
      throw new RecipeError("guidedLogprobs: the target's log-prob where the completion leaves it is needed");
    return x - guidedLogNormaliser(targetLpAtDivergence, guidance);
  });
}

/** The first position where `ids` and `target` differ (min of their lengths when one prefixes the other). */
export function divergence(ids: readonly number[], target: readonly number[]): number {
  const n = Math.min(ids.length, target.length);
  for (let t = 0; t < n; t++) if (ids[t] !== target[t]) return t;
  return n;
}

/**
 * A Policy that plays and scores as the guided teacher of `inner` (a LocalPolicy: it needs
 * score and complete on token ids). Prompts without a target go to `inner` unchanged. It plays
 * greedily only (the teacher is evaluated greedily; OPD's rollouts are the student's).
 */
export class GuidedPolicy implements Policy {
  readonly id: string;
  readonly guidance: number;

  constructor(
    readonly inner: LocalPolicy,
    private readonly options: GuidedPolicyOptions,
  ) {
    if (!(options.guidance > 0 && Number.isFinite(options.guidance)))
      throw new RecipeError(`guided teacher: guidance must be a finite number of nats > 0, got ${options.guidance}`);
    this.guidance = options.guidance;
    this.id = options.id ?? `${inner.id}+guided(${options.guidance})`;
  }

  /** The target's token ids: the reply's text as the tokenizer encodes it, then end of turn. */
  targetIds(target: string): number[] {
    const eos = this.inner.tokenizer.eosTokenId;
    if (eos === null) throw new RecipeError("guided teacher: the tokenizer has no end-of-turn token");
    return [...this.inner.tokenizer.encode(target), eos];
  }

  async generate(messages: Message[], tools?: ToolSchema[], params: GenerateParams = {}): Promise<Generation> {
    const { messages: m, target } = this.options.split(messages);
    if (target === null) return this.inner.generate(m, tools, params);
    if ((params.temperature ?? 0) > 0)
      throw new RecipeError(`guided teacher "${this.id}" plays greedily only, got temperature ${params.temperature}`);
    const want = this.targetIds(target).slice(0, params.maxTokens ?? 256);
    const scored = await this.inner.score(m, want, tools, { topLogprobs: 1 });
    const best = scored.top;
    if (!best || best.length !== want.length)
      throw new RecipeError(`guided teacher "${this.id}": the model returned no top token per position`);
    // The guided argmax follows the target until the model's own top token beats it by more than the guidance.
    let d = want.length;
    for (let t = 0; t < want.length; t++) {
      if (best[t].tokenIds[0] !== want[t] && best[t].logprobs[0] > scored.logprobs[t] + this.guidance) {
        d = t;
        break;
      }
    }
    const prompt = this.inner.promptIds(m, tools, params.enableThinking);
    const prefix = want.slice(0, d);
    const prefixLps = scored.logprobs.slice(0, d);
    let tokenIds = prefix;
    let logprobs = prefixLps;
    let finishReason: "stop" | "length" = "stop";
    const budget = params.maxTokens ?? 256;
    const eos = this.inner.tokenizer.eosTokenId;
    if (d < want.length) {
      // Off the target: the model's own top token, then the plain model's greedy continuation.
      const off = best[d].tokenIds[0];
      const offLp = best[d].logprobs[0];
      tokenIds = [...prefix, off];
      logprobs = [...prefixLps, offLp];
      if (off !== eos && tokenIds.length < budget) {
        const rest = await this.inner.complete([...prompt, ...tokenIds], {
          ...params,
          temperature: 0,
          maxTokens: budget - tokenIds.length,
          logprobs: true,
        });
        tokenIds = [...tokenIds, ...(rest.completionTokenIds ?? [])];
        logprobs = [...logprobs, ...(rest.logprobs ?? []).map((l) => l.logprob)];
        finishReason = rest.finishReason === "length" ? "length" : "stop";
      }
    } else if (want[want.length - 1] !== this.inner.tokenizer.eosTokenId) finishReason = "length";
    const body = tokenIds[tokenIds.length - 1] === eos ? tokenIds.slice(0, -1) : tokenIds;
    return toGeneration(
      { promptIds: prompt, tokenIds, logprobs, text: this.inner.tokenizer.decode(body), finishReason },
      this.inner.tokenizer,
      { tools, parse: true, logprobs: params.logprobs },
    );
  }

  async score(
    messages: Message[],
    completion: string | number[],
    tools?: ToolSchema[],
    options: ScoreOptions = {},
  ): Promise<TokenScores> {
    const { messages: m, target } = this.options.split(messages);
    const base = await this.inner.score(m, completion, tools, options);
    if (target === null) return base;
    const ids = base.tokenIds;
    const want = this.targetIds(target);
    const d = divergence(ids, want);
    const atDivergence =
      d < ids.length && d < want.length
        ? (await this.inner.score(m, want.slice(0, d + 1), tools)).logprobs[d]
        : undefined;
    const logprobs = guidedLogprobs(ids, base.logprobs, want, this.guidance, atDivergence);
    if (!base.top) return { tokenIds: ids, logprobs };
    // The top lists under the guided distribution: on the target, the target's token gains the
    // guidance and every entry loses the normaliser; the target's token joins the list if absent.
    const top = base.top.map((entry, t) => {
      if (t > d || t >= want.length) return entry;
      const nLp = t < d ? base.logprobs[t] : (atDivergence as number);
      const z = guidedLogNormaliser(nLp, this.guidance);
      const pairs = entry.tokenIds.map((id, i) => [id, entry.logprobs[i] - z] as [number, number]);
      const guided = nLp + this.guidance - z;
      const at = pairs.findIndex(([id]) => id === want[t]);
      if (at >= 0) pairs[at][1] = guided;
      else pairs.push([want[t], guided]);
      pairs.sort((a, b) => b[1] - a[1]);
      const kept = pairs.slice(0, entry.tokenIds.length);
      return { tokenIds: kept.map((p) => p[0]), logprobs: kept.map((p) => p[1]) };
    });
    return { tokenIds: ids, logprobs, top };
  }
}
