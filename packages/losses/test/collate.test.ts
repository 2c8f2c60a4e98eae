import { describe, expect, it } from "vitest";
import {
  LossInputError,
  collatePreference,
  collateSft,
  countTargetTokens,
  lastSpanMask,
  padRows,
  padTokenRows,
} from "../src/index.js";

describe("collators", () => {
  it("right-pads rows, labels only masked tokens, and counts targets after the shift", () => {
    const b = collateSft(
      [
        { ids: [5, 6, 7, 8], mask: [0, 0, 1, 1] },
        { ids: [9, 10], mask: [0, 1] },
      ],
      0,
    );
    expect(b.inputIds.shape).toEqual([2, 4]);
    expect(Array.from(b.inputIds.dataSync())).toEqual([5, 6, 7, 8, 9, 10, 0, 0]);
    expect(Array.from(b.labels.dataSync())).toEqual([-100, -100, 7, 8, -100, 10, -100, -100]);
    expect(Array.from(b.attentionMask.dataSync())).toEqual([1, 1, 1, 1, 1, 1, 0, 0]);
    expect(countTargetTokens(b.labels)).toBe(3);
    expect(() => padRows([{ ids: [1, 2], mask: [1] }], 0)).toThrow(/row 0 has 2 ids but 1 mask values/);
    expect(() => padRows([], 0)).toThrow(LossInputError);
  });

  it("keeps the final span of a mask and stacks chosen rows before rejected rows", () => {
    expect(Array.from(lastSpanMask([1, 1, 0, 0, 1, 1, 0]))).toEqual([0, 0, 0, 0, 1, 1, 0]);
    expect(Array.from(lastSpanMask([0, 0]))).toEqual([0, 0]);
    const p = collatePreference(
      [{ ids: [1, 2, 3], mask: lastSpanMask([0, 0, 1]) }],
      [{ ids: [1, 2, 4, 4], mask: lastSpanMask([0, 0, 1, 1]) }],
      0,
    );
    expect(p.pairs).toBe(1);
    expect(Array.from(p.inputIds.dataSync())).toEqual([1, 2, 3, 0, 1, 2, 4, 4]);
    expect(Array.from(p.completionMask.dataSync())).toEqual([0, 0, 1, 0, 0, 0, 1, 1]);
    expect(() => collatePreference([{ ids: [1], mask: [0] }], [{ ids: [1], mask: [1] }], 0)).toThrow(
      /row 0 has no completion tokens/,
    );
  });

  it("pads token rows to the longest row or to a fixed width, and refuses a width that would cut", () => {
    const p = padTokenRows([[4, 5, 6], Int32Array.from([7])], 9);
    expect([p.B, p.T]).toEqual([2, 3]);
    expect(Array.from(p.ids)).toEqual([4, 5, 6, 7, 9, 9]);
    expect(Array.from(p.attention)).toEqual([1, 1, 1, 1, 0, 0]);
    const wide = padTokenRows([[4, 5], []], 0, 4);
    expect(Array.from(wide.ids)).toEqual([4, 5, 0, 0, 0, 0, 0, 0]);
    expect(Array.from(wide.attention)).toEqual([1, 1, 0, 0, 0, 0, 0, 0]);
    expect(padTokenRows([[]], 0).T).toBe(1);
    expect(() => padTokenRows([[1, 2, 3]], 0, 2)).toThrow(/width 2 must be an integer ≥ the longest row \(3 tokens\)/);
    expect(() => padTokenRows([], 0)).toThrow(LossInputError);
    const sft = collateSft([{ ids: [1, 2], mask: [0, 1] }], 0, -100, 4);
    expect(sft.labels.shape).toEqual([1, 4]);
    expect(Array.from(sft.labels.dataSync())).toEqual([-100, 2, -100, -100]);
  });
});
