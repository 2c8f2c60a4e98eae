import { describe, expect, it } from "vitest";
import * as T from "../src/index.js";
import { randomArray } from "./helpers.js";

describe("tokenLogProbs", () => {
  it("equals float64 log-softmax at the targets with the ignore index as a number or as { ignoreIndex }", () => {
    const V = 9;
    const N = 5;
    const logits = Float32Array.from(randomArray(N * V, -3, 3));
    const targets = Int32Array.from([2, -7, 8, 0, -7]);
    const expected = Array.from(targets, (t, i) => {
      if (t === -7) return 0;
      const row = Array.from(logits.subarray(i * V, (i + 1) * V));
      const m = Math.max(...row);
      return row[t] - m - Math.log(row.reduce((a, v) => a + Math.exp(v - m), 0));
    });
    for (const ignore of [-7, { ignoreIndex: -7 }] as const) {
      const got = T.tokenLogProbs(new T.Tensor(logits, [N, V]), new T.Tensor(targets, [N], "i32"), ignore).dataSync();
      for (let i = 0; i < N; i++) expect(got[i]).toBeCloseTo(expected[i], 5);
    }
  });
});
