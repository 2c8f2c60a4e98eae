// Op outputs that a kernel overwrites completely are allocated without zeroing (`Tensor.empty`): a reused
// pool block still holds the previous tensor's values. Here the pool is first filled with NaN blocks of every
// size class, then a training step and a set of ops run inside tidy(); their values and gradients must be
// bit-identical to the same computation on a pool of fresh (zero) memory, and close to the js reference. A
// kernel that read an element it should have written (or an op that wrongly skipped the zeroing its kernel
// accumulates into) would show up as NaN or as a different bit pattern.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as T from "../src/index.js";
import { expectClose, randomArray } from "./helpers.js";

let nativeLoaded = false;

beforeAll(async () => {
  await T.initBackend("wasm", { threads: 2, activate: false });
  try {
    await T.initBackend("native", { threads: 1, activate: false });
    nativeLoaded = true;
  } catch (err) {
    if (process.env.KILN_NATIVE === "required") throw err;
    console.log(`stale-pool suite: native NOT RUN (${(err as Error).message.split("\n")[0]})`);
  }
});

afterAll(() => {
  if (nativeLoaded) T.disposeNativeBackend();
  T.disposeWasmBackend();
});

/** Leaves three NaN-filled blocks of every pool size class up to 8 MiB in the active backend's pool. */
function poisonPool(): void {
  T.tidy(() => {
    for (let c = 0; T.sizeClassBytes(c) <= 8 * 2 ** 20; c++) {
      const n = Math.max(1, Math.floor(T.sizeClassBytes(c) / 4));
      for (let i = 0; i < 3; i++) T.full([n], Number.NaN);
    }
  });
}

const from = (shape: number[], seed: number, lo = -1, hi = 1) =>
  T.Tensor.fromHost(
    randomArray(
      shape.reduce((a, b) => a * b, 1),
      lo,
      hi,
      seed,
    ),
    shape,
  );

/** A small pre-norm decoder block stack plus a grab bag of ops; returns every output and gradient as host arrays. */
function step(poison: boolean): Float32Array[] {
  const B = 2;
  const S = 20; // ≥ 16 query rows: native runs attention's products on BLAS
  const D = 32;
  const H = 4;
  const V = 40;
  const hd = D / H;
  const params = {
    embed: from([V, D], 1).requireGrad(),
    norm: from([D], 2, 0.5, 1.5).requireGrad(),
    wq: from([D, D], 3, -0.3, 0.3).requireGrad(),
    wk: from([D, D], 4, -0.3, 0.3).requireGrad(),
    wv: from([D, D], 5, -0.3, 0.3).requireGrad(),
    wo: from([D, D], 6, -0.3, 0.3).requireGrad(),
    gate: from([48, D], 7, -0.3, 0.3).requireGrad(),
    up: from([48, D], 8, -0.3, 0.3).requireGrad(),
    down: from([D, 48], 9, -0.3, 0.3).requireGrad(),
    head: from([V, D], 10, -0.3, 0.3).requireGrad(),
    scale: from([D], 11).requireGrad(),
  };
  const frozen = from([D, D], 12, -0.3, 0.3).to("bf16");
  const ids = Int32Array.from({ length: B * S }, (_, i) => (i * 7 + 3) % V);
  const targets = Int32Array.from({ length: B * S }, (_, i) => (i % S === S - 1 ? -100 : ids[i + 1]));
  const outs: Float32Array[] = [];
  T.tidy(() => {
    if (poison) poisonPool();
    const invFreq = T.ropeInvFreq(hd, 10000);
    const positions = Int32Array.from({ length: S }, (_, i) => i);
    let h = T.embedding(params.embed, new T.Tensor(ids, [B, S], "i32"));
    for (let layer = 0; layer < 2; layer++) {
      const n = T.rmsNorm(h, params.norm, { eps: 1e-5 });
      const q = T.ropeHeads(T.reshape(T.linear(n, params.wq), [B, S, H, hd]), positions, invFreq);
      const k = T.ropeHeads(T.reshape(T.linear(n, params.wk), [B, S, H, hd]), positions, invFreq);
      const v = T.permute(T.reshape(T.linear(n, params.wv), [B, S, H, hd]), [0, 2, 1, 3]);
      const a = T.reshape(T.permute(T.attention(q, k, v, { causal: true }), [0, 2, 1, 3]), [B, S, D]);
      h = T.add(h, T.linear(a, params.wo));
      const m = T.mul(T.rmsNorm(h, params.norm, { eps: 1e-5 }), params.scale); // row broadcast
      h = T.add(h, T.linear(T.swiglu(T.linear(m, params.gate), T.linear(m, params.up)), params.down));
      h = T.add(h, T.linear(T.silu(m), frozen)); // bf16 weight
    }
    const parts = T.split(h, [10, 22], 2);
    const rejoined = T.concat([T.exp(T.mul(parts[0], 0.1)), T.tanh(parts[1])], 2);
    const cols = T.sum(T.narrow(rejoined, 2, 3, 20), -1, true); // [B, S, 1]: column broadcast below
    const mixed = T.div(T.sub(rejoined, cols), T.add(T.clamp(T.abs(cols), 0.5), 1));
    const logits = T.linear(T.where(T.compare("gt", mixed, 0), mixed, T.mul(mixed, 0.5)), params.head);
    const ce = T.crossEntropy(T.reshape(logits, [B * S, V]), new T.Tensor(targets, [B * S], "i32"));
    const probs = T.softmax(T.transpose(logits, 1, 2), -1);
    const picked = T.gather(
      probs,
      2,
      T.tensor(
        Array.from({ length: B * V * 3 }, (_, i) => i % S),
        [B, V, 3],
        "i32",
      ),
    );
    const loss = T.add(ce, T.mean(T.mul(picked, picked)));
    if (poison) poisonPool();
    T.backward(loss);
    outs.push(loss.toFloat32Array(), logits.toFloat32Array(), probs.toFloat32Array());
    for (const p of Object.values(params)) outs.push((p.grad as T.Tensor).toFloat32Array());
  });
  return outs;
}

const backends = ["wasm", "native"];

describe.each(backends)("uninitialised outputs on %s", (backend) => {
  it("a step over a NaN-filled pool equals the step over fresh memory bit for bit, and js within tolerance", (ctx) => {
    if (backend === "native" && !nativeLoaded) ctx.skip();
    const reference = T.withBackend("js", () => step(false));
    const clean = T.withBackend(backend, () => step(false));
    const dirty = T.withBackend(backend, () => step(true));
    expect(dirty.length).toBe(clean.length);
    for (let i = 0; i < clean.length; i++) {
      expect(dirty[i].some(Number.isNaN), `output ${i} read stale pool memory`).toBe(false);
      expect(Array.from(dirty[i]), `output ${i}`).toEqual(Array.from(clean[i]));
      expectClose(clean[i], reference[i], 2e-3, 1e-5);
    }
  });
});
