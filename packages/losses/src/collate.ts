// Collators: token rows with per-token masks → right-padded [B, T] batches in the layouts the
// losses read. SFT: labels = ids on masked tokens, −100 elsewhere (shifted inside sftLoss; TRL
// assistant_only_loss / completion_only_loss). Preference: all prompt+chosen rows, then all
// prompt+rejected rows, with a completion mask (TRL DataCollatorForPreference; dpoLossFromLogits).
import { Tensor } from "@kiln/tensor";
import { LossInputError } from "./errors.js";

export interface MaskedRow {
  ids: ArrayLike<number>;
  /** 1 where the token is trained on (assistant or completion tokens). */
  mask: ArrayLike<number>;
}

export interface PaddedRows {
  B: number;
  T: number;
  ids: Int32Array;
  mask: Uint8Array;
  attention: Int32Array;
}

export interface PaddedTokenRows {
  B: number;
  T: number;
  /** [B, T] row-major, `padId` after each row's tokens. */
  ids: Int32Array;
  /** [B, T] 1 on tokens, 0 on padding. */
  attention: Int32Array;
}

/**
 * Right-pad token rows with `padId` to `width` columns, or to the longest row (at least 1 token) when
 * no width is given. Every padded batch of the project is laid out by this function.
 */
export function padTokenRows(rows: readonly ArrayLike<number>[], padId: number, width?: number): PaddedTokenRows {
  if (rows.length === 0) throw new LossInputError("padTokenRows: no rows to pad");
  const longest = Math.max(1, ...rows.map((r) => r.length));
  if (width !== undefined && !(Number.isInteger(width) && width >= longest))
    throw new LossInputError(`padTokenRows: width ${width} must be an integer ≥ the longest row (${longest} tokens)`);
  const B = rows.length;
  const T = width ?? longest;
  const ids = new Int32Array(B * T).fill(padId);
  const attention = new Int32Array(B * T);
  rows.forEach((r, b) => {
    ids.set(r, b * T);
    attention.fill(1, b * T, b * T + r.length);
  });
  return { B, T, ids, attention };
}

/**
 * Right-pad rows to `width` columns (default: the longest, at least 1 token) with `padId`; padding has
 * mask 0 and attention 0.
 */
export function padRows(rows: readonly MaskedRow[], padId: number, width?: number): PaddedRows {
  if (rows.length === 0) throw new LossInputError("padRows: no rows to collate");
  for (const [i, r] of rows.entries())
    if (r.mask.length !== r.ids.length)
      throw new LossInputError(`padRows: row ${i} has ${r.ids.length} ids but ${r.mask.length} mask values`);
  const { B, T, ids, attention } = padTokenRows(
    rows.map((r) => r.ids),
    padId,
    width,
  );
  const mask = new Uint8Array(B * T);
  rows.forEach((r, b) => {
    for (let t = 0; t < r.ids.length; t++) mask[b * T + t] = r.mask[t] ? 1 : 0;
  });
  return { B, T, ids, mask, attention };
}

/** The mask restricted to its last contiguous run of 1s (the final assistant turn of a render). */
export function lastSpanMask(mask: ArrayLike<number>): Uint8Array {
  const out = new Uint8Array(mask.length);
  let end = mask.length;
  while (end > 0 && !mask[end - 1]) end--;
  let start = end;
  while (start > 0 && mask[start - 1]) start--;
  out.fill(1, start, end);
  return out;
}

export interface SftCollated {
  /** i32 [B, T] */
  inputIds: Tensor;
  /** i32 [B, T]: ids on masked tokens, −100 elsewhere (unshifted). */
  labels: Tensor;
  /** i32 [B, T] */
  attentionMask: Tensor;
}

/** SFT rows → inputIds, labels (ids where masked, `ignoreIndex` elsewhere) and attention, `width` columns if given. */
export function collateSft(rows: readonly MaskedRow[], padId: number, ignoreIndex = -100, width?: number): SftCollated {
  const p = padRows(rows, padId, width);
  const labels = new Int32Array(p.B * p.T).fill(ignoreIndex);
  for (let i = 0; i < labels.length; i++) if (p.mask[i]) labels[i] = p.ids[i];
  return {
    inputIds: new Tensor(p.ids, [p.B, p.T], "i32"),
    labels: new Tensor(labels, [p.B, p.T], "i32"),
    attentionMask: new Tensor(p.attention, [p.B, p.T], "i32"),
  };
}

export interface PreferenceCollated {
  /** i32 [2P, T]: P chosen rows, then P rejected rows. */
  inputIds: Tensor;
  /** f32 [2P, T]: 1 on completion tokens. */
  completionMask: Tensor;
  attentionMask: Tensor;
  pairs: number;
}

/** Chosen and rejected rows (prompt + completion, mask on the completion) of the same P pairs. */
export function collatePreference(
  chosen: readonly MaskedRow[],
  rejected: readonly MaskedRow[],
  padId: number,
): PreferenceCollated {
  if (chosen.length !== rejected.length)
    throw new LossInputError(`collatePreference: ${chosen.length} chosen rows but ${rejected.length} rejected`);
  for (const [i, r] of [...chosen, ...rejected].entries()) {
    let any = false;
    for (let t = 0; t < r.mask.length && !any; t++) any = r.mask[t] !== 0;
    if (!any) throw new LossInputError(`collatePreference: row ${i} has no completion tokens`);
  }
  const p = padRows([...chosen, ...rejected], padId);
  return {
    inputIds: new Tensor(p.ids, [p.B, p.T], "i32"),
    completionMask: new Tensor(Float32Array.from(p.mask), [p.B, p.T]),
    attentionMask: new Tensor(p.attention, [p.B, p.T], "i32"),
    pairs: chosen.length,
  };
}
