// In training the forward keeps the softmax (CE) or the gradient direction (KL) and the first
// backward rescales it in place; a second backward over the same graph rebuilds the gradient from
// the logits. Both paths must give the same gradient.
import { backward, tensor } from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import { distillationLoss, sftLoss } from "../src/index.js";
import { randomArray } from "./reference.js";

const N = 9;
const V = 41;
const seed = Date.now() % 100_000;

function twoBackwards(make: (x: ReturnType<typeof tensor>) => ReturnType<typeof tensor>) {
  const x = tensor(randomArray(N * V, seed, 3), [N, V]).requireGrad();
  const loss = make(x);
  backward(loss, undefined, { retainGraph: true });
  const first = Float32Array.from(x.grad?.data as Float32Array);
  backward(loss);
  const total = x.grad?.data as Float32Array;
  let worst = 0;
  let scale = 0;
  for (let i = 0; i < first.length; i++) {
    worst = Math.max(worst, Math.abs(total[i] - 2 * first[i]));
    scale = Math.max(scale, Math.abs(first[i]));
  }
  return { worst, scale };
}

describe(`saved softmax vs recomputed gradient (seed ${seed})`, () => {
  const labels = Int32Array.from({ length: N }, (_, i) => (i % 3 === 1 ? -100 : (i * 11) % V));
  const teacher = randomArray(4 * V, seed + 1, 3);
  const mask = Array.from({ length: N }, (_, i) => (i % 4 === 2 ? 0 : 1));
  const teacherRows = Array.from({ length: N }, (_, i) => i % 4);
  const cases: [string, (x: ReturnType<typeof tensor>) => ReturnType<typeof tensor>][] = [
    ["sft cross-entropy", (x) => sftLoss(x, tensor(labels, [N], "i32"), { shift: false }).loss],
    ...(["forward_kl", "reverse_kl"] as const).map(
      (kind) =>
        [
          `${kind} with temperature, mask and teacherRows`,
          (x: ReturnType<typeof tensor>) =>
            distillationLoss(x, tensor(teacher, [4, V]), { kind, temperature: 1.7, mask, teacherRows }).loss,
        ] as [string, (x: ReturnType<typeof tensor>) => ReturnType<typeof tensor>],
    ),
  ];
  for (const [name, make] of cases)
    it(name, () => {
      const { worst, scale } = twoBackwards(make);
      expect(scale).toBeGreaterThan(1e-4);
      expect(worst).toBeLessThan(1e-6 * Math.max(1, scale));
    });
});
