// Generated clembench instances for the embedded agent model's corpus. taboo and guesswhat have 48
// training instances each; a small model trained on their transcripts learnt the 48 answers and wrote them
// whatever the prompt said (taboo: the reversal of a training target for every held-out target; guesswhat:
// questions about training candidates). Instances with fresh targets and candidate lists, in the games' own
// experiments and prompts, make the prompt the only way to predict the reply. Held-out instances are never
// copied: taboo's generated targets exclude every held-out target (spellingDrillWords).
import { clembench } from "@kiln/benchmarks";
import { mulberry32 } from "@kiln/rollout";
import { isTrainingInstance } from "./clem-split.js";
import { spellingDrillWords } from "./drills.js";

/** Games whose corpus can play generated instances. */
export const SYNTHETIC_CLEM_GAMES = ["taboo", "guesswhat"] as const;
export type SyntheticClemGame = (typeof SYNTHETIC_CLEM_GAMES)[number];

function draw<T>(pool: readonly T[], n: number, rng: () => number): T[] {
  const out: T[] = [];
  const taken = new Set<T>();
  while (out.length < n) {
    const x = pool[Math.floor(rng() * pool.length)];
    if (taken.has(x)) continue;
    taken.add(x);
    out.push(x);
  }
  return out;
}

/**
 * `count` generated instances of `game`, spread over its experiments in turn (each experiment keeps its
 * prompts and settings). taboo: a target from spellingDrillWords and three other words of it as the related
 * words. guesswhat: eight candidates drawn from the candidates of the same experiment's training instances
 * (concrete or abstract words, as the experiment has them), one of them the target.
 */
export function syntheticClemInstances(game: SyntheticClemGame, count: number, seed: number): clembench.InstancesFile {
  const file = clembench.loadGameInstances(game);
  const rng = mulberry32(seed * 65_537 + (game === "taboo" ? 1 : 2));
  const experiments = file.experiments.map((e) => ({ ...e, game_instances: [] as clembench.GameInstance[] }));
  // Indices into the game's full list run across experiments in file order (clem-split.ts).
  let flat = 0;
  const trainingOf = file.experiments.map((e) => {
    const all = e.game_instances ?? [];
    const kept = all.filter((_, i) => isTrainingInstance(flat + i));
    flat += all.length;
    return kept;
  });
  const words = game === "taboo" ? spellingDrillWords(seed) : [];
  for (let k = 0; k < count; k++) {
    const x = k % experiments.length;
    const id = 100_000 + k;
    if (game === "taboo") {
      const [target, ...related] = draw(words, 4, rng);
      experiments[x].game_instances.push({
        game_id: id,
        target_word: target,
        related_word: related,
        target_word_stem: clembench.snowballStem(target),
        related_word_stem: related.map((w) => clembench.snowballStem(w)),
      });
    } else {
      const pool = [
        ...new Set(trainingOf[x].flatMap((i) => (i as { candidate_list?: string[] }).candidate_list ?? [])),
      ];
      const candidates = draw(pool, Math.min(8, pool.length), rng);
      experiments[x].game_instances.push({
        game_id: id,
        target_word: candidates[Math.floor(rng() * candidates.length)],
        candidate_list: candidates,
      });
    }
  }
  return { experiments: experiments.filter((e) => e.game_instances.length > 0) };
}
