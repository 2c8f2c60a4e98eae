// Which decode-forward widths narrower than the scheduler's fixed one are safe
// (docs/ARCHITECTURE.md §Continuous batching, determinism). A decode forward's rows interact only in
// the linear layers' matrix products (norms, RoPE and the MLP's activations are per row; attention is
// per sequence), and a GEMM kernel may take another code path for fewer rows — wasm and native
// stream the weights for fewer than 4 rows instead of tiling — with another summation order. So a
// narrower width is used only once it has been checked, on the active backend with the model's own
// linears (adapters included), that every row comes out bit-identical to the same row in a forward
// of the full width, at another position. The check is redone whenever the backend, a weight's
// dtype or the enabled adapters change.
import { Tensor, getBackend, noGrad, tidy } from "@kiln/tensor";
import type { Linear } from "./linear.js";

const adapterIds = new WeakMap<object, number>();
let nextAdapterId = 0;
const idOf = (o: object) => {
  let id = adapterIds.get(o);
  if (id === undefined) {
    id = nextAdapterId++;
    adapterIds.set(o, id);
  }
  return id;
};

/** What a linear's GEMM code path can depend on, apart from its number of rows. */
function signatureOf(linears: readonly Linear[]): string {
  let s = getBackend();
  for (const l of linears) {
    s += `|${l.weight.dtype}${l.weight.shape.join("x")}${l.bias ? "b" : ""}`;
    for (const a of l.adapters) if (a.enabled) s += `+${idOf(a)}`;
  }
  return s;
}

/** Deterministic, varied input rows (no zeros, so no product is trivially exact). */
function probeRows(rows: number, width: number): Float32Array {
  const x = new Float32Array(rows * width);
  for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 0.7548776662 + 0.5) * (1 + (i % 7) / 8);
  return x;
}

async function forwardRows(linear: Linear, x: Float32Array, rows: number): Promise<Float32Array> {
  const y = tidy(() => noGrad(() => linear.forward(new Tensor(x, [rows, 1, linear.inFeatures]))));
  try {
    return await y.toFloat32ArrayAsync();
  } finally {
    y.dispose();
  }
}

/** Whether `width` rows through every linear give the same bits as those rows at the end of a `full`-row forward. */
export async function linearsRowInvariant(linears: readonly Linear[], width: number, full: number): Promise<boolean> {
  for (const linear of linears) {
    const inF = linear.inFeatures;
    const outF = linear.outFeatures;
    const x = probeRows(full, inF);
    const all = await forwardRows(linear, x, full);
    // The narrow forward holds the last rows of the full one: a row changes position as well as width.
    const part = await forwardRows(linear, x.subarray((full - width) * inF), width);
    const offset = (full - width) * outF;
    for (let i = 0; i < part.length; i++) if (!Object.is(part[i], all[offset + i])) return false;
  }
  return true;
}

/** The decode widths a scheduler may use: powers of two below `full` once checked, else `full`. */
export class DecodeWidths {
  private readonly candidates: number[] = [];
  private signature = "";
  private readonly verified = new Map<number, boolean>();

  constructor(
    private readonly linears: () => Linear[],
    readonly full: number,
    enabled = true,
  ) {
    if (enabled) for (let w = 1; w < full; w *= 2) this.candidates.push(w);
  }

  /** The narrowest checked width that holds `rows` rows. */
  async widthFor(rows: number): Promise<number> {
    if (this.candidates.length === 0 || rows > this.candidates[this.candidates.length - 1]) return this.full;
    const linears = this.linears();
    const signature = signatureOf(linears);
    if (signature !== this.signature) {
      this.signature = signature;
      this.verified.clear();
    }
    for (const width of this.candidates) {
      if (width < rows) continue;
      let ok = this.verified.get(width);
      if (ok === undefined) {
        ok = await linearsRowInvariant(linears, width, this.full);
        this.verified.set(width, ok);
      }
      if (ok) return width;
    }
    return this.full;
  }
}
