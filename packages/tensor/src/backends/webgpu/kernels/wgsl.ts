// WGSL fragments shared by the kernels.
import type { GpuDType } from "../runtime.js";

/**
 * `fn <name>(i: u32) -> f32` reading element i of `array` as f32: bf16 and f16 are packed two per
 * u32 word (element 0 in the low half, as a little-endian Uint16Array), u8 four per word.
 */
export function loadElement(name: string, array: string, dtype: GpuDType): string {
  switch (dtype) {
    case "f32":
      return `fn ${name}(i: u32) -> f32 { return ${array}[i]; }`;
    case "bf16":
      return `fn ${name}(i: u32) -> f32 { let w = ${array}[i >> 1u]; return bitcast<f32>(select(w << 16u, w & 0xffff0000u, (i & 1u) == 1u)); }`;
    case "f16":
      return `fn ${name}(i: u32) -> f32 { return unpack2x16float(${array}[i >> 1u])[i & 1u]; }`;
    case "u8":
      return `fn ${name}(i: u32) -> f32 { return f32((${array}[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu); }`;
    case "i32":
      return `fn ${name}(i: u32) -> f32 { return f32(${array}[i]); }`;
    case "u32":
      return `fn ${name}(i: u32) -> f32 { return f32(${array}[i]); }`;
  }
}

/** The WGSL element type a storage array of `dtype` is declared with. */
export function storageType(dtype: GpuDType): string {
  return dtype === "f32" ? "f32" : dtype === "i32" ? "i32" : "u32";
}

export interface BindingDecl {
  name: string;
  /** WGSL element type of the storage array (f32, i32, u32). */
  type: string;
  write?: boolean;
}

/**
 * The uniform struct and storage bindings of a launchRows kernel: `p.row0`/`p.rowEnd` (the chunk's
 * global rows), `p.off<i>` (element offset of operand i inside its bound window; global indices are
 * `p.off<i> + row·perRow + j`, wrapping u32 arithmetic makes negative offsets work) and the kernel's
 * own fields.
 */
export function kernelHeader(fields: string, bindings: BindingDecl[]): string {
  const offs = bindings.map((_, i) => `off${i}: u32,`).join(" ");
  const decls = bindings
    .map(
      (b, i) =>
        `@group(0) @binding(${i + 1}) var<storage, ${b.write ? "read_write" : "read"}> ${b.name}: array<${b.type}>;`,
    )
    .join("\n");
  return `struct Params { row0: u32, rowEnd: u32, ${offs} ${fields} }
@group(0) @binding(0) var<uniform> p: Params;
${decls}
`;
}

/** Param type letters for kernelHeader's prefix: row0, rowEnd and one offset per binding. */
export function headerTypes(bindings: number): string {
  return `uu${"i".repeat(bindings)}`;
}
