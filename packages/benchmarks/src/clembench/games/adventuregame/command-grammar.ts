// The player's action command parser of adventuregame (clembench a717f238 `if_wrapper.py`,
// `initialize_action_parsing` + `IFTransformer`). The reference builds a lark grammar from
// `resources/grammar_core.json` plus one snippet per action definition and parses with lark's default Earley
// parser and dynamic lexer. This file reads the same grammar text (the lark subset those files use) and
// reproduces that parser's results:
// - the dynamic lexer tries each expected terminal once at a position, as a greedy regular expression match
//   (so `WORD` takes a whole run of letters, `WS` a whole run of blanks, "out of" wins over "out");
// - among complete parses lark keeps the one with the highest sum of rule and terminal priorities
//   (`ADJ.1`, `PREP.1`, `DET.1`, the verbs `.1`, `unknown.-1`), ties resolved as described at `better`.
import { ResourceError } from "../../errors.js";

/** A lark token: terminal name and matched text. */
interface Token {
  type: string;
  value: string;
}
/** A parse tree node (rule name and children; rules from EBNF operators are already spliced in). */
interface Tree {
  rule: string;
  children: (Token | Tree)[];
}

type Expr =
  | { kind: "seq"; items: Expr[] }
  | { kind: "alt"; options: Expr[] }
  | { kind: "rep"; item: Expr; min: 0 | 1; max: 1 | typeof Number.POSITIVE_INFINITY }
  | { kind: "name"; name: string }
  | { kind: "lit"; text: string };

/** A terminal: its regular expression (sticky) and priority. */
interface Terminal {
  name: string;
  re: RegExp;
  priority: number;
}

interface Rule {
  expr: Expr;
  priority: number;
}

/** One way to derive an expression from a start offset. */
interface Derivation {
  end: number;
  children: (Token | Tree)[];
  priority: number;
  /** for each repetition directly in the rule's sequence: 1 if it matched at least once */
  shape: number[];
}

/** The parsed command as `IFTransformer.action` returns it (key order as in the Python dict). */
export type ActionDict = { type: string } & Record<string, string | string[]>;

// lark's `common.WORD` and `common.WS`
const WORD_RE = "[a-zA-Z]+";
const WS_RE = "[ \\t\\f\\r\\n]+";

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Tokenise one lark rule body: names, "strings", ( ) | * + ? */
function lexLark(src: string, where: string): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (/\s/.test(c)) {
      i++;
    } else if (c === '"') {
      const j = src.indexOf('"', i + 1);
      if (j < 0) throw new ResourceError(`adventuregame grammar ${where}: unterminated string`);
      out.push(src.slice(i, j + 1));
      i = j + 1;
    } else if ("()|*+?".includes(c)) {
      out.push(c);
      i++;
    } else {
      const m = /^[A-Za-z_][A-Za-z_0-9]*/.exec(src.slice(i));
      if (!m) throw new ResourceError(`adventuregame grammar ${where}: unexpected ${JSON.stringify(c)}`);
      out.push(m[0]);
      i += m[0].length;
    }
  }
  return out;
}

/** Parse an EBNF body (alternatives of sequences of postfixed atoms). */
function parseExpr(tokens: string[], where: string): Expr {
  let i = 0;
  const alt = (): Expr => {
    const options = [seq()];
    while (tokens[i] === "|") {
      i++;
      options.push(seq());
    }
    return options.length === 1 ? options[0] : { kind: "alt", options };
  };
  const seq = (): Expr => {
    const items: Expr[] = [];
    while (i < tokens.length && tokens[i] !== "|" && tokens[i] !== ")") items.push(postfix());
    return items.length === 1 ? items[0] : { kind: "seq", items };
  };
  const postfix = (): Expr => {
    let e = atom();
    for (;;) {
      const t = tokens[i];
      if (t === "*") e = { kind: "rep", item: e, min: 0, max: Number.POSITIVE_INFINITY };
      else if (t === "+") e = { kind: "rep", item: e, min: 1, max: Number.POSITIVE_INFINITY };
      else if (t === "?") e = { kind: "rep", item: e, min: 0, max: 1 };
      else return e;
      i++;
    }
  };
  const atom = (): Expr => {
    const t = tokens[i++];
    if (t === "(") {
      const e = alt();
      if (tokens[i++] !== ")") throw new ResourceError(`adventuregame grammar ${where}: missing ")"`);
      return e;
    }
    if (t === undefined) throw new ResourceError(`adventuregame grammar ${where}: unexpected end`);
    if (t.startsWith('"')) return { kind: "lit", text: t.slice(1, -1) };
    return { kind: "name", name: t };
  };
  const e = alt();
  if (i !== tokens.length) throw new ResourceError(`adventuregame grammar ${where}: unexpected ${tokens[i]}`);
  return e;
}

/** A terminal's expression as a regular expression source (strings, WS, WORD, groups, repetition). */
function terminalSource(e: Expr, terminals: Map<string, string>, where: string): string {
  switch (e.kind) {
    case "lit":
      return escapeRe(e.text);
    case "name": {
      const src = terminals.get(e.name);
      if (src === undefined) throw new ResourceError(`adventuregame grammar ${where}: unknown terminal ${e.name}`);
      return `(?:${src})`;
    }
    case "seq":
      return e.items.map((x) => terminalSource(x, terminals, where)).join("");
    case "alt":
      return `(?:${e.options.map((x) => terminalSource(x, terminals, where)).join("|")})`;
    case "rep": {
      const q = e.max === 1 ? "?" : e.min === 0 ? "*" : "+";
      return `(?:${terminalSource(e.item, terminals, where)})${q}`;
    }
  }
}

/**
 * The grammar of one adventure: `grammar_head` (imports), the `action:` line, every action definition's
 * `lark` snippet, the `ADJ` line from all entity adjectives and `grammar_foot`, as the reference joins them.
 */
export class CommandGrammar {
  private readonly rules = new Map<string, Rule>();
  private readonly terminals = new Map<string, Terminal>();
  private readonly anonymous = new Map<string, Terminal>();
  /** while `errorText` runs: the terminals tried at each offset */
  private attempts: Map<number, Set<string>> | null = null;

  constructor(grammarHead: string, actionLarks: string[], adjectives: string[], grammarFoot: string) {
    const termSrc = new Map<string, string>([
      ["WORD", WORD_RE],
      ["WS", WS_RE],
    ]);
    for (const line of grammarHead.split("\n")) {
      const t = line.trim();
      if (t && t !== "%import common.WORD" && t !== "%import common.WS")
        throw new ResourceError(`adventuregame grammar head: unsupported line ${JSON.stringify(t)}`);
    }
    this.terminals.set("WORD", { name: "WORD", re: new RegExp(WORD_RE, "y"), priority: 0 });
    this.terminals.set("WS", { name: "WS", re: new RegExp(WS_RE, "y"), priority: 0 });
    const ruleNames = actionLarks.map((l) => l.split(":")[0]);
    const lines = [`action: ${[...ruleNames, "unknown"].join(" | ")}`, ...actionLarks.flatMap((l) => l.split("\n"))];
    // the ADJ line joins a Python set of quoted adjectives; the order of alternatives of whole words is immaterial
    lines.push(`ADJ.1: (${adjectives.map((a) => `"${a}"`).join(" | ")}) WS`);
    lines.push(...grammarFoot.split("\n"));
    const pending: [string, number, Expr, string][] = [];
    for (const raw of lines) {
      const line = raw.trim();
      if (!line) continue;
      const m = /^([A-Za-z_][A-Za-z_0-9]*)(?:\.(-?\d+))?\s*:(.*)$/.exec(line);
      if (!m) throw new ResourceError(`adventuregame grammar: cannot read line ${JSON.stringify(line)}`);
      const [, name, prio, body] = m;
      const expr = parseExpr(lexLark(body, name), name);
      const priority = prio ? Number(prio) : 0;
      if (name === name.toUpperCase()) pending.push([name, priority, expr, name]);
      else this.rules.set(name, { expr, priority });
    }
    // terminals may refer to WS/WORD only (and to earlier terminals)
    for (const [name, priority, expr, where] of pending) {
      const src = terminalSource(expr, termSrc, where);
      termSrc.set(name, src);
      this.terminals.set(name, { name, re: new RegExp(src, "y"), priority });
    }
    for (const r of this.rules.values()) this.checkNames(r.expr);
    if (!this.rules.has("action")) throw new ResourceError("adventuregame grammar: no action rule");
  }

  private checkNames(e: Expr): void {
    if (e.kind === "name" && !this.rules.has(e.name) && !this.terminals.has(e.name))
      throw new ResourceError(`adventuregame grammar: ${e.name} is neither a rule nor a terminal`);
    if (e.kind === "seq") for (const x of e.items) this.checkNames(x);
    if (e.kind === "alt") for (const x of e.options) this.checkNames(x);
    if (e.kind === "rep") this.checkNames(e.item);
  }

  private anonymousTerminal(text: string): Terminal {
    let t = this.anonymous.get(text);
    if (!t) {
      // lark names an anonymous string terminal after its text ("back" → BACK)
      t = { name: text.toUpperCase(), re: new RegExp(escapeRe(text), "y"), priority: 0 };
      this.anonymous.set(text, t);
    }
    return t;
  }

  /** Greedy match of a terminal at `pos` (the dynamic lexer's single try), or null. */
  private matchTerminal(t: Terminal, input: string, pos: number): string | null {
    if (this.attempts) {
      const at = this.attempts.get(pos) ?? new Set<string>();
      at.add(t.name);
      this.attempts.set(pos, at);
    }
    t.re.lastIndex = pos;
    const m = t.re.exec(input);
    return m && m[0].length > 0 ? m[0] : null;
  }

  /** All derivations of `e` starting at `pos`, in lark's preference order among equal priorities. */
  private derive(e: Expr, input: string, pos: number, memo: Map<string, Derivation[]>): Derivation[] {
    switch (e.kind) {
      case "lit": {
        const v = this.matchTerminal(this.anonymousTerminal(e.text), input, pos);
        // anonymous string tokens are filtered out of the tree (lark's keep_all_tokens=False)
        return v === null ? [] : [{ end: pos + v.length, children: [], priority: 0, shape: [] }];
      }
      case "name": {
        const term = this.terminals.get(e.name);
        if (term) {
          const v = this.matchTerminal(term, input, pos);
          return v === null
            ? []
            : [{ end: pos + v.length, children: [{ type: e.name, value: v }], priority: term.priority, shape: [] }];
        }
        const key = `${e.name}@${pos}`;
        const hit = memo.get(key);
        if (hit) return hit;
        const rule = this.rules.get(e.name) as Rule;
        const out = this.derive(rule.expr, input, pos, memo).map((d) => ({
          end: d.end,
          children: [{ rule: e.name, children: d.children }],
          priority: d.priority + rule.priority,
          shape: d.shape,
        }));
        memo.set(key, out);
        return out;
      }
      case "alt":
        return e.options.flatMap((o) => this.derive(o, input, pos, memo));
      case "seq": {
        let partial: Derivation[] = [{ end: pos, children: [], priority: 0, shape: [] }];
        for (const item of e.items) {
          const next: Derivation[] = [];
          for (const p of partial)
            for (const d of this.derive(item, input, p.end, memo))
              next.push({
                end: d.end,
                children: [...p.children, ...d.children],
                priority: p.priority + d.priority,
                shape: item.kind === "rep" ? [...p.shape, d.end > p.end ? 1 : 0] : p.shape,
              });
          partial = next;
          if (partial.length === 0) break;
        }
        return partial;
      }
      case "rep": {
        // zero or more (or one or more / optional) repetitions; more repetitions are listed first
        const out: Derivation[] = [];
        const walk = (p: Derivation, count: number) => {
          if (count < e.max)
            for (const d of this.derive(e.item, input, p.end, memo))
              if (d.end > p.end)
                walk(
                  {
                    end: d.end,
                    children: [...p.children, ...d.children],
                    priority: p.priority + d.priority,
                    shape: [],
                  },
                  count + 1,
                );
          if (count >= e.min) out.push(p);
        };
        walk({ end: pos, children: [], priority: 0, shape: [] }, 0);
        return out;
      }
    }
  }

  /**
   * Parse a cleaned command (lower-cased, final "." or "!" removed) into the lark tree of the `action` rule,
   * or null where lark raises (no complete parse: a character no terminal matches, or leftover input).
   */
  parseTree(input: string): Tree | null {
    const best = this.bestDerivations(input);
    if (best.length === 0) return null;
    return (best[best.length - 1].children[0] as Tree).children[0] as Tree;
  }

  /** The complete derivations that lark cannot tell apart (same priority, same expansion), in order. */
  private bestDerivations(input: string): Derivation[] {
    const all = this.derive({ kind: "name", name: "action" }, input, 0, new Map()).filter(
      (d) => d.end === input.length,
    );
    let best: Derivation[] = [];
    for (const d of all) {
      if (best.length === 0 || better(d, best[0], false)) best = [d];
      else if (!better(best[0], d, false)) best.push(d);
    }
    return best;
  }

  /**
   * Every parse the reference may return for `input`: one entry where the grammar decides, several where
   * lark's choice among equally good derivations depends on hash order (PYTHONHASHSEED). `parse` returns
   * the last of them.
   */
  candidates(input: string): ActionDict[] {
    const out: ActionDict[] = [];
    for (const d of this.bestDerivations(input)) {
      const dict = transform((d.children[0] as Tree).children[0] as Tree);
      if (!out.some((o) => JSON.stringify(o) === JSON.stringify(dict))) out.push(dict);
    }
    return out;
  }

  /**
   * The text of lark's exception for an input without a parse (logged as the `arg` of a lark_exception
   * failure): `UnexpectedCharacters` at the furthest offset the parser reached, or `UnexpectedEOF` for empty
   * input. lark lists the expected terminals in set order (it varies between runs); here they are sorted.
   */
  errorText(input: string): string {
    this.attempts = new Map();
    try {
      this.derive({ kind: "name", name: "action" }, input, 0, new Map());
      const reach = Math.max(0, ...this.attempts.keys());
      const expected = [...(this.attempts.get(reach) ?? [])].sort();
      const list = `Expected one of: \n\t* ${expected.join("\n\t* ")}\n`;
      if (reach >= input.length) return `Unexpected end-of-input. ${list}`;
      const before = input
        .slice(Math.max(reach - 40, 0), reach)
        .split("\n")
        .pop() as string;
      const after = input.slice(reach, reach + 40).split("\n")[0];
      const line = input.slice(0, reach).split("\n").length;
      const column = reach - input.lastIndexOf("\n", reach - 1);
      const context = `${before}${after}\n${" ".repeat(expandTabs(before).length)}^\n`;
      return `No terminal matches '${input[reach]}' in the current parser context, at line ${line} col ${column}\n\n${context}${list}`;
    } finally {
      this.attempts = null;
    }
  }

  /** `IFTransformer.action`: the parsed command as a dict, or null where lark raises. */
  parse(input: string): ActionDict | null {
    const tree = this.parseTree(input);
    if (!tree) return null;
    return transform(tree);
  }
}

/**
 * lark's Earley forest resolution keeps the derivation with the highest priority sum. Among equal sums it
 * prefers the lower-numbered BNF expansion of the action rule, and lark lists the expansion *with* an
 * optional `x*` part before the one without (so "go back kitchen" consumes "back"). Derivations that tie
 * within one expansion (e.g. how "put pillow living room" splits its two bare things) are ordered by hashes
 * in lark's forest, so the reference's choice there changes with PYTHONHASHSEED; `parse` keeps the last in
 * enumeration order (repetitions greedy, alternatives in grammar order), which mostly gives the earlier
 * argument the shorter reading ("put pillow living room": pillow, living room).
 */
function better(a: Derivation, b: Derivation, tieWins = true): boolean {
  if (a.priority !== b.priority) return a.priority > b.priority;
  for (let i = 0; i < Math.min(a.shape.length, b.shape.length); i++)
    if (a.shape[i] !== b.shape[i]) return a.shape[i] > b.shape[i];
  return tieWins;
}

/** Python `str.expandtabs()` (tab stops every 8 columns). */
function expandTabs(s: string): string {
  let out = "";
  for (const c of s) out += c === "\t" ? " ".repeat(8 - (out.length % 8)) : c;
  return out;
}

function isTree(x: Token | Tree): x is Tree {
  return (x as Tree).rule !== undefined;
}

/** `IFTransformer.action`: arguments from `thing` subtrees, the last preposition, or the unknown verb. */
export function transform(action: Tree): ActionDict {
  const dict: ActionDict = { type: action.rule };
  let argIdx = 1;
  for (const child of action.children) {
    if (isTree(child) && child.rule === "thing") {
      const tokens = child.children.filter((c): c is Token => !isTree(c));
      const words = tokens.filter((t) => t.type === "WORD").map((t) => t.value);
      // the reference scans children[:-1] for adjectives (the head word is never an ADJ)
      const adjs = child.children
        .slice(0, -1)
        .filter((c): c is Token => !isTree(c) && c.type === "ADJ")
        .map((t) => t.value.trim());
      if (adjs.length) dict[`arg${argIdx}_adjs`] = adjs;
      dict[`arg${argIdx}`] = words.join(" ");
      argIdx++;
    }
    if (!isTree(child) && child.type === "PREP") dict.prep = child.value.trim();
    if (action.rule === "unknown" && !isTree(child) && child.type === "WORD") {
      dict[`arg${argIdx}`] = child.value;
      break;
    }
  }
  return dict;
}
