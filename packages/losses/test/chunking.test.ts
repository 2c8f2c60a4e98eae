// The fused ops hand the backend at most `chunkRows` rows per kernel call (so a backend's scratch
// copy stays one chunk), and the results do not depend on the chunking.
import { backward, referenceKernel, registerKernels, tensor, withBackend } from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import { distillationLoss, sftLoss } from "../src/index.js";
import { randomArray } from "./reference.js";

const calls: number[] = [];
registerKernels("losses-spy", {
  crossEntropyForward: (l, t, loss, lse, rows, vocab, ignore) => {
    calls.push(rows);
    referenceKernel("crossEntropyForward")(l, t, loss, lse, rows, vocab, ignore);
  },
  crossEntropyBackward: (l, t, lse, g, d, rows, vocab, ignore) => {
    calls.push(rows);
    referenceKernel("crossEntropyBackward")(l, t, lse, g, d, rows, vocab, ignore);
  },
  softmaxRows: (l, p, lse, rows, vocab) => {
    calls.push(rows);
    referenceKernel("softmaxRows")(l, p, lse, rows, vocab);
  },
  klDivergenceRows: (s, t, map, grad, loss, lseS, lseT, shape) => {
    calls.push(shape.rows);
    referenceKernel("klDivergenceRows")(s, t, map, grad, loss, lseS, lseT, shape);
  },
});

describe("chunked kernels", () => {
  const V = 50;
  const N = 23;
  const logits = randomArray(N * V, 7, 2);
  const teacher = randomArray(N * V, 8, 2);
  const labels = Int32Array.from({ length: N }, (_, i) => (i % 4 === 0 ? -100 : (i * 7) % V));

  function run(chunkRows: number | undefined) {
    const x = tensor(logits, [N, V]).requireGrad();
    const sft = sftLoss(x, tensor(labels, [N], "i32"), { shift: false, chunkRows });
    backward(sft.loss);
    const y = tensor(logits, [N, V]).requireGrad();
    const kl = distillationLoss(y, tensor(teacher, [N, V]), { kind: "reverse_kl", chunkRows });
    backward(kl.loss);
    return {
      sft: sft.loss.item(),
      kl: kl.loss.item(),
      gx: x.grad?.dataSync() as Float32Array,
      gy: y.grad?.dataSync() as Float32Array,
    };
  }

  it("never passes more than chunkRows rows to a kernel, and chunking does not change values or gradients", () => {
    const whole = withBackend("losses-spy", () => run(undefined));
    for (const chunkRows of [1, 4, 7]) {
      calls.length = 0;
      const chunked = withBackend("losses-spy", () => run(chunkRows));
      expect(calls.length).toBeGreaterThan(4);
      for (const rows of calls) expect(rows).toBeLessThanOrEqual(chunkRows);
      expect(chunked.sft).toBeCloseTo(whole.sft, 6);
      expect(chunked.kl).toBeCloseTo(whole.kl, 6);
      for (let i = 0; i < whole.gx.length; i++) {
        expect(Math.abs(chunked.gx[i] - whole.gx[i])).toBeLessThan(1e-7);
        expect(Math.abs(chunked.gy[i] - whole.gy[i])).toBeLessThan(1e-7);
      }
    }
  });
});
