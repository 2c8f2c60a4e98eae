import { ToolError } from "./errors.js";
import { pyFloatRepr, pyRound2 } from "./python-compat.js";

// The `calculate` tool: upstream checks the characters, then runs Python's
// `str(round(float(eval(expression)), 2))` (tau2 domains/retail/tools.py). The allowed
// characters (digits, + - * / ( ) . and space) still admit Python's `**`, `//`, calls such as
// `2(3)` and the empty tuple `()`, so this is a small Python expression evaluator with
// Python's int/float semantics and error texts. SyntaxError texts are CPython 3.11's for the
// common cases; rarer malformed inputs get the generic "invalid syntax" text.

type Value = { t: "int"; v: bigint } | { t: "float"; v: number } | { t: "tuple" };

const typeName = (x: Value) => (x.t === "tuple" ? "tuple" : x.t);

class PySyntaxError extends ToolError {}

function syntax(msg = "invalid syntax"): never {
  throw new PySyntaxError(`${msg} (<string>, line 1)`);
}

type Tok = { k: "num"; text: string } | { k: "op"; text: string };

function tokenize(src: string): Tok[] {
  const toks: Tok[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (c === " ") {
      i++;
      continue;
    }
    const m = /^(\d+\.?\d*|\.\d+)/.exec(src.slice(i));
    if (m) {
      toks.push({ k: "num", text: m[1] });
      i += m[1].length;
      continue;
    }
    if (src.startsWith("**", i) || src.startsWith("//", i)) {
      toks.push({ k: "op", text: src.slice(i, i + 2) });
      i += 2;
      continue;
    }
    if ("+-*/()".includes(c)) {
      toks.push({ k: "op", text: c });
      i++;
      continue;
    }
    syntax(); // a lone "." — the character check already rejected everything else
  }
  return toks;
}

function toFloat(x: Value): number {
  if (x.t === "float") return x.v;
  if (x.t === "int") {
    const f = Number(x.v);
    if (!Number.isFinite(f)) throw new ToolError("int too large to convert to float");
    return f;
  }
  throw new ToolError("float() argument must be a string or a real number, not 'tuple'");
}

function checkFloat(v: number): Value {
  if (!Number.isFinite(v)) throw new ToolError("(34, 'Numerical result out of range')");
  return { t: "float", v };
}

function binary(op: string, a: Value, b: Value): Value {
  if (a.t === "tuple" || b.t === "tuple") {
    if (op === "+" && a.t === "tuple" && b.t === "tuple") return { t: "tuple" };
    if (op === "*" && (a.t === "int" || b.t === "int") && (a.t === "tuple" || b.t === "tuple")) return { t: "tuple" };
    throw new ToolError(`unsupported operand type(s) for ${op}: '${typeName(a)}' and '${typeName(b)}'`);
  }
  if (a.t === "int" && b.t === "int") {
    switch (op) {
      case "+":
        return { t: "int", v: a.v + b.v };
      case "-":
        return { t: "int", v: a.v - b.v };
      case "*":
        return { t: "int", v: a.v * b.v };
      case "/": {
        if (b.v === 0n) throw new ToolError("division by zero");
        const x = Number(a.v);
        const y = Number(b.v);
        if (Number.isFinite(x) && Number.isFinite(y)) return checkFloat(x / y);
        // Huge operands: Python divides exactly; we keep 64 bits of the quotient.
        const scale = 64n;
        const q = Number((a.v << scale) / b.v) / 2 ** 64;
        if (!Number.isFinite(q)) throw new ToolError("integer division result too large for a float");
        return { t: "float", v: q };
      }
      case "//": {
        if (b.v === 0n) throw new ToolError("integer division or modulo by zero");
        const q = a.v / b.v;
        return { t: "int", v: a.v % b.v !== 0n && a.v < 0n !== b.v < 0n ? q - 1n : q };
      }
      case "**": {
        if (b.v < 0n) {
          if (a.v === 0n) throw new ToolError("0.0 cannot be raised to a negative power");
          return checkFloat(Number(a.v) ** Number(b.v));
        }
        // Guard against results too large to hold; CPython would grind through them.
        const bits = a.v === 0n || a.v === 1n || a.v === -1n ? 0 : a.v.toString(2).length * Number(b.v);
        if (bits > 1_000_000) throw new ToolError("int too large to convert to float");
        return { t: "int", v: a.v ** b.v };
      }
    }
  }
  const x = toFloat(a);
  const y = toFloat(b);
  switch (op) {
    case "+":
      return checkFloat(x + y);
    case "-":
      return checkFloat(x - y);
    case "*":
      return checkFloat(x * y);
    case "/":
      if (y === 0) throw new ToolError("float division by zero");
      return checkFloat(x / y);
    case "//":
      if (y === 0) throw new ToolError("float floor division by zero");
      return checkFloat(Math.floor(x / y));
    default: {
      if (x === 0 && y < 0) throw new ToolError("0.0 cannot be raised to a negative power");
      if (x < 0 && !Number.isInteger(y)) {
        // Python returns a complex number here, which float() then rejects.
        throw new ToolError("float() argument must be a string or a real number, not 'complex'");
      }
      return checkFloat(x ** y);
    }
  }
}

class Parser {
  private i = 0;
  constructor(private readonly toks: Tok[]) {}
  private peek(): Tok | undefined {
    return this.toks[this.i];
  }
  private isOp(text: string): boolean {
    const t = this.peek();
    return t !== undefined && t.k === "op" && t.text === text;
  }
  parseAll(): Value {
    if (this.toks.length === 0) syntax();
    const v = this.expr();
    if (this.i < this.toks.length) {
      const t = this.toks[this.i];
      if (t.k === "op" && t.text === ")") syntax("unmatched ')'");
      syntax();
    }
    return v;
  }
  private expr(): Value {
    let v = this.term();
    while (this.isOp("+") || this.isOp("-")) {
      const op = (this.toks[this.i++] as Tok).text;
      v = binary(op, v, this.term());
    }
    return v;
  }
  private term(): Value {
    let v = this.factor();
    while (this.isOp("*") || this.isOp("/") || this.isOp("//")) {
      const op = (this.toks[this.i++] as Tok).text;
      v = binary(op, v, this.factor());
    }
    return v;
  }
  private factor(): Value {
    if (this.isOp("+") || this.isOp("-")) {
      const op = (this.toks[this.i++] as Tok).text;
      const v = this.factor();
      if (v.t === "tuple") throw new ToolError(`bad operand type for unary ${op}: 'tuple'`);
      if (op === "+") return v;
      return v.t === "int" ? { t: "int", v: -v.v } : { t: "float", v: -v.v };
    }
    return this.power();
  }
  private power(): Value {
    const base = this.primary();
    if (this.isOp("**")) {
      this.i++;
      return binary("**", base, this.factor());
    }
    return base;
  }
  private primary(): Value {
    const v = this.atom();
    while (this.isOp("(")) {
      // A call: the arguments are evaluated first, then the callee is found not callable.
      this.i++;
      if (!this.isOp(")")) this.expr();
      if (!this.isOp(")")) this.unclosedOrSyntax();
      this.i++;
      throw new ToolError(`'${typeName(v)}' object is not callable`);
    }
    return v;
  }
  private unclosedOrSyntax(): never {
    if (this.i >= this.toks.length) syntax("'(' was never closed");
    syntax();
  }
  private atom(): Value {
    const t = this.peek();
    if (t === undefined) syntax();
    if (t.k === "num") {
      this.i++;
      if (/^\d+$/.test(t.text)) {
        if (t.text.length > 1 && t.text[0] === "0" && /[1-9]/.test(t.text)) {
          syntax("leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers");
        }
        return { t: "int", v: BigInt(t.text) };
      }
      return { t: "float", v: Number(t.text) };
    }
    if (t.text === "(") {
      this.i++;
      if (this.isOp(")")) {
        this.i++;
        return { t: "tuple" };
      }
      const v = this.expr();
      if (!this.isOp(")")) this.unclosedOrSyntax();
      this.i++;
      return v;
    }
    if (t.text === ")") syntax("unmatched ')'");
    syntax();
  }
}

/** Upstream `calculate(expression)`: returns e.g. "4.0"; throws ToolError with Python's text. */
export function pythonCalculate(expression: unknown): string {
  if (typeof expression !== "string") {
    // `all(char in "0123…" for char in expression)` on a non-string: a list of one-char strings
    // passes the check and then eval() rejects it; anything else is not iterable.
    if (Array.isArray(expression)) throw new ToolError("eval() arg 1 must be a string, bytes or code object");
    const tn =
      expression === null
        ? "NoneType"
        : typeof expression === "number"
          ? Number.isInteger(expression)
            ? "int"
            : "float"
          : typeof expression === "boolean"
            ? "bool"
            : "dict";
    if (tn === "dict") throw new ToolError("eval() arg 1 must be a string, bytes or code object");
    throw new ToolError(`'${tn}' object is not iterable`);
  }
  for (const ch of expression) {
    if (!"0123456789+-*/(). ".includes(ch)) throw new ToolError("Invalid characters in expression");
  }
  // eval() strips leading spaces and tabs of a string source.
  const source = expression.replace(/^ +/, "");
  if (source.trim() === "") throw new PySyntaxError("invalid syntax (<string>, line 0)");
  const value = new Parser(tokenize(source)).parseAll();
  return pyFloatRepr(pyRound2(toFloat(value)));
}
