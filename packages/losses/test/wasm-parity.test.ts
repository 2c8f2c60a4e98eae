// The losses on the wasm SIMD backend (softmaxRows and klDivergenceRows kernels, two threads)
// against the js reference backend: values and gradients.
import { type Tensor, backward, disposeWasmBackend, initBackend, tensor, withBackend } from "@kiln/tensor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { distillationLoss, sftLoss } from "../src/index.js";
import { randomArray } from "./reference.js";

const N = 37;
const V = 1031;
const seed = Date.now() % 100_000;

function lossAndGrad(make: (x: Tensor) => Tensor): { value: number; grad: Float32Array } {
  const x = tensor(randomArray(N * V, seed, 4), [N, V]).requireGrad();
  const loss = make(x);
  backward(loss);
  return { value: loss.item(), grad: x.grad?.dataSync() as Float32Array };
}

describe(`losses: wasm backend vs js (seed ${seed})`, () => {
  beforeAll(async () => {
    await initBackend("wasm", { threads: 2, activate: false });
  });
  afterAll(() => disposeWasmBackend());

  const labels = Int32Array.from({ length: N }, (_, i) => (i % 5 === 2 ? -100 : (i * 97) % V));
  const teacher = randomArray(11 * V, seed + 1, 4);
  const mask = Array.from({ length: N }, (_, i) => (i % 6 === 1 ? 0 : 1));
  const teacherRows = Array.from({ length: N }, (_, i) => (i * 3) % 11);
  const cases: [string, (x: Tensor) => Tensor][] = [
    ["sft cross-entropy", (x) => sftLoss(x, tensor(labels, [N], "i32"), { shift: false, chunkRows: 8 }).loss],
  ];
  for (const kind of ["forward_kl", "reverse_kl", "jsd"] as const)
    cases.push([
      `${kind}, temperature 0.7, mask, teacherRows`,
      (x) =>
        distillationLoss(x, tensor(teacher, [11, V]), { kind, temperature: 0.7, mask, teacherRows, chunkRows: 8 }).loss,
    ]);
  cases.push([
    "jsd top-8, mask, teacherRows",
    (x) =>
      distillationLoss(x, tensor(teacher, [11, V]), { kind: "jsd", topK: 8, mask, teacherRows, chunkRows: 8 }).loss,
  ]);
  for (const [name, make] of cases)
    it(name, () => {
      const js = withBackend("js", () => lossAndGrad(make));
      const wasm = withBackend("wasm", () => lossAndGrad(make));
      expect(Math.abs(wasm.value - js.value)).toBeLessThan(1e-5 * Math.max(1, Math.abs(js.value)));
      let worst = 0;
      let scale = 0;
      for (let i = 0; i < js.grad.length; i++) {
        worst = Math.max(worst, Math.abs(wasm.grad[i] - js.grad[i]));
        scale = Math.max(scale, Math.abs(js.grad[i]));
      }
      expect(scale).toBeGreaterThan(0);
      // f32 kernels vs float64 sums in the js reference; reverse KL's S·(s − p − KL) and JSD's
      // S·(s − m − KL(S‖M)) cancel terms of the size of the logits, so a few ulps of those show up
      // relative to the largest gradient (over 40 seeds: KL ≤ 1e-5, JSD ≤ 8e-5 of it).
      expect(worst).toBeLessThan((name.startsWith("jsd") ? 5e-4 : 5e-5) * scale);
    });
});
