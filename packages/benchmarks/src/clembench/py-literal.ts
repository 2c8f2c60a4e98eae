// `ast.literal_eval` for the Python literals textmapworld stores in its instances (strings, numbers,
// True/False/None, lists, tuples, dicts). Tuples become arrays; dict keys that are not strings are keyed by
// their JSON text.
import { InstanceError } from "./errors.js";
import { pyStrRepr } from "./py.js";

/** Marks arrays that were Python tuples (so `pyRepr` prints them with parentheses). */
export const PY_TUPLE: unique symbol = Symbol("pyTuple");

/** A tuple-marked array. */
export function pyTuple<T>(xs: T[]): T[] {
  Object.defineProperty(xs, PY_TUPLE, { value: true, enumerable: false });
  return xs;
}

/** Python `repr` of a literal value (str/int/float/bool/None/list/tuple/dict), as `str(dict)` prints it. */
export function pyRepr(v: unknown): string {
  if (v === null || v === undefined) return "None";
  if (v === true) return "True";
  if (v === false) return "False";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(v);
  if (typeof v === "string") return pyStrRepr(v);
  if (Array.isArray(v)) {
    const inner = v.map(pyRepr).join(", ");
    if ((v as unknown as Record<symbol, boolean>)[PY_TUPLE]) return v.length === 1 ? `(${inner},)` : `(${inner})`;
    return `[${inner}]`;
  }
  if (typeof v === "object")
    return `{${Object.entries(v as Record<string, unknown>)
      .map(([k, x]) => `${pyStrRepr(k)}: ${pyRepr(x)}`)
      .join(", ")}}`;
  return String(v);
}

export function pyLiteralEval(src: string): unknown {
  let i = 0;
  const ws = () => {
    while (i < src.length && /\s/.test(src[i])) i++;
  };
  const fail = (what: string): never => {
    throw new InstanceError(`Python literal: ${what} at offset ${i} in ${JSON.stringify(src.slice(0, 60))}`);
  };
  const str = (): string => {
    const q = src[i++];
    let out = "";
    while (i < src.length && src[i] !== q) {
      if (src[i] === "\\") {
        const n = src[i + 1];
        const map: Record<string, string> = { n: "\n", t: "\t", r: "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0" };
        if (n in map) out += map[n];
        else if (n === "x") {
          out += String.fromCharCode(Number.parseInt(src.slice(i + 2, i + 4), 16));
          i += 2;
        } else if (n === "u") {
          out += String.fromCharCode(Number.parseInt(src.slice(i + 2, i + 6), 16));
          i += 4;
        } else out += `\\${n}`;
        i += 2;
      } else out += src[i++];
    }
    if (src[i] !== q) fail("unterminated string");
    i++;
    return out;
  };
  const seq = (close: string): unknown[] => {
    const out: unknown[] = [];
    ws();
    while (src[i] !== close) {
      out.push(val());
      ws();
      if (src[i] === ",") {
        i++;
        ws();
      } else if (src[i] !== close) fail(`expected "," or "${close}"`);
    }
    i++;
    return out;
  };
  const val = (): unknown => {
    ws();
    const c = src[i];
    if (c === "'" || c === '"') return str();
    if (c === "[") {
      i++;
      return seq("]");
    }
    if (c === "(") {
      i++;
      return pyTuple(seq(")"));
    }
    if (c === "{") {
      i++;
      const obj: Record<string, unknown> = {};
      ws();
      while (src[i] !== "}") {
        const k = val();
        ws();
        if (src[i] !== ":") fail('expected ":"');
        i++;
        obj[typeof k === "string" ? k : JSON.stringify(k)] = val();
        ws();
        if (src[i] === ",") {
          i++;
          ws();
        } else if (src[i] !== "}") fail('expected "," or "}"');
      }
      i++;
      return obj;
    }
    for (const [word, v] of [
      ["True", true],
      ["False", false],
      ["None", null],
    ] as const)
      if (src.startsWith(word, i)) {
        i += word.length;
        return v;
      }
    const m = /^-?\d+(\.\d+)?([eE][+-]?\d+)?/.exec(src.slice(i));
    if (m) {
      i += m[0].length;
      return Number(m[0]);
    }
    return fail("unexpected character");
  };
  const out = val();
  ws();
  if (i !== src.length) fail("trailing text");
  return out;
}
