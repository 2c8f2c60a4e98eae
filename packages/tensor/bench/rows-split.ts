// Thread-split probe for the row and elementwise kernels at the sizes of the reference decoder's
// LoRA step (B·T = 512 rows): the same call split and unsplit on one 2-thread kernel instance,
// interleaved, median wall time per call.
//   tsx --conditions=source bench/rows-split.ts [reps]
import { enableRelaxedSimd } from "../src/wasm/features.js";
import { createWasmKernels } from "../src/wasm/index.js";

enableRelaxedSimd();
const reps = Number(process.argv[2] ?? 200);
const k = await createWasmKernels({ threads: 2, relaxedSimd: true });
const probe = k as unknown as { split: "auto" | "never" };
const rnd = (n: number, s = 1) => Float32Array.from({ length: n }, () => (Math.random() * 2 - 1) * s);
const rows = 512;
const cases: [string, number, () => void][] = [];
for (const dim of [256, 1024]) {
  const n = rows * dim;
  const x = rnd(n);
  const w = rnd(dim);
  const out = new Float32Array(n);
  const rstd = new Float32Array(rows);
  const g = rnd(n);
  const dw = new Float32Array(dim);
  cases.push([`rmsNorm ${rows}×${dim}`, n, () => k.rmsNorm(x, w, out, rstd, dim, 1e-5, false)]);
  cases.push([`rmsNormBackward ${rows}×${dim}`, n, () => k.rmsNormBackward(x, w, rstd, g, out, dw, dim, false)]);
  const shape = { batch: 4, heads: dim / 64, seq: 128, headDim: 64, rotaryDim: 64, perBatch: false };
  const cs = rnd(128 * 32);
  cases.push([`ropeForward [4,${dim / 64},128,64]`, n, () => k.ropeForward(x, cs, cs, out, shape)]);
  cases.push([
    `ropeHeads [4,128,${dim / 64},64]`,
    n,
    () => k.ropeForward(x, cs, cs, out, { ...shape, headsLast: true }),
  ]);
}
for (const hidden of [688, 2752]) {
  const n = rows * hidden;
  const [a, b, c, d, e, f] = [rnd(n, 4), rnd(n), new Float32Array(n), new Float32Array(n), rnd(n), new Float32Array(n)];
  cases.push([`swiglu ${rows}×${hidden}`, n, () => k.swiglu(a, b, c, d)]);
  cases.push([`swigluBackward ${rows}×${hidden}`, n, () => k.swigluBackward(a, b, d, e, c, f)]);
}
for (const vocab of [2048, 8192]) {
  const n = rows * vocab;
  const logits = rnd(n, 4);
  const targets = Int32Array.from({ length: rows }, (_, i) => (i * 7) % vocab);
  const loss = new Float32Array(rows);
  const lse = new Float32Array(rows);
  cases.push([
    `crossEntropyForward ${rows}×${vocab}`,
    n,
    () => k.crossEntropyForward(logits, targets, loss, lse, rows, vocab, -100),
  ]);
}
{
  const shape = { batch: 4, heads: 4, tq: 128, tk: 128, dim: 64, causal: true };
  const n = 4 * 4 * 128 * 64;
  const [q, kk, v, o] = [rnd(n), rnd(n), rnd(n), new Float32Array(n)];
  const lse = new Float32Array(4 * 4 * 128);
  cases.push(["attentionForward B=4 H=4 T=128 D=64", n, () => k.attentionForward(q, kk, v, o, lse, shape)]);
}
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
for (const [name, n, run] of cases) {
  const t: Record<string, number[]> = { auto: [], never: [] };
  for (let r = 0; r < reps; r++)
    for (const mode of ["never", "auto"] as const) {
      probe.split = mode;
      const t0 = performance.now();
      run();
      t[mode].push(performance.now() - t0);
    }
  const [m1, m2] = [med(t.never), med(t.auto)];
  console.log(
    `${name.padEnd(36)} ${String(n).padStart(8)} el  1T ${(m1 * 1000).toFixed(0).padStart(5)} µs  split ${(m2 * 1000).toFixed(0).padStart(5)} µs  split/1T ${(m2 / m1).toFixed(2)}`,
  );
}
k.dispose();
