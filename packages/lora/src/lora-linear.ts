// A LoRA linear layer as one autograd node: y = x·Wᵀ + b + s·(x_d·Aᵀ)·Bᵀ (PEFT tuners/lora/layer.py,
// Linear.forward), with W [out, in] frozen (bf16, f16 or f32), A [r, in], B [out, r] trainable and
// x_d = dropout(x) (or x itself). Composing it from linear/mul/add ops costs, per layer and step, an
// extra [tokens × out] adapter output and sum in the forward and an extra [tokens × in] input gradient
// and sum in the backward; here the adapter product is accumulated into the base output by the GEMM
// (`accumulate`), and the adapter's input gradient into the base's.
//
// Backward, with G = ∂L/∂y and u = s·x_d·Aᵀ (saved, [tokens × r]):
//   ∂L/∂B = Gᵀ·u                 [out × r]
//   du    = s·G·B                [tokens × r]
//   ∂L/∂A = duᵀ·x_d              [r × in]
//   ∂L/∂x = G·W (+ du·A when x_d is x, accumulated in the same buffer)
//   ∂L/∂x_d = du·A (when x_d is a separate dropout output; autograd carries it back to x)
//   ∂L/∂W = Gᵀ·x only if W requires grad (never for a frozen base), ∂L/∂b = Σ_rows G.
import { type MatmulShape, Tensor, kernel, record } from "@kiln/tensor";
import { LoraError } from "./errors.js";

function fmt(shape: readonly number[]): string {
  return `[${shape.join(", ")}]`;
}

/** f32 values of a float tensor: the storage itself for f32, a widened copy otherwise. */
function f32Of(t: Tensor): Float32Array {
  return t.dtype === "f32" ? (t.data as Float32Array) : t.toFloat32Array();
}

/** out (+)= a·b with the weight `w` as the right operand, on the active backend (bf16 weights stay 16-bit). */
function gemmWeight(a: Float32Array, w: Tensor, out: Float32Array, shape: MatmulShape): void {
  if (w.dtype === "bf16") kernel("matmulBf16B")(a, w.data as Uint16Array, out, shape);
  else kernel("matmul")(a, f32Of(w), out, shape);
}

function gemm(a: Float32Array, b: Float32Array, out: Float32Array, shape: MatmulShape): void {
  kernel("matmul")(a, b, out, shape);
}

/**
 * `x·Wᵀ + b + s·(xd·Aᵀ)·Bᵀ` as one op. `xd` is the adapter's input (PEFT applies dropout only there);
 * pass `x` itself (the default) when there is no dropout.
 */
export function loraLinear(
  x: Tensor,
  weight: Tensor,
  bias: Tensor | null,
  A: Tensor,
  B: Tensor,
  scaling: number,
  xd: Tensor = x,
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
  if (xd !== x && (xd.rank !== x.rank || xd.shape.some((d, i) => d !== x.shape[i]) || xd.dtype === "i32"))
    throw new LoraError(`loraLinear: adapter input ${fmt(xd.shape)} must match the input ${fmt(x.shape)}`);
  if (!Number.isFinite(scaling)) throw new LoraError(`loraLinear: scaling must be finite, got ${scaling}`);
  const r = A.shape[0];
  const rows = inF === 0 ? 0 : x.size / inF;
  const xs = f32Of(x);
  const xds = xd === x ? xs : f32Of(xd);
  const a = A.data as Float32Array;
  const b = B.data as Float32Array;

  // y = x·Wᵀ (+ bias), then y += u·Bᵀ with u = s·xd·Aᵀ (scaling the rank-r intermediate: r/out of the work).
  const y = new Float32Array(rows * out);
  gemmWeight(xs, weight, y, { batch: 1, m: rows, n: out, k: inF, transB: true });
  if (bias) {
    const bv = f32Of(bias);
    for (let i = 0; i < rows; i++) {
      const o = i * out;
      for (let j = 0; j < out; j++) y[o + j] += bv[j];
    }
  }
  const u = new Float32Array(rows * r);
  gemm(xds, a, u, { batch: 1, m: rows, n: r, k: inF, transB: true });
  for (let i = 0; i < u.length; i++) u[i] *= scaling;
  gemm(u, b, y, { batch: 1, m: rows, n: out, k: r, transB: true, accumulate: true });
  const result = new Tensor(y, [...x.shape.slice(0, -1), out]);

  const separate = xd !== x;
  const inputs: Tensor[] = [x, weight, A, B];
  if (bias) inputs.push(bias);
  if (separate) inputs.push(xd);
  return record(result, "loraLinear", inputs, (grad) => {
    const g = f32Of(grad);
    const needX = x.requiresGrad;
    const needXd = separate && xd.requiresGrad;
    let du: Float32Array | null = null;
    if (A.requiresGrad || needXd || (needX && !separate)) {
      du = new Float32Array(rows * r);
      gemm(g, b, du, { batch: 1, m: rows, n: r, k: out });
      for (let i = 0; i < du.length; i++) du[i] *= scaling;
    }
    let dB: Tensor | null = null;
    if (B.requiresGrad) {
      const d = new Float32Array(out * r);
      gemm(g, u, d, { batch: 1, m: out, n: r, k: rows, transA: true });
      dB = new Tensor(d, B.shape);
    }
    let dA: Tensor | null = null;
    if (A.requiresGrad) {
      const d = new Float32Array(r * inF);
      gemm(du!, xds, d, { batch: 1, m: r, n: inF, k: rows, transA: true });
      dA = new Tensor(d, A.shape);
    }
    let dx: Tensor | null = null;
    if (needX) {
      const d = new Float32Array(rows * inF);
      gemmWeight(g, weight, d, { batch: 1, m: rows, n: inF, k: out });
      if (!separate) gemm(du!, a, d, { batch: 1, m: rows, n: inF, k: r, accumulate: true });
      dx = new Tensor(d, x.shape);
    }
    let dxd: Tensor | null = null;
    if (needXd) {
      const d = new Float32Array(rows * inF);
      gemm(du!, a, d, { batch: 1, m: rows, n: inF, k: r });
      dxd = new Tensor(d, xd.shape);
    }
    let dW: Tensor | null = null;
    if (weight.requiresGrad) {
      const d = new Float32Array(out * inF);
      gemm(g, xs, d, { batch: 1, m: out, n: inF, k: rows, transA: true });
      dW = new Tensor(d, weight.shape);
    }
    let db: Tensor | null = null;
    if (bias?.requiresGrad) {
      const d = new Float32Array(out);
      for (let i = 0; i < rows; i++) {
        const o = i * out;
        for (let j = 0; j < out; j++) d[j] += g[o + j];
      }
      db = new Tensor(d, bias.shape);
    }
    const grads: (Tensor | null)[] = [dx, dW, dA, dB];
    if (bias) grads.push(db);
    if (separate) grads.push(dxd);
    return grads;
  });
}
