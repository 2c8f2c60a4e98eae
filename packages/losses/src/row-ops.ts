// In-place passes over one row of a [rows × V] buffer, kept as small monomorphic loops so the
// engine optimises each on its own.

/** d[o..o+V) *= c. */
export function scaleRow(d: Float32Array, o: number, V: number, c: number): void {
  for (let j = o; j < o + V; j++) d[j] *= c;
}
