// Model card README.md with YAML front matter (the Hub's model card metadata: base_model,
// library_name, license, tags, datasets, …). The YAML subset here is what huggingface_hub's
// ModelCardData writes for these fields: scalars and lists of scalars, block ("- x") or flow ("[x, y]").
// Any other top-level key is kept verbatim so rewriting a card does not lose it.

import { ModelCardError } from "./errors.js";

export type CardScalar = string | number | boolean | null;
export type CardValue = CardScalar | CardScalar[];

export interface ModelCard {
  /** Parsed front-matter fields in file order. */
  data: Record<string, CardValue>;
  /** Top-level keys whose YAML is outside the subset (e.g. model-index), as raw lines. */
  raw: Record<string, string>;
  /** Markdown after the front matter. */
  body: string;
}

export interface CardData {
  base_model?: string | string[];
  library_name?: string;
  license?: string;
  tags?: string[];
  datasets?: string[];
  language?: string | string[];
  pipeline_tag?: string;
  [key: string]: CardValue | undefined;
}

function parseScalar(s: string, where: string): CardScalar {
  const t = s.trim();
  if (t === "" || t === "~" || t === "null") return null;
  if (t === "true") return true;
  if (t === "false") return false;
  if (/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(t)) return Number(t);
  if (t.startsWith('"')) {
    try {
      return JSON.parse(t) as string;
    } catch {
      throw new ModelCardError(`${where}: bad double-quoted string ${t}`);
    }
  }
  if (t.startsWith("'")) {
    if (!t.endsWith("'") || t.length < 2) throw new ModelCardError(`${where}: unterminated single-quoted string ${t}`);
    return t.slice(1, -1).replaceAll("''", "'");
  }
  return t.replace(/\s+#.*$/, "");
}

function splitFlow(inner: string, where: string): CardScalar[] {
  const out: CardScalar[] = [];
  let cur = "";
  let quote: string | null = null;
  for (const ch of inner) {
    if (quote) {
      cur += ch;
      if (ch === quote) quote = null;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      cur += ch;
    } else if (ch === ",") {
      out.push(parseScalar(cur, where));
      cur = "";
    } else cur += ch;
  }
  if (quote) throw new ModelCardError(`${where}: unterminated quote in flow list`);
  if (cur.trim() !== "") out.push(parseScalar(cur, where));
  return out;
}

/** Split README text into front matter and body, parsing the front matter. */
export function parseModelCard(text: string): ModelCard {
  const norm = text.replace(/^\ufeff/, "");
  const m = /^---\r?\n([\s\S]*?)\r?\n?---[ \t]*(?:\r?\n|$)/.exec(norm);
  if (!m) return { data: {}, raw: {}, body: norm };
  const lines = m[1] === "" ? [] : m[1].split(/\r?\n/);
  const data: Record<string, CardValue> = {};
  const raw: Record<string, string> = {};
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (line.trim() === "" || line.trimStart().startsWith("#")) {
      i++;
      continue;
    }
    const km = /^([A-Za-z0-9_][\w.-]*)\s*:(.*)$/.exec(line);
    if (!km) throw new ModelCardError(`front matter line ${i + 1}: expected "key: value", got ${JSON.stringify(line)}`);
    const [, key, rest] = km;
    const where = `front matter key "${key}"`;
    // Collect the key's continuation lines (indented, or "- " items at column 0).
    let j = i + 1;
    while (j < lines.length && (/^\s+\S/.test(lines[j]) || lines[j].startsWith("- ") || lines[j] === "-")) j++;
    const block = lines.slice(i + 1, j);
    const value = rest.trim();
    const isList = block.length > 0 && block.every((l) => /^\s*-(\s|$)/.test(l) && !/^\s*-\s+[\w.-]+\s*:/.test(l));
    if (value === "" && block.length === 0) data[key] = null;
    else if (value === "" && isList) data[key] = block.map((l) => parseScalar(l.replace(/^\s*-\s?/, ""), where));
    else if (value.startsWith("[") && value.endsWith("]") && block.length === 0)
      data[key] = splitFlow(value.slice(1, -1), where);
    else if (value !== "" && !/^[|>&*!{[]/.test(value) && block.length === 0) data[key] = parseScalar(value, where);
    else raw[key] = lines.slice(i, j).join("\n");
    i = j;
  }
  return { data, raw, body: norm.slice(m[0].length) };
}

const PLAIN = /^[A-Za-z0-9_./+@()-][A-Za-z0-9_ ./+@()-]*$/;

function yamlScalar(v: CardScalar): string {
  if (v === null) return "null";
  if (typeof v === "boolean" || typeof v === "number") return String(v);
  // Quote anything YAML could read as another type or that needs escaping.
  if (PLAIN.test(v) && !/^(true|false|null|yes|no|on|off|~|-?\d[\d.eE+-]*)$/i.test(v) && !v.endsWith(" ")) return v;
  return `'${v.replaceAll("'", "''")}'`;
}

/** Render README text: `---`, the fields (lists as "- item" lines, as huggingface_hub writes), `---`, body. */
export function serializeModelCard(card: {
  data: Record<string, CardValue | undefined>;
  raw?: Record<string, string>;
  body: string;
}): string {
  const lines: string[] = [];
  for (const [k, v] of Object.entries(card.data)) {
    if (v === undefined) continue;
    if (!/^[A-Za-z0-9_][\w.-]*$/.test(k))
      throw new ModelCardError(`front matter key ${JSON.stringify(k)} is not a plain YAML key`);
    if (Array.isArray(v)) {
      lines.push(`${k}:`);
      for (const item of v) lines.push(`- ${yamlScalar(item)}`);
    } else lines.push(`${k}: ${yamlScalar(v)}`);
  }
  for (const [k, r] of Object.entries(card.raw ?? {})) if (!(k in card.data)) lines.push(r);
  const body = card.body.startsWith("\n") || card.body === "" ? card.body : `\n${card.body}`;
  return `---\n${lines.join("\n")}\n---\n${body}`;
}

/** A card for a kiln-trained adapter or model. */
export function makeModelCard(data: CardData, body: string): string {
  return serializeModelCard({ data, body });
}
