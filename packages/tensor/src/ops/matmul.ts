// Matrix products. `matmul` folds leading dims into rows when the right side is a
// plain matrix (the linear-layer case: one big GEMM), otherwise runs a batched GEMM
// with NumPy-style batch broadcasting. Transposes are kernel flags, never copies.
import { record } from "../autograd.js";
import { kernel } from "../backend.js";
import { DTypeError, ShapeError, fmtShape } from "../errors.js";
import { broadcastShapes, sizeOf } from "../shape.js";
import { Tensor, argOf } from "../tensor.js";
import { add, broadcastTo, floatData } from "./elementwise.js";
import { reshape } from "./movement.js";
import { sum } from "./reduce.js";

export interface MatmulOptions {
  /** Use Aᵀ (swap the last two dims of a). */
  transA?: boolean;
  /** Use Bᵀ (swap the last two dims of b). */
  transB?: boolean;
}

/** Batched product of 3-D operands (batch 1 broadcasts); b may be bf16 (frozen weights, no grad). */
function bmm(a: Tensor, b: Tensor, transA: boolean, transB: boolean): Tensor {
  const [ba, ra, ca] = a.shape;
  const [bb, rb, cb] = b.shape;
  const m = transA ? ca : ra;
  const k = transA ? ra : ca;
  const kb = transB ? cb : rb;
  const n = transB ? rb : cb;
  if (k !== kb) {
    throw new ShapeError(
      `matmul: inner dims differ: a ${fmtShape(a.shape)}${transA ? "ᵀ" : ""} · b ${fmtShape(b.shape)}${transB ? "ᵀ" : ""} (${k} vs ${kb})`,
    );
  }
  if (ba !== bb && ba !== 1 && bb !== 1) throw new ShapeError(`matmul: batch ${ba} vs ${bb} cannot broadcast`);
  const batch = Math.max(ba, bb);
  const result = Tensor.empty([batch, m, n]);
  const out = argOf(result) as Float32Array;
  const shape = {
    batch,
    m,
    n,
    k,
    transA,
    transB,
    batchStrideA: ba === 1 ? 0 : m * k,
    batchStrideB: bb === 1 ? 0 : k * n,
  };
  if (b.dtype === "bf16") {
    kernel("matmulBf16B")(floatData("matmul", a), argOf(b) as Uint16Array, out, shape);
  } else {
    kernel("matmul")(floatData("matmul", a), floatData("matmul", b), out, shape);
  }
  return record(result, "matmul", [a, b], (g) => {
    let ga: Tensor | null = null;
    let gb: Tensor | null = null;
    if (a.requiresGrad) {
      // C = op(A)·op(B): dop(A) = G·op(B)ᵀ, and for a stored-transposed A, dA = op(B)·Gᵀ.
      ga = transA ? bmm(b.detach(), g, transB, true) : bmm(g, b.detach(), false, !transB);
      if (ba === 1 && batch > 1) ga = sum(ga, 0, true);
    }
    if (b.requiresGrad) {
      gb = transB ? bmm(g, a.detach(), true, transA) : bmm(a.detach(), g, !transA, false);
      if (bb === 1 && batch > 1) gb = sum(gb, 0, true);
    }
    return [ga, gb];
  });
}

/** a @ b over the last two dims with batch broadcasting (torch.matmul for rank ≥ 2). */
export function matmul(a: Tensor, b: Tensor, options: MatmulOptions = {}): Tensor {
  const transA = options.transA ?? false;
  const transB = options.transB ?? false;
  if (a.rank < 2 || b.rank < 2) {
    throw new ShapeError(`matmul: operands need rank ≥ 2, got ${fmtShape(a.shape)} and ${fmtShape(b.shape)}`);
  }
  if (a.dtype === "i32" || b.dtype === "i32")
    throw new DTypeError(`matmul: float tensors only, got ${a.dtype} and ${b.dtype}`);
  if (b.rank === 2 && !transA) {
    const k = a.shape[a.rank - 1];
    const rows = a.size / Math.max(k, 1);
    const out = bmm(reshape(a, [1, rows, k]), reshape(b, [1, ...b.shape]), false, transB);
    const n = out.shape[2];
    return reshape(out, [...a.shape.slice(0, -1), n]);
  }
  const batchA = a.shape.slice(0, -2);
  const batchB = b.shape.slice(0, -2);
  const batchShape = broadcastShapes("matmul", batchA, batchB);
  const batch = sizeOf(batchShape);
  const expand = (t: Tensor, own: readonly number[]) =>
    sizeOf(own) === batch || sizeOf(own) === 1
      ? reshape(t, [sizeOf(own), ...t.shape.slice(-2)])
      : reshape(broadcastTo(t, [...batchShape, ...t.shape.slice(-2)]), [batch, ...t.shape.slice(-2)]);
  const out = bmm(expand(a, batchA), expand(b, batchB), transA, transB);
  return reshape(out, [...batchShape, out.shape[1], out.shape[2]]);
}

/** x·Wᵀ (+ bias) with W stored [out, in] as torch.nn.Linear; W may be bf16 (frozen). */
export function linear(x: Tensor, weight: Tensor, bias?: Tensor | null): Tensor {
  if (weight.rank !== 2) throw new ShapeError(`linear: weight must be [out, in], got ${fmtShape(weight.shape)}`);
  if (x.shape[x.rank - 1] !== weight.shape[1]) {
    throw new ShapeError(
      `linear: input ${fmtShape(x.shape)} has ${x.shape[x.rank - 1]} features, weight ${fmtShape(weight.shape)} expects ${weight.shape[1]}`,
    );
  }
  const y = matmul(x, weight, { transB: true });
  return bias ? add(y, bias) : y;
}
