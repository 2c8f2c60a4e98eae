// The `kiln` CLI's one argument parser: every command declares its positionals and options in a
// `CommandSpec`; `parseCommandArgs` reads argv with `node:util` `parseArgs` in strict mode (maintained by
// Node itself, so no dependency), then types and checks every value. Anything a user types that the
// command does not declare is refused (UsageError → exit 2) before the command runs, so before any file
// is written; unknown names come with the closest valid one.
import { parseArgs } from "node:util";
import { UsageError } from "../errors.js";

export { UsageError };

/**
 * How an option's text becomes a value: `integers`/`strings` are comma-separated lists (`--seeds 1,2,3`).
 * Booleans are bare switches (`--resume`); they take no value.
 */
export type OptionType = "string" | "integer" | "number" | "boolean" | "integers" | "strings";

export interface OptionSpec {
  type: OptionType;
  description: string;
  /** Shown in the help (`--out DIR`); default: the type's name. */
  placeholder?: string;
  default?: string | number | boolean;
  /** The only values accepted (string options). */
  choices?: readonly string[];
  /** Inclusive bounds for numbers and each element of `integers`. */
  min?: number;
  max?: number;
  /** May be given several times; the values (and comma-separated parts of `strings`) accumulate in order. */
  multiple?: boolean;
  /** Other names for the same option (e.g. vLLM's spelling); each is accepted and listed in the help. */
  aliases?: readonly string[];
}

export interface PositionalSpec {
  name: string;
  description: string;
  optional?: boolean;
  choices?: readonly string[];
}

export type OptionSpecs = Readonly<Record<string, OptionSpec>>;

export interface CommandSpec<O extends OptionSpecs = OptionSpecs> {
  /** The words after `kiln`, e.g. "eval clem run". */
  name: string;
  /** One line for `kiln help`. */
  summary: string;
  /** A paragraph for `kiln <command> --help`: what it does, what it writes. */
  description?: string;
  positionals?: readonly PositionalSpec[];
  options: O;
  /** Full command lines shown under "examples". */
  examples: readonly string[];
  run: (args: CommandArgs<O>) => Promise<number>;
}

type ScalarOf<T extends OptionType> = T extends "string"
  ? string
  : T extends "integer" | "number"
    ? number
    : T extends "boolean"
      ? boolean
      : T extends "integers"
        ? number[]
        : string[];

type ValueOf<S extends OptionSpec> = S["multiple"] extends true
  ? S["type"] extends "string" | "strings"
    ? string[]
    : ScalarOf<S["type"]>[]
  : S extends { type: "string"; choices: readonly (infer C extends string)[] }
    ? C
    : ScalarOf<S["type"]>;

/** Options with a default, booleans and repeatable ones always have a value; the rest may be absent. */
export type OptionValues<O extends OptionSpecs> = {
  [K in keyof O]: O[K] extends { default: string | number | boolean } | { type: "boolean" } | { multiple: true }
    ? ValueOf<O[K]>
    : ValueOf<O[K]> | undefined;
};

export interface CommandArgs<O extends OptionSpecs = OptionSpecs> {
  positionals: string[];
  values: OptionValues<O>;
  /** The names the user gave (aliases resolved), to tell a default from an explicit value. */
  given: ReadonlySet<string>;
  /** The command line as typed, for run records and "continue with:" hints. */
  argv: readonly string[];
}

/** A command spec with its option types inferred from the literal (`as const` not needed). */
export function defineCommand<const O extends OptionSpecs>(spec: CommandSpec<O>): CommandSpec<O> {
  return spec;
}

/** Levenshtein distance: how many single-character edits turn `a` into `b`. */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length];
}

/** The candidate closest to `word`, when it is close enough to be a plausible typo (or a prefix of it). */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const c of candidates) {
    const d = c.startsWith(word) && word.length >= 3 ? 1 : editDistance(word, c);
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return best !== undefined && bestDistance <= Math.max(2, Math.floor(word.length / 3)) ? best : undefined;
}

/** "(did you mean --x?)" or nothing. */
function didYouMean(prefix: string, word: string, candidates: Iterable<string>): string {
  const c = closest(word, candidates);
  return c === undefined ? "" : ` (did you mean ${prefix}${c}?)`;
}

export function wantsHelp(argv: readonly string[]): boolean {
  for (const a of argv) {
    if (a === "--") return false;
    if (a === "--help" || a === "-h") return true;
  }
  return false;
}

function typeName(o: OptionSpec): string {
  if (o.placeholder) return o.placeholder;
  if (o.choices) return o.choices.join("|");
  return { string: "TEXT", integer: "N", number: "X", boolean: "", integers: "N,N…", strings: "A,B…" }[o.type];
}

function convertOne(flag: string, o: OptionSpec, raw: string): string | number | boolean | number[] | string[] {
  const inRange = (n: number, what: string) => {
    if (o.min !== undefined && n < o.min) throw new UsageError(`${flag} must be at least ${o.min}, got ${what}`);
    if (o.max !== undefined && n > o.max) throw new UsageError(`${flag} must be at most ${o.max}, got ${what}`);
    return n;
  };
  const integer = (text: string) => {
    const n = Number(text);
    if (text.trim() === "" || !Number.isInteger(n))
      throw new UsageError(`${flag} needs an integer, got ${JSON.stringify(text)}`);
    return inRange(n, text);
  };
  switch (o.type) {
    case "boolean":
      return true;
    case "integer":
      return integer(raw);
    case "number": {
      const n = Number(raw);
      if (raw.trim() === "" || !Number.isFinite(n))
        throw new UsageError(`${flag} needs a number, got ${JSON.stringify(raw)}`);
      return inRange(n, raw);
    }
    case "integers": {
      const parts = raw.split(",").map((s) => s.trim());
      if (parts.some((p) => p === "")) throw new UsageError(`${flag} needs comma-separated integers, got "${raw}"`);
      return parts.map(integer);
    }
    case "strings": {
      const parts = raw
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== "");
      if (parts.length === 0) throw new UsageError(`${flag} needs at least one value`);
      for (const p of parts) checkChoice(flag, o, p);
      return parts;
    }
    default:
      checkChoice(flag, o, raw);
      return raw;
  }
}

function checkChoice(flag: string, o: OptionSpec, value: string): void {
  if (o.choices && !o.choices.includes(value))
    throw new UsageError(
      `${flag} must be one of ${o.choices.join(", ")}, got "${value}"${didYouMean("", value, o.choices)}`,
    );
}

/**
 * Read `argv` (the words after the command name) against `spec`. Throws UsageError naming the flag for an
 * unknown option (with the closest valid one), a missing or malformed value, a repeated single-valued
 * option, a missing or surplus positional.
 */
export function parseCommandArgs<O extends OptionSpecs>(spec: CommandSpec<O>, argv: readonly string[]): CommandArgs<O> {
  const canonical = new Map<string, string>();
  const config: Record<string, { type: "string" | "boolean"; multiple: true }> = {};
  for (const [name, o] of Object.entries(spec.options))
    for (const n of [name, ...(o.aliases ?? [])]) {
      canonical.set(n, name);
      config[n] = { type: o.type === "boolean" ? "boolean" : "string", multiple: true };
    }
  let tokens: ReturnType<typeof parseArgs>["tokens"];
  try {
    ({ tokens } = parseArgs({ args: [...argv], options: config, strict: true, allowPositionals: true, tokens: true }));
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
      // Strict mode names the option only inside its message: a lenient pass finds the first unknown one.
      const loose = parseArgs({
        args: [...argv],
        options: config,
        strict: false,
        allowPositionals: true,
        tokens: true,
      });
      const unknown = loose.tokens.find((t) => t.kind === "option" && !canonical.has(t.name));
      const raw = unknown?.kind === "option" ? unknown.rawName : String(e);
      const name = raw.replace(/^-+/, "");
      const hint = didYouMean("--", name, canonical.keys());
      throw new UsageError(
        `unknown option ${raw}${hint || ` (valid: ${[...canonical.keys()].map((n) => `--${n}`).join(", ")})`}`,
      );
    }
    throw new UsageError((e as Error).message);
  }
  const raws = new Map<string, { flag: string; value: string | undefined }[]>();
  const positionals: string[] = [];
  for (const t of tokens ?? []) {
    if (t.kind === "positional") positionals.push(t.value);
    else if (t.kind === "option") {
      const name = canonical.get(t.name) as string;
      raws.set(name, [...(raws.get(name) ?? []), { flag: t.rawName, value: t.value }]);
    }
  }
  const values: Record<string, unknown> = {};
  for (const [name, o] of Object.entries(spec.options)) {
    const given = raws.get(name);
    if (!given) {
      values[name] =
        o.type === "boolean"
          ? false
          : o.default !== undefined
            ? typeof o.default === "string" && o.type !== "string"
              ? convertOne(`--${name}`, o, o.default)
              : o.multiple
                ? [o.default]
                : o.default
            : o.multiple
              ? []
              : undefined;
      continue;
    }
    if (!o.multiple && given.length > 1)
      throw new UsageError(
        `--${name} was given ${given.length} times (${given.map((g) => g.flag).join(", ")}); give it once`,
      );
    const converted = given.map((g) => convertOne(g.flag, o, g.value ?? ""));
    values[name] = o.multiple ? converted.flat() : converted[0];
  }
  const specs = spec.positionals ?? [];
  const required = specs.filter((p) => !p.optional).length;
  if (positionals.length < required) {
    const missing = specs[positionals.length];
    throw new UsageError(`missing <${missing.name}> (${missing.description})`);
  }
  if (positionals.length > specs.length) {
    const extra = positionals[specs.length];
    throw new UsageError(
      `unexpected argument "${extra}"${specs.length === 0 ? ": this command takes options only" : ""}${
        extra.startsWith("-") ? "" : " (a value for a switch? switches such as --resume take none)"
      }`,
    );
  }
  positionals.forEach((p, i) => {
    const s = specs[i];
    if (s.choices && !s.choices.includes(p))
      throw new UsageError(
        `<${s.name}> must be one of ${s.choices.join(", ")}, got "${p}"${didYouMean("", p, s.choices)}`,
      );
  });
  return { positionals, values: values as OptionValues<O>, given: new Set(raws.keys()), argv };
}

/** `--set` values → `[path, value]` pairs; each value may hold several assignments separated by ";". */
export function setAssignments(set: string | readonly string[] | undefined): [string, string][] {
  const parts = (typeof set === "string" ? [set] : (set ?? [])).flatMap((s) => s.split(";"));
  return parts
    .filter((s) => s.trim())
    .map((part) => {
      const eq = part.indexOf("=");
      if (eq <= 0) throw new UsageError(`--set needs path=value, got "${part}"`);
      return [part.slice(0, eq).trim(), part.slice(eq + 1).trim()];
    });
}

function wrap(text: string, width: number, indent: string): string {
  const lines: string[] = [];
  for (const paragraph of text.split("\n")) {
    let line = "";
    for (const word of paragraph.split(" ")) {
      if (line && line.length + 1 + word.length > width) {
        lines.push(line);
        line = word;
      } else line = line ? `${line} ${word}` : word;
    }
    lines.push(line);
  }
  return lines.map((l, i) => (i === 0 ? l : indent + l)).join("\n");
}

/** `kiln <command> --help`: usage line, description, arguments, options with types and defaults, examples. */
export function formatCommandHelp(spec: CommandSpec): string {
  const pos = (spec.positionals ?? []).map((p) => (p.optional ? `[<${p.name}>]` : `<${p.name}>`)).join(" ");
  const out = [`usage: kiln ${spec.name}${pos ? ` ${pos}` : ""} [options]`, "", `  ${wrap(spec.summary, 100, "  ")}`];
  if (spec.description) out.push("", `  ${wrap(spec.description, 100, "  ")}`);
  const column = 30;
  const row = (left: string, right: string) =>
    `  ${left.padEnd(column - 2)}${left.length > column - 3 ? `\n${" ".repeat(column)}` : ""}${wrap(right, 100 - column, " ".repeat(column))}`;
  if (spec.positionals?.length) {
    out.push("", "arguments:");
    for (const p of spec.positionals)
      out.push(row(`<${p.name}>`, `${p.description}${p.choices ? ` (one of ${p.choices.join(", ")})` : ""}`));
  }
  out.push("", "options:");
  for (const [name, o] of Object.entries(spec.options)) {
    const t = typeName(o);
    const names = [name, ...(o.aliases ?? [])].map((n) => `--${n}`).join(", ");
    const facts = [
      o.type === "boolean"
        ? "switch"
        : o.type === "integers" || o.type === "strings"
          ? `comma-separated ${o.type}`
          : o.type,
      o.default !== undefined ? `default ${o.default}` : undefined,
      o.min !== undefined ? `≥ ${o.min}` : undefined,
      o.max !== undefined ? `≤ ${o.max}` : undefined,
      o.multiple ? "repeatable" : undefined,
    ].filter(Boolean);
    out.push(row(`${names}${t ? ` ${t}` : ""}`, `${o.description} (${facts.join(", ")})`));
  }
  out.push(row("-h, --help", "print this help and exit"));
  out.push("", spec.examples.length > 1 ? "examples:" : "example:", ...spec.examples.map((e) => `  ${e}`));
  return out.join("\n");
}
