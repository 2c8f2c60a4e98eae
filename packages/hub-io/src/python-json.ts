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
  /** Arithmetic and comparisons see the number. */
  valueOf(): number {
    return this.value;
  }
}

export const pyFloat = (value: number): PyFloat => new PyFloat(value);

/**
 * Keys (or array indices) of an object parsed by parsePythonJson whose numbers were written as floats
 * (`0.0`, `1e-05`). Stored under a non-enumerable symbol, so the object still reads as plain data;
 * pythonJsonDumps uses it to write `0.0` back instead of `0`. Spreading or cloning drops it.
 */
export const FLOAT_KEYS: unique symbol = Symbol.for("kiln.hub-io.pythonFloatKeys") as never;

function markFloat(container: object, key: string | number): void {
  let set = (container as { [FLOAT_KEYS]?: Set<string | number> })[FLOAT_KEYS];
  if (!set) {
    set = new Set();
    Object.defineProperty(container, FLOAT_KEYS, { value: set, enumerable: false });
  }
  set.add(key);
}

/** JSON.parse that remembers which numbers were floats (see FLOAT_KEYS); throws SyntaxError with the offset. */
export function parsePythonJson(text: string): unknown {
  let i = 0;
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at offset ${i}`);
  };
  const ws = () => {
    while (i < text.length && (text[i] === " " || text[i] === "\n" || text[i] === "\r" || text[i] === "\t")) i++;
  };
  const NUM = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?/y;
  // A string token from i; JSON.parse checks its escapes.
  const str = (): string => {
    let j = i + 1;
    while (j < text.length && text[j] !== '"') {
      if (text.charCodeAt(j) < 0x20) fail("control character in string");
      j += text[j] === "\\" ? 2 : 1;
    }
    if (j >= text.length) fail("unterminated string");
    const tok = text.slice(i, j + 1);
    i = j + 1;
    return JSON.parse(tok) as string;
  };
  const value = (container?: object, key?: string | number): unknown => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const obj: Record<string, unknown> = {};
      ws();
      if (text[i] === "}") {
        i++;
        return obj;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail("expected a string key");
        const k = str();
        ws();
        if (text[i] !== ":") fail('expected ":"');
        i++;
        Object.defineProperty(obj, k, { value: value(obj, k), enumerable: true, writable: true, configurable: true });
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === "}") {
          i++;
          return obj;
        } else fail('expected "," or "}"');
      }
    }
    if (c === "[") {
      i++;
      const arr: unknown[] = [];
      ws();
      if (text[i] === "]") {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(value(arr, arr.length));
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === "]") {
          i++;
          return arr;
        } else fail('expected "," or "]"');
      }
    }
    if (c === '"') return str();
    for (const [lit, v] of [
      ["true", true],
      ["false", false],
      ["null", null],
      ["NaN", Number.NaN],
      ["Infinity", Number.POSITIVE_INFINITY],
      ["-Infinity", Number.NEGATIVE_INFINITY],
    ] as const) {
      if (text.startsWith(lit, i)) {
        i += lit.length;
        if (typeof v === "number" && container !== undefined) markFloat(container, key!);
        return v;
      }
    }
    NUM.lastIndex = i;
    const m = NUM.exec(text);
    if (!m) fail("unexpected character");
    i += m![0].length;
    if ((m![1] || m![2]) && container !== undefined) markFloat(container, key!);
    return Number(m![0]);
  };
  const v = value();
  ws();
  if (i !== text.length) fail("trailing characters");
  return v;
}

/**
 * Python's `repr(float)`: shortest round-trip digits, scientific below 1e-4 and from 1e16. NaN and the
 * infinities are written as json.dumps writes them (`NaN`, `Infinity`, `-Infinity`), or with
 * `nonFinite: "repr"` as `repr` and `str` do (`nan`, `inf`, `-inf`).
 */
export function pythonFloatRepr(x: number, nonFinite: "json" | "repr" = "json"): string {
  if (Number.isNaN(x)) return nonFinite === "json" ? "NaN" : "nan";
  if (x === Number.POSITIVE_INFINITY) return nonFinite === "json" ? "Infinity" : "inf";
  if (x === Number.NEGATIVE_INFINITY) return nonFinite === "json" ? "-Infinity" : "-inf";
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

/** A JSON string literal as json.dumps writes it (ensure_ascii: every character outside " ".."~" as \\uXXXX, per UTF-16 unit). */
export function pythonJsonString(s: string, ensureAscii = true): string {
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

/**
 * Order by Unicode code point: Python's str order and the order of UTF-8 bytes (Rust's `String` Ord, which
 * the safetensors writer sorts tensor names by). JS `<` compares UTF-16 units, which differs past U+FFFF.
 */
export function compareCodePoints(a: string, b: string): number {
  if (a === b) return 0;
  const ai = a[Symbol.iterator]();
  const bi = b[Symbol.iterator]();
  for (;;) {
    const x = ai.next();
    const y = bi.next();
    if (x.done) return y.done ? 0 : -1;
    if (y.done) return 1;
    const cx = x.value.codePointAt(0) ?? 0;
    const cy = y.value.codePointAt(0) ?? 0;
    if (cx !== cy) return cx < cy ? -1 : 1;
  }
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
  const floats = (c: unknown) => (c as { [FLOAT_KEYS]?: Set<string | number> })[FLOAT_KEYS];
  const item = (c: object, k: string | number, v: unknown, level: number) =>
    typeof v === "number" && Number.isFinite(v) && floats(c)?.has(k) ? pythonFloatRepr(v) : walk(v, level);
  const walk = (v: unknown, level: number): string => {
    if (v === null || v === undefined) return "null";
    if (v instanceof PyFloat) return pythonFloatRepr(v.value);
    if (typeof v === "boolean") return v ? "true" : "false";
    if (typeof v === "number") return Number.isInteger(v) && !Object.is(v, -0) ? String(v) : pythonFloatRepr(v);
    if (typeof v === "bigint") return v.toString();
    if (typeof v === "string") return pythonJsonString(v, ensureAscii);
    if (v instanceof Map) return walk(Object.fromEntries(v), level);
    if (Array.isArray(v)) {
      if (v.length === 0) return "[]";
      return `[${v.map((x, i) => nl(level + 1) + item(v, i, x, level + 1)).join(itemSep)}${nl(level)}]`;
    }
    if (typeof v === "object") {
      let keys = Object.keys(v as object).filter((k) => (v as Record<string, unknown>)[k] !== undefined);
      if (sortKeys) keys = keys.sort(compareCodePoints);
      if (keys.length === 0) return "{}";
      const body = keys.map(
        (k) =>
          `${nl(level + 1)}${pythonJsonString(k, ensureAscii)}: ${item(v, k, (v as Record<string, unknown>)[k], level + 1)}`,
      );
      return `{${body.join(itemSep)}${nl(level)}}`;
    }
    throw new TypeError(`cannot serialize ${typeof v} as JSON`);
  };
  return walk(value, 0);
}

/**
 * Keys of a JSON object text, top level only, in order, duplicates included (JSON.parse — and Python's
 * json.loads — keep only the last of duplicate keys). Tolerates malformed text: an unterminated string
 * ends the scan, an undecodable key is returned as written.
 */
export function topLevelJsonKeys(text: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      if (depth === 1 && expectKey) {
        try {
          keys.push(JSON.parse(text.slice(i, j + 1)) as string);
        } catch {
          keys.push(text.slice(i + 1, j));
        }
        expectKey = false;
      }
      i = j;
    } else if (c === "{" || c === "[") {
      depth++;
      if (depth === 1 && c === "{") expectKey = true;
    } else if (c === "}" || c === "]") depth--;
    else if (c === "," && depth === 1) expectKey = true;
  }
  return keys;
}
