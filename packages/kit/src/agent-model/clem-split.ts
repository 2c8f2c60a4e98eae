// The one train/evaluation split of clembench instances for everything built on the embedded agent
// model: its corpus trains on training instances only, and every evaluation (the ARP clemscore table,
// the model card's measurement) plays held-out instances only. An instance is named by its index in
// the game's full instance list (file order, every experiment, no filter), as ClemGameEnvironment's
// `pick` receives it when no `filter` is given.
import { clembench } from "@kiln/benchmarks";

/** Every fifth instance (index 0, 5, 10, …) is held out. */
export const CLEM_HELDOUT_EVERY = 5;

/** Whether the instance at `index` of a game's instance list is held out for evaluation. */
export function isHeldOutInstance(index: number): boolean {
  return index % CLEM_HELDOUT_EVERY === 0;
}

/** Whether the instance at `index` may be trained on (the complement of isHeldOutInstance). */
export function isTrainingInstance(index: number): boolean {
  return !isHeldOutInstance(index);
}

/** Indices (into the game's full instance list) of one side of the split. */
export function clemSplitIndices(game: string, split: "train" | "heldout", dataDir?: string): number[] {
  const def = clembench.getGame(game);
  const all = clembench.listEpisodes(def.name, clembench.loadGameInstances(def.name, dataDir));
  const keep = split === "heldout" ? isHeldOutInstance : isTrainingInstance;
  return all.map((_, i) => i).filter(keep);
}
