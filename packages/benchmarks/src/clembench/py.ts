// Python semantics that change game outcomes or score files, written once so every game master
// parses, rounds and serialises exactly as the reference (CPython 3 + numpy/pandas) does.
import { PyFloat, pyFloat, pythonFloatRepr, pythonJsonDumps } from "@kiln/hub-io";

// PyFloat (a number Python holds as a float: clemcore's scores.json tells `100` from `100.0`) and the
// json.dumps serialiser are hub-io's, the ones that also write Hugging Face config files.
export { PyFloat, pyFloat };

/** The numeric value of a score (unwraps PyFloat, maps booleans to 0/1). Non-numbers give NaN. */
export function toNumber(v: unknown): number {
  if (v instanceof PyFloat) return v.value;
  if (typeof v === "number") return v;
  if (typeof v === "boolean") return v ? 1 : 0;
  return Number.NaN;
}

// Python's str.isspace() set, used by str.strip()/split() without arguments.
const PY_WS = new Set(
  [
    "\t",
    "\n",
    "\v",
    "\f",
    "\r",
    "\x1c",
    "\x1d",
    "\x1e",
    "\x1f",
    " ",
    "\x85",
    "\xa0",
    "\u1680",
    "\u2000",
    "\u2001",
    "\u2002",
    "\u2003",
    "\u2004",
    "\u2005",
    "\u2006",
    "\u2007",
    "\u2008",
    "\u2009",
    "\u200a",
    "\u2028",
    "\u2029",
    "\u202f",
    "\u205f",
    "\u3000",
  ].map((c) => c),
);

/** Python `s.strip()` / `s.strip(chars)`. */
export function pyStrip(s: string, chars?: string): string {
  const isStrip = chars === undefined ? (c: string) => PY_WS.has(c) : (c: string) => chars.includes(c);
  let a = 0;
  let b = s.length;
  while (a < b && isStrip(s[a])) a++;
  while (b > a && isStrip(s[b - 1])) b--;
  return s.slice(a, b);
}

/** Python `str.isalpha()`: non-empty and every character in a letter category (Lu, Ll, Lt, Lm, Lo). */
export function pyIsAlpha(s: string): boolean {
  return /^[\p{Lu}\p{Ll}\p{Lt}\p{Lm}\p{Lo}]+$/u.test(s);
}

/** Python's `string.punctuation`. */
export const PY_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

/** clemcore `string_utils.remove_punctuation`: delete every ASCII punctuation character. */
export function removePunctuation(s: string): string {
  let out = "";
  for (const c of s) if (!PY_PUNCTUATION.includes(c)) out += c;
  return out;
}

/** Python `s.replace(old, new)` (all occurrences, no `$` patterns in the replacement). */
export function pyReplace(s: string, old: string, replacement: string): string {
  return s.split(old).join(replacement);
}

/**
 * Compile a Python `re` pattern for JavaScript. Differences handled:
 * `(?P<name>` / `(?P=name)` named groups; Python's `$` without MULTILINE also matches before one final
 * newline (→ `(?=\n?$)`); `\A` / `\Z`.
 */
export function pyRegex(
  pattern: string,
  opts: { ignoreCase?: boolean; sticky?: boolean; global?: boolean } = {},
): RegExp {
  let out = "";
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "\\") {
      const n = pattern[i + 1];
      if (!inClass && n === "A") out += "^";
      else if (!inClass && n === "Z") out += "$";
      else out += c + (n ?? "");
      i++;
      continue;
    }
    if (inClass) {
      if (c === "]") inClass = false;
      out += c;
      continue;
    }
    if (c === "[") {
      inClass = true;
      out += c;
      if (pattern[i + 1] === "^") {
        out += "^";
        i++;
      }
      // a leading "]" is a literal in Python classes
      if (pattern[i + 1] === "]") {
        out += "\\]";
        i++;
      }
      continue;
    }
    if (c === "(" && pattern.startsWith("(?P<", i)) {
      out += "(?<";
      i += 3;
      continue;
    }
    if (c === "(" && pattern.startsWith("(?P=", i)) {
      const end = pattern.indexOf(")", i);
      out += `\\k<${pattern.slice(i + 4, end)}>`;
      i = end;
      continue;
    }
    if (c === "$") {
      out += "(?=\\n?$)";
      continue;
    }
    out += c;
  }
  let flags = "";
  if (opts.ignoreCase) flags += "i";
  if (opts.sticky) flags += "y";
  if (opts.global) flags += "g";
  try {
    return new RegExp(out, flags + "u");
  } catch {
    return new RegExp(out, flags);
  }
}

/** Python `re.match(pattern, s)`: anchored at the start, not at the end. */
export function pyMatch(pattern: string, s: string, ignoreCase = false): RegExpExecArray | null {
  const re = pyRegex(pattern, { ignoreCase, sticky: true });
  re.lastIndex = 0;
  return re.exec(s);
}

/** Python `re.search(pattern, s)`. */
export function pySearch(pattern: string, s: string, ignoreCase = false): RegExpExecArray | null {
  return pyRegex(pattern, { ignoreCase }).exec(s);
}

/** Python `re.findall` for a pattern with at most one group. */
export function pyFindAll(pattern: string, s: string, ignoreCase = false): string[] {
  const re = pyRegex(pattern, { ignoreCase, global: true });
  const out: string[] = [];
  for (const m of s.matchAll(re)) out.push(m.length > 1 ? (m[1] ?? "") : m[0]);
  return out;
}

function roundHalfEvenBig(num: bigint, den: bigint): bigint {
  // round num/den (den > 0) to the nearest integer, ties to even
  let q = num / den;
  let r = num % den;
  if (r < 0n) {
    q -= 1n;
    r += den;
  }
  const twice = 2n * r;
  if (twice > den || (twice === den && q % 2n !== 0n)) q += 1n;
  return q;
}

/** The exact value of a finite double as mantissa * 2^exp (mantissa integer). */
export function decomposeDouble(x: number): { mant: bigint; exp: number } {
  const buf = new DataView(new ArrayBuffer(8));
  buf.setFloat64(0, x);
  const hi = buf.getUint32(0);
  const lo = buf.getUint32(4);
  const sign = hi >>> 31 ? -1n : 1n;
  const e = (hi >>> 20) & 0x7ff;
  let mant = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  let exp: number;
  if (e === 0) exp = -1074;
  else {
    mant |= 1n << 52n;
    exp = e - 1075;
  }
  return { mant: sign * mant, exp };
}

/**
 * Python's built-in `round(x, ndigits)` on a float: the exact binary value rounded to `ndigits`
 * decimals, ties to even (so `round(2.675, 2) == 2.67`, `round(0.5) == 0`).
 */
export function pyRound(x: number, ndigits = 0): number {
  if (!Number.isFinite(x)) return x;
  if (x === 0) return x;
  const { mant, exp } = decomposeDouble(x);
  // value = mant * 2^exp; scaled = value * 10^nd
  const nd = ndigits;
  let num = mant;
  let den = 1n;
  if (exp >= 0) num <<= BigInt(exp);
  else den <<= BigInt(-exp);
  if (nd >= 0) num *= 10n ** BigInt(nd);
  else den *= 10n ** BigInt(-nd);
  const q = roundHalfEvenBig(num, den);
  // convert back: q / 10^nd, correctly rounded by the JS parser
  const s = nd >= 0 ? `${q}e-${nd}` : `${q}e${-nd}`;
  const r = Number(s);
  return r === 0 && x < 0 ? -0 : r;
}

/** numpy's `rint`: round to nearest integer, ties to even. */
export function rint(x: number): number {
  if (!Number.isFinite(x)) return x;
  const f = Math.floor(x);
  const d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** numpy/pandas `round(x, decimals)` for float64: `rint(x * 10**d) / 10**d` (not exact, as numpy). */
export function npRound(x: number, decimals: number): number {
  if (!Number.isFinite(x)) return x;
  const f = 10 ** decimals;
  return rint(x * f) / f;
}

/** Python `repr(float)` (`nan`, `inf` for the non-finite): hub-io's, the digits every Python JSON in kiln uses. */
export function pyFloatRepr(x: number): string {
  return pythonFloatRepr(x, "repr");
}

/**
 * Python `json.dumps(value, indent=indent, ensure_ascii=False)`: NaN as the bare token `NaN`,
 * floats as `repr` (PyFloat keeps `100.0`), `", "`/`": "` separators.
 */
export function pyJsonDumps(value: unknown, indent = 2): string {
  return pythonJsonDumps(value, { indent: indent > 0 ? indent : undefined, ensureAscii: false });
}

const NAN_SENTINEL = "\u0000kiln:NaN\u0000";
const INF_SENTINEL = "\u0000kiln:Infinity\u0000";
const NINF_SENTINEL = "\u0000kiln:-Infinity\u0000";

/**
 * Parse JSON as Python's `json.loads` does: the bare tokens `NaN`, `Infinity` and `-Infinity`
 * (which clemcore writes into scores.json) become the numbers they name.
 */
export function parsePyJson(text: string): unknown {
  let out = "";
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      out += c;
      if (c === "\\") {
        out += text[i + 1] ?? "";
        i++;
      } else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') {
      inString = true;
      out += c;
      continue;
    }
    if (text.startsWith("NaN", i)) {
      out += JSON.stringify(NAN_SENTINEL);
      i += 2;
      continue;
    }
    if (text.startsWith("-Infinity", i)) {
      out += JSON.stringify(NINF_SENTINEL);
      i += 8;
      continue;
    }
    if (text.startsWith("Infinity", i)) {
      out += JSON.stringify(INF_SENTINEL);
      i += 7;
      continue;
    }
    out += c;
  }
  return JSON.parse(out, (_k, v) => {
    if (v === NAN_SENTINEL) return Number.NaN;
    if (v === INF_SENTINEL) return Number.POSITIVE_INFINITY;
    if (v === NINF_SENTINEL) return Number.NEGATIVE_INFINITY;
    return v;
  });
}

/** Python `repr(str)`: single quotes unless the text has a single and no double quote; escapes as CPython. */
export function pyStrRepr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === "\\") out += "\\\\";
    else if (ch === quote) out += `\\${quote}`;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, "0")}`;
    else out += ch;
  }
  return out + quote;
}

/** Python `str(list_of_str)`, e.g. `['Copper', 'Lead']`. */
export function pyListRepr(xs: string[]): string {
  return `[${xs.map(pyStrRepr).join(", ")}]`;
}

/** Python `s.split()` (no argument): split on runs of whitespace, dropping empty parts. */
export function pySplitWhitespace(s: string): string[] {
  const out: string[] = [];
  let cur = "";
  for (const c of s) {
    if (PY_WS.has(c)) {
      if (cur) out.push(cur);
      cur = "";
    } else cur += c;
  }
  if (cur) out.push(cur);
  return out;
}
