// A LoRA linear layer as one autograd node: y = x·Wᵀ + b + s·(x_d·Aᵀ)·Bᵀ (PEFT tuners/lora/layer.py,
// Linear.forward), with W [out, in] frozen (bf16, f16 or f32), A [r, in], B [out, r] trainable and
// x_d = dropout(x) (or x itself). Composing it from linear/mul/add/dropout ops costs, per layer and
// step, an extra [tokens × out] adapter output and sum in the forward and an extra [tokens × in] input
// gradient and sum in the backward (two with dropout); here the adapter product is accumulated into
// the base output by the GEMM (`accumulate`), and the adapter's input gradient into the base's.
//
// Backward, with G = ∂L/∂y, M the dropout mask scaled by 1/(1−p) (all ones without dropout) and
// u = s·x_d·Aᵀ (saved, [tokens × r]):
//   ∂L/∂B = Gᵀ·u                 [out × r]
//   du    = s·G·B                [tokens × r]
//   ∂L/∂A = duᵀ·x_d              [r × in]
//   ∂L/∂x = G·W + M ⊙ (du·A)     (without dropout the GEMM accumulates du·A into the same buffer)
//   ∂L/∂W = Gᵀ·x only if W requires grad (never for a frozen base), ∂L/∂b = Σ_rows G.
import { type MatmulShape, Tensor, argOf, kernel, randomBits, record } from "@kiln/tensor";
import { LoraError } from "./errors.js";

function fmt(shape: readonly number[]): string {
  return `[${shape.join(", ")}]`;
}

/**
 * f32 values of a float tensor as the active backend's kernel argument: the storage itself for f32 (resident
 * in the wasm heap when the tensor lives there), a widened copy otherwise.
 */
function f32Of(t: Tensor): Float32Array {
  return argOf(t.dtype === "f32" ? t : t.to("f32")) as Float32Array;
}

/** Shape argument of an elementwise `binary` kernel call over n contiguous elements. */
function flat(n: number) {
  return { shape: [n], aStrides: [1], bStrides: [1] };
}

/** A zero-filled f32 buffer on the active backend (its tensor, and the kernel argument). */
function buffer(shape: readonly number[]): [Tensor, Float32Array] {
  const t = Tensor.output(shape);
  return [t, argOf(t) as Float32Array];
}

/** out (+)= a·b with the weight `w` as the right operand, on the active backend (bf16 weights stay 16-bit). */
function gemmWeight(a: Float32Array, w: Tensor, out: Float32Array, shape: MatmulShape): void {
  if (w.dtype === "bf16") kernel("matmulBf16B")(a, argOf(w) as Uint16Array, out, shape);
  else kernel("matmul")(a, f32Of(w), out, shape);
}

function gemm(a: Float32Array, b: Float32Array, out: Float32Array, shape: MatmulShape): void {
  kernel("matmul")(a, b, out, shape);
}

/** Dropout on the adapter's input (PEFT applies it only there). */
export interface LoraDropout {
  /** Drop probability in [0, 1). */
  p: number;
  seed: number;
  /** Counter offset of the first element (a fresh range per call, e.g. `nextRngSequence() * x.size`). */
  offset: number;
}

/**
 * The Philox stream of `@kiln/tensor`'s `dropout` op: the fused mask is the one `dropout(x, p, {seed,
 * offset})` draws, so the fused and the composed layer train identically.
 */
const DROPOUT_STREAM = 0x0d0d;

/**
 * Keep flags of inverted dropout: element i is kept iff its uniform (bits >>> 8)·2⁻²⁴ is ≥ p, i.e. iff
 * bits >>> 8 ≥ ⌈p·2²⁴⌉ (scaling by a power of two is exact, so this is the same test in integers).
 */
function dropoutKeep(d: LoraDropout, n: number): Uint8Array {
  const bits = new Uint32Array(n);
  randomBits(d.seed, d.offset, bits, DROPOUT_STREAM);
  const threshold = Math.ceil(d.p * 2 ** 24);
  const keep = new Uint8Array(n);
  for (let i = 0; i < n; i++) keep[i] = bits[i] >>> 8 >= threshold ? 1 : 0;
  return keep;
}

/** `x·Wᵀ + b + s·(dropout(x)·Aᵀ)·Bᵀ` as one op (see the header for the gradients). */
export function loraLinear(
  x: Tensor,
  weight: Tensor,
  bias: Tensor | null,
  A: Tensor,
  B: Tensor,
  scaling: number,
  dropout?: LoraDropout,
): Tensor {
  if (weight.rank !== 2) throw new LoraError(`loraLinear: weight must be [out, in], got ${fmt(weight.shape)}`);
  const [out, inF] = weight.shape;
  if (x.rank < 1 || x.shape[x.rank - 1] !== inF)
    throw new LoraError(`loraLinear: input ${fmt(x.shape)} must end in the weight's ${inF} input features`);
  if (x.dtype === "i32") throw new LoraError("loraLinear: input must be a float tensor, got i32");
  if (weight.dtype === "i32") throw new LoraError("loraLinear: weight must be a float tensor, got i32");
  if (A.dtype !== "f32" || B.dtype !== "f32")
    throw new LoraError(`loraLinear: lora_A and lora_B must be f32, got ${A.dtype} and ${B.dtype}`);
  if (A.rank !== 2 || B.rank !== 2 || A.shape[1] !== inF || B.shape[0] !== out || B.shape[1] !== A.shape[0])
    throw new LoraError(
      `loraLinear: lora_A ${fmt(A.shape)} and lora_B ${fmt(B.shape)} must be [r, ${inF}] and [${out}, r]`,
    );
  if (bias && (bias.rank !== 1 || bias.shape[0] !== out))
    throw new LoraError(`loraLinear: bias must be [${out}], got ${fmt(bias.shape)}`);
  if (!Number.isFinite(scaling)) throw new LoraError(`loraLinear: scaling must be finite, got ${scaling}`);
  if (dropout && !(dropout.p >= 0 && dropout.p < 1))
    throw new LoraError(`loraLinear: dropout p must be in [0, 1), got ${dropout.p}`);
  const r = A.shape[0];
  const rows = inF === 0 ? 0 : x.size / inF;
  const xs = f32Of(x);
  // x_d = x ⊙ M, M = keep / (1 − p): the same products as the dropout op's x·mask.
  const keep = dropout && dropout.p > 0 ? dropoutKeep(dropout, x.size) : null;
  const keepScale = dropout ? 1 / (1 - dropout.p) : 1;
  let xds = xs;
  let xdsTensor: Tensor | null = null;
  // The mask as a backend tensor (keepScale or 0), so a device backend applies it with its own kernels.
  let maskTensor: Tensor | null = null;
  if (keep) {
    const scaled = new Float32Array(x.size);
    for (let i = 0; i < scaled.length; i++) if (keep[i]) scaled[i] = keepScale;
    maskTensor = Tensor.outputFrom(scaled, [x.size]);
    [xdsTensor, xds] = buffer([x.size]);
    kernel("binary")("mul", xs, argOf(maskTensor) as Float32Array, xds, flat(x.size));
  }
  const a = f32Of(A);
  const b = f32Of(B);

  // y = x·Wᵀ (+ bias), then y += u·Bᵀ with u = s·xd·Aᵀ (scaling the rank-r intermediate: r/out of the work).
  const result = Tensor.output([...x.shape.slice(0, -1), out]);
  const y = argOf(result) as Float32Array;
  gemmWeight(xs, weight, y, { batch: 1, m: rows, n: out, k: inF, transB: true });
  if (bias) {
    kernel("binary")("add", y, f32Of(bias), y, { shape: [rows, out], aStrides: [out, 1], bStrides: [0, 1] });
  }
  const [uTensor, u] = buffer([rows * r]);
  gemm(xds, a, u, { batch: 1, m: rows, n: r, k: inF, transB: true });
  kernel("binaryScalar")("mul", u, scaling, u, rows * r, false);
  gemm(u, b, y, { batch: 1, m: rows, n: out, k: r, transB: true, accumulate: true });

  const inputs: Tensor[] = [x, weight, A, B];
  if (bias) inputs.push(bias);
  // The backward reads u and x_d besides the inputs: temporaries of this op (freed once its backward ran).
  const saved: Tensor[] = [uTensor];
  if (xdsTensor) saved.push(xdsTensor);
  if (maskTensor) saved.push(maskTensor);
  return record(
    result,
    "loraLinear",
    inputs,
    (grad) => {
      const g = f32Of(grad);
      const xsB = f32Of(x);
      const xdsB = xdsTensor ? (argOf(xdsTensor) as Float32Array) : xsB;
      const aB = f32Of(A);
      const bB = f32Of(B);
      const uB = argOf(uTensor) as Float32Array;
      const needX = x.requiresGrad;
      let duTensor: Tensor | null = null;
      let du: Float32Array | null = null;
      if (A.requiresGrad || needX) {
        [duTensor, du] = buffer([rows * r]);
        gemm(g, bB, du, { batch: 1, m: rows, n: r, k: out });
        kernel("binaryScalar")("mul", du, scaling, du, rows * r, false);
      }
      let dB: Tensor | null = null;
      if (B.requiresGrad) {
        const [t, d] = buffer(B.shape);
        gemm(g, uB, d, { batch: 1, m: out, n: r, k: rows, transA: true });
        dB = t;
      }
      let dA: Tensor | null = null;
      if (A.requiresGrad) {
        const [t, d] = buffer(A.shape);
        gemm(du as Float32Array, xdsB, d, { batch: 1, m: r, n: inF, k: rows, transA: true });
        dA = t;
      }
      let dx: Tensor | null = null;
      if (needX) {
        const [t, d] = buffer(x.shape);
        gemmWeight(g, weight, d, { batch: 1, m: rows, n: inF, k: out });
        if (keep) {
          // the dropout op's backward (g·mask) and the gradient sum, in one pass
          const [tmpTensor, tmp] = buffer([rows * inF]);
          gemm(du as Float32Array, aB, tmp, { batch: 1, m: rows, n: inF, k: r });
          const n = rows * inF;
          kernel("binary")("mul", tmp, argOf(maskTensor as Tensor) as Float32Array, tmp, flat(n));
          kernel("binary")("add", d, tmp, d, flat(n));
          tmpTensor.dispose();
        } else {
          gemm(du as Float32Array, aB, d, { batch: 1, m: rows, n: inF, k: r, accumulate: true });
        }
        dx = t;
      }
      duTensor?.dispose();
      let dW: Tensor | null = null;
      if (weight.requiresGrad) {
        const [t, d] = buffer(weight.shape);
        gemm(g, xsB, d, { batch: 1, m: out, n: inF, k: rows, transA: true });
        dW = t;
      }
      let db: Tensor | null = null;
      if (bias?.requiresGrad) {
        const [t, d] = buffer(bias.shape);
        kernel("reduce")("sum", g, d, 1, rows, out);
        db = t;
      }
      const grads: (Tensor | null)[] = [dx, dW, dA, dB];
      if (bias) grads.push(db);
      return grads;
    },
    undefined,
    saved,
  );
}
