import { describe, expect, it } from "vitest";
import { clemSplitIndices, isHeldOutInstance, isTrainingInstance } from "../../src/agent-model/clem-split.js";

describe("the clembench train/held-out split", () => {
  it("holds out every fifth instance and trains on the rest, disjointly, for every game", () => {
    expect([0, 1, 4, 5, 10].map(isHeldOutInstance)).toEqual([true, false, false, true, true]);
    for (const game of ["wordle", "taboo", "referencegame", "imagegame", "privateshared"]) {
      const train = clemSplitIndices(game, "train");
      const heldout = clemSplitIndices(game, "heldout");
      expect(heldout.length).toBeGreaterThan(0);
      expect(train.length).toBeGreaterThan(heldout.length);
      expect(train.filter((i) => heldout.includes(i))).toEqual([]);
      expect(train.every(isTrainingInstance) && heldout.every(isHeldOutInstance)).toBe(true);
      expect([...train, ...heldout].sort((a, b) => a - b)).toEqual(
        Array.from({ length: train.length + heldout.length }, (_, i) => i),
      );
    }
  });
});
