// Python value semantics that upstream's outputs depend on: float repr, round(x, 2),
// json.dumps, str() of argument values and the TypeError texts of a bad call.
// tau2 hashes `json.dumps(db.model_dump(), sort_keys=True, default=str)` (src/tau2/utils/utils.py
// get_dict_hash), so our bytes must equal CPython's for the hash to be comparable.
import { compareCodePoints, pythonFloatRepr, pythonJsonString as pyJsonString } from "@kiln/hub-io";

export { compareCodePoints, pyJsonString };

/** Python `repr(float)` (`nan`, `inf` for the non-finite): hub-io's, the digits every Python JSON in kiln uses. */
export function pyFloatRepr(x: number): string {
  return pythonFloatRepr(x, "repr");
}

/**
 * Python `round(x, 2)` on a float: the double nearest to the correctly rounded decimal,
 * ties to even on the exact binary value. `toFixed` is exact too but breaks ties away from
 * zero; a tie at 2 decimals needs x = odd/8 exactly, so only that case is special-cased.
 */
export function pyRound2(x: number): number {
  if (!Number.isFinite(x)) return x;
  const x8 = x * 8; // exact: scaling by a power of two
  if (Number.isInteger(x8) && Math.abs(x8 % 2) === 1 && Math.abs(x) < 2 ** 49) {
    const lo = Math.floor(x * 100); // x*100 = 12.5*x8 is exact here
    const n = lo % 2 === 0 ? lo : lo + 1;
    return n / 100;
  }
  const r = Number(x.toFixed(2));
  return Math.abs(x) >= 1e21 ? x : r === 0 && x < 0 ? -0 : r;
}

/** Options of Python `json.dumps` that tau2 uses. */
export interface PyJsonOptions {
  sortKeys?: boolean;
  /** Numbers at these keys are Python ints (printed without `.0`); every other number is a float. */
  intKeys?: ReadonlySet<string>;
}

/**
 * Python `json.dumps(value, sort_keys=…, default=str)` with default separators (", ", ": ") and
 * ensure_ascii. Numbers are printed as Python floats: every number in the retail DB is a
 * pydantic `float` field (price, amount, balance, exchange_price_difference).
 *
 * Why this walk is not hub-io's `pythonJsonDumps` (whose float repr, string escaping and key order it
 * shares): the retail DB's numbers are floats unless named in `intKeys` (hub-io's are ints unless marked
 * `PyFloat`), an undefined field is written as null (a pydantic field that is None; hub-io drops it), any
 * other value is written as its string (`default=str`), and the parts are pushed into one array, since the
 * DB hash serialises every record of every episode.
 */
export function pyJsonDumps(value: unknown, options: PyJsonOptions = {}): string {
  const parts: string[] = [];
  write(value, undefined, parts, options);
  return parts.join("");
}

function write(value: unknown, key: string | undefined, out: string[], options: PyJsonOptions): void {
  if (value === null || value === undefined) out.push("null");
  else if (typeof value === "string") out.push(pyJsonString(value));
  else if (typeof value === "boolean") out.push(value ? "true" : "false");
  else if (typeof value === "number") {
    if (key !== undefined && options.intKeys?.has(key) && Number.isInteger(value)) out.push(String(value));
    else if (Number.isNaN(value)) out.push("NaN");
    else if (!Number.isFinite(value)) out.push(value > 0 ? "Infinity" : "-Infinity");
    else out.push(pyFloatRepr(value));
  } else if (Array.isArray(value)) {
    out.push("[");
    value.forEach((v, i) => {
      if (i > 0) out.push(", ");
      write(v, key, out, options);
    });
    out.push("]");
  } else if (value instanceof Map) {
    writeObject(Array.from(value.entries()), out, options);
  } else if (typeof value === "object") {
    writeObject(Object.entries(value as Record<string, unknown>), out, options);
  } else out.push(pyJsonString(String(value)));
}

function writeObject(entries: [string, unknown][], out: string[], options: PyJsonOptions): void {
  if (options.sortKeys) entries.sort((a, b) => compareCodePoints(a[0], b[0]));
  out.push("{");
  entries.forEach(([k, v], i) => {
    if (i > 0) out.push(", ");
    out.push(pyJsonString(k), ": ");
    write(v, k, out, options);
  });
  out.push("}");
}

/** Python's type name of a JSON value, as TypeError messages print it. */
export function pyTypeName(value: unknown): string {
  if (value === null || value === undefined) return "NoneType";
  if (typeof value === "string") return "str";
  if (typeof value === "boolean") return "bool";
  if (typeof value === "number") return Number.isInteger(value) ? "int" : "float";
  if (Array.isArray(value)) return "list";
  return "dict";
}

/**
 * Python `str()` of a JSON-decoded argument, as f-strings in upstream error texts print it.
 * A JSON number without a fraction decodes to a Python int in json.loads, which we cannot
 * tell from a float once parsed; integers print as ints.
 */
export function pyStr(value: unknown): string {
  if (typeof value === "string") return value;
  return pyRepr(value);
}

function pyRepr(value: unknown): string {
  if (value === null || value === undefined) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : pyFloatRepr(value);
  if (typeof value === "string") {
    const q = value.includes("'") && !value.includes('"') ? '"' : "'";
    const body = value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\r/g, "\\r").replace(/\t/g, "\\t");
    return q + (q === "'" ? body.replace(/'/g, "\\'") : body) + q;
  }
  if (Array.isArray(value)) return `[${value.map(pyRepr).join(", ")}]`;
  const entries = Object.entries(value as Record<string, unknown>);
  return `{${entries.map(([k, v]) => `${pyRepr(k)}: ${pyRepr(v)}`).join(", ")}}`;
}

/** CPython's "missing N required positional argument(s)" list: 'a', 'a' and 'b', 'a', 'b', and 'c'. */
export function pyMissingArgsText(names: string[]): string {
  const q = names.map((n) => `'${n}'`);
  if (q.length === 1) return q[0];
  if (q.length === 2) return `${q[0]} and ${q[1]}`;
  return `${q.slice(0, -2).join(", ")}, ${q[q.length - 2]}, and ${q[q.length - 1]}`;
}
