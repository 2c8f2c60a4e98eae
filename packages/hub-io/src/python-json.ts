// JSON text exactly as Python's `json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=...)` writes it.
// transformers (config.json, generation_config.json, model.safetensors.index.json) and PEFT
// (adapter_config.json) save through json.dumps, so matching it makes our files byte-identical.

/**
 * A number Python holds as `float`: written with a decimal point (`10000.0`), as json.dumps does.
 * JSON.parse cannot tell 10000.0 from 10000, so writers mark floats explicitly with `pyFloat(x)`.
 */
export class PyFloat {
  constructor(readonly value: number) {}
  toJSON(): number {
    return this.value;
  }
}

export const pyFloat = (value: number): PyFloat => new PyFloat(value);

/** Python's `repr(float)`: shortest round-trip digits, scientific below 1e-4 and from 1e16. */
export function pythonFloatRepr(x: number): string {
  if (Number.isNaN(x)) return "NaN";
  if (x === Number.POSITIVE_INFINITY) return "Infinity";
  if (x === Number.NEGATIVE_INFINITY) return "-Infinity";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  // toExponential() with no argument gives the shortest digits that round-trip (like Python's repr).
  const [mant, expStr] = Math.abs(x).toExponential().split("e");
  const exp = Number(expStr);
  const digits = mant.replace(".", "");
  const sign = x < 0 ? "-" : "";
  if (exp < -4 || exp >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const e = Math.abs(exp).toString().padStart(2, "0");
    return `${sign}${m}e${exp < 0 ? "-" : "+"}${e}`;
  }
  if (exp < 0) return `${sign}0.${"0".repeat(-exp - 1)}${digits}`;
  if (digits.length <= exp + 1) return `${sign}${digits}${"0".repeat(exp + 1 - digits.length)}.0`;
  return `${sign}${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
}

function pyString(s: string, ensureAscii: boolean): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ch = s[i];
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (ch === "\b") out += "\\b";
    else if (ch === "\f") out += "\\f";
    else if (c < 0x20 || (ensureAscii && c > 0x7e)) out += `\\u${c.toString(16).padStart(4, "0")}`;
    else out += ch;
  }
  return `${out}"`;
}

/** Python sorts str keys by code point. */
function byCodePoint(a: string, b: string): number {
  const x = [...a].map((c) => c.codePointAt(0)!);
  const y = [...b].map((c) => c.codePointAt(0)!);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

export interface PythonJsonOptions {
  /** Spaces per level; undefined = compact with Python's default separators (", " and ": "). */
  indent?: number;
  sortKeys?: boolean;
  /** Python's default is true (escape every non-ASCII character). */
  ensureAscii?: boolean;
}

/** Serialize like `json.dumps`. Integers print as ints, other numbers and PyFloat as Python floats. */
export function pythonJsonDumps(value: unknown, opts: PythonJsonOptions = {}): string {
  const { indent, sortKeys = false, ensureAscii = true } = opts;
  const nl = (level: number) => (indent === undefined ? "" : `\n${" ".repeat(indent * level)}`);
  const itemSep = indent === undefined ? ", " : ",";
  const walk = (v: unknown, level: number): string => {
    if (v === null || v === undefined) return "null";
    if (v instanceof PyFloat) return pythonFloatRepr(v.value);
    if (typeof v === "boolean") return v ? "true" : "false";
    if (typeof v === "number") return Number.isInteger(v) && !Object.is(v, -0) ? String(v) : pythonFloatRepr(v);
    if (typeof v === "bigint") return v.toString();
    if (typeof v === "string") return pyString(v, ensureAscii);
    if (Array.isArray(v)) {
      if (v.length === 0) return "[]";
      return `[${v.map((x) => nl(level + 1) + walk(x, level + 1)).join(itemSep)}${nl(level)}]`;
    }
    if (typeof v === "object") {
      let keys = Object.keys(v as object).filter((k) => (v as Record<string, unknown>)[k] !== undefined);
      if (sortKeys) keys = keys.sort(byCodePoint);
      if (keys.length === 0) return "{}";
      const body = keys.map(
        (k) => `${nl(level + 1)}${pyString(k, ensureAscii)}: ${walk((v as Record<string, unknown>)[k], level + 1)}`,
      );
      return `{${body.join(itemSep)}${nl(level)}}`;
    }
    throw new TypeError(`cannot serialize ${typeof v} as JSON`);
  };
  return walk(value, 0);
}
