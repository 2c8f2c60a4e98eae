// ARP's synthetic turn-local pairs (phases B1/B2; docs/ARCHITECTURE.md §Recipes). The seed built
// its turn-DPO data from the failure modes it diagnosed rather than waiting for the policy to make
// them: take a good reply of a successful episode, derive a faulty reply of one mode from it with
// the game's corruption, and pair them on the same prompt (the conversation before that turn).
// The corruption is the game's (Wordle's lives in @kiln/benchmarks' clembench beside its game
// master); this module only assembles, draws and counts.
import {
  type DiagnoseOptions,
  type FailureMode,
  type Message,
  type ToolSchema,
  type Trajectory,
  deriveSeed,
  diagnoseTurn,
  isSuccessful,
  messagesBeforeTurn,
  mulberry32,
} from "@kiln/rollout";
import { RecipeError } from "../errors.js";
import { epochOrder } from "../trainer/trainer.js";

/**
 * A game's corruption: a reply of `mode` derived from the good reply `chosen` at `prompt`
 * (seeded by `rng`), or null when this context allows none (e.g. a repeat on the first turn).
 */
export type TurnCorruption = (
  chosen: Message,
  mode: FailureMode,
  prompt: readonly Message[],
  rng: () => number,
) => Message | null;

export interface SyntheticPairOptions {
  modes: readonly FailureMode[];
  corrupt: TurnCorruption;
  /** At most this many pairs per mode, a seeded draw over all candidates (default: all). */
  pairsPerMode?: number;
  /** Corruptions tried per good turn and mode (default 1); identical ones are kept once. */
  variantsPerTurn?: number;
  seed?: number;
  /** The diagnosers a good turn must pass (its reply shows no failure mode). */
  diagnose?: DiagnoseOptions;
}

export interface SyntheticPair {
  prompt: Message[];
  chosen: Message;
  rejected: Message;
  tools?: ToolSchema[];
  mode: FailureMode;
  source: { episodeId: string; turn: number };
}

export interface SyntheticPairResult {
  pairs: SyntheticPair[];
  /** Pairs kept per mode (after the per-mode cap). */
  byMode: Record<FailureMode, number>;
  /** Candidate pairs per mode before the cap. */
  candidates: Record<FailureMode, number>;
  /** Good turns (of successful episodes, diagnosed clean) the pairs were derived from. */
  goodTurns: number;
}

const noModes = (): Record<FailureMode, number> => ({ repeat: 0, length: 0, invalid: 0, duplicate_field: 0 });

/** Synthetic turn-local pairs from the good turns of the successful `references`. */
export function syntheticTurnPairs(
  references: readonly Trajectory[],
  options: SyntheticPairOptions,
): SyntheticPairResult {
  const variants = options.variantsPerTurn ?? 1;
  if (!(Number.isInteger(variants) && variants >= 1))
    throw new RecipeError(`syntheticTurnPairs: variantsPerTurn must be an integer >= 1, got ${variants}`);
  const cap = options.pairsPerMode ?? Number.POSITIVE_INFINITY;
  if (!(cap >= 0)) throw new RecipeError(`syntheticTurnPairs: pairsPerMode must be >= 0, got ${cap}`);
  const seed = options.seed ?? 42;
  const byModeCandidates = new Map<FailureMode, SyntheticPair[]>(options.modes.map((m) => [m, []]));
  let goodTurns = 0;
  for (const t of references) {
    if (t.players || !isSuccessful(t)) continue;
    for (let turn = 0; turn < t.turns.length; turn++) {
      if (diagnoseTurn(t, turn, options.diagnose).length > 0) continue;
      goodTurns++;
      const prompt = messagesBeforeTurn(t, turn);
      const chosen = t.turns[turn].message;
      for (const mode of options.modes) {
        const rng = mulberry32(deriveSeed(seed, t.episodeId, turn, mode));
        const seen = new Set<string>();
        for (let v = 0; v < variants; v++) {
          const rejected = options.corrupt(chosen, mode, prompt, rng);
          if (!rejected) break;
          const key = JSON.stringify([rejected.content, rejected.tool_calls]);
          if (seen.has(key) || key === JSON.stringify([chosen.content, chosen.tool_calls])) continue;
          seen.add(key);
          byModeCandidates.get(mode)?.push({
            prompt,
            chosen: structuredClone(chosen),
            rejected,
            tools: t.tools,
            mode,
            source: { episodeId: t.episodeId, turn },
          });
        }
      }
    }
  }
  const result: SyntheticPairResult = { pairs: [], byMode: noModes(), candidates: noModes(), goodTurns };
  let index = 0;
  for (const [mode, list] of byModeCandidates) {
    result.candidates[mode] = list.length;
    const picked =
      list.length <= cap
        ? list
        : [...epochOrder(list.length, seed, 2000 + index, true)]
            .slice(0, cap)
            .sort((a, b) => a - b)
            .map((i) => list[i]);
    result.byMode[mode] = picked.length;
    result.pairs.push(...picked);
    index++;
  }
  return result;
}
