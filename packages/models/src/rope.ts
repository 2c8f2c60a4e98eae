// RoPE inverse frequencies with the scalings transformers implements in
// modeling_rope_utils.py (_compute_default / _compute_linear / _compute_llama3_parameters).
import { ropeInvFreq } from "@kiln/tensor";
import type { RopeScaling } from "./config.js";

/** inv_freq for `rotaryDim` rotating dims: θ^(−2i/d), then scaled as the config asks. */
export function computeInvFreq(rotaryDim: number, theta: number, scaling: RopeScaling): Float32Array {
  // transformers computes θ^(arange(0, d, 2)/d) in fp32: round the exponent base result to f32.
  const inv = ropeInvFreq(rotaryDim, theta);
  if (scaling.type === "default") return inv;
  if (scaling.type === "linear") return inv.map((f) => f / scaling.factor);
  // llama3: long wavelengths are divided by `factor`, short ones kept, the band between interpolated.
  const { factor, lowFreqFactor, highFreqFactor, originalMaxPositionEmbeddings: old } = scaling;
  const lowFreqWavelen = old / lowFreqFactor;
  const highFreqWavelen = old / highFreqFactor;
  const out = new Float32Array(inv.length);
  for (let i = 0; i < inv.length; i++) {
    const f = inv[i];
    const wavelen = (2 * Math.PI) / f;
    const scaled = wavelen > lowFreqWavelen ? f / factor : f;
    if (wavelen < highFreqWavelen || wavelen > lowFreqWavelen) out[i] = scaled;
    else {
      const smooth = (old / wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
      out[i] = ((1 - smooth) * scaled) / factor + smooth * scaled;
    }
  }
  return out;
}
