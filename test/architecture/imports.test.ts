// The floors of docs/ARCHITECTURE.md §Floors, enforced: every import in packages/*/src is read with the
// TypeScript parser (comments and strings are not imports), and the test fails on an import that climbs a
// floor — between packages, or between kit's own floors — and on an import cycle. Type-only imports count
// for both: `import type` is erased, so it makes no load-order cycle, but the files still depend on each
// other (a shared type belongs in a leaf module). bench/ directories are not under src/ and are not checked.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Package floors: a package may import only packages on a lower floor. */
const PACKAGE_FLOOR: Record<string, number> = {
  tensor: 0,
  "hub-io": 0,
  rollout: 1,
  losses: 1,
  benchmarks: 2,
  models: 2,
  lora: 3,
  kit: 4,
};

/** Which packages each package may import (its lower floors, narrowed to what ARCHITECTURE.md allows). */
const MAY_IMPORT: Record<string, readonly string[]> = {
  tensor: [],
  "hub-io": [],
  rollout: ["hub-io"],
  losses: ["tensor"],
  benchmarks: ["rollout", "hub-io"],
  models: ["tensor", "hub-io", "rollout"],
  lora: ["tensor", "hub-io", "models"],
  kit: ["tensor", "hub-io", "rollout", "losses", "benchmarks", "models", "lora"],
};

const KIT_FLOORS = ["trainer", "run", "recipes", "applications", "cli"] as const;
type KitFloor = (typeof KIT_FLOORS)[number];

/**
 * kit's floor of a file (path relative to packages/kit/src). A barrel (`index.ts`) only re-exports, so it
 * stands on the highest floor of what it re-exports (`barrelTargets`); other top-level files are the run
 * floor unless named otherwise.
 */
export function kitFloor(file: string, barrelTargets: (barrel: string) => readonly string[] = () => []): KitFloor {
  const parts = file.split("/");
  const base = parts[parts.length - 1].replace(/\.(ts|mts)$/, "");
  if (base === "index") {
    const floors = barrelTargets(file).map((t) => KIT_FLOORS.indexOf(kitFloor(t, barrelTargets)));
    return KIT_FLOORS[Math.max(0, ...floors)];
  }
  if (parts[0] === "cli" || parts[0] === "commands" || base.startsWith("cli") || base.startsWith("commands"))
    return "cli";
  if (parts[0] === "agent-model" || parts[0] === "repro") return "applications";
  if (parts[0] === "recipes" || base === "demo") return "recipes";
  if (parts[0] === "trainer" || base === "sft-trainer" || base === "errors") return "trainer";
  return "run";
}

interface Import {
  from: string;
  /** Repository-relative file, or "@kiln/<package>". */
  to: string;
  typeOnly: boolean;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return sourceFiles(p);
    return /\.(ts|mts)$/.test(name) && !name.endsWith(".d.ts") ? [p] : [];
  });
}

function resolveRelative(fromFile: string, spec: string): string {
  const target = resolve(dirname(fromFile), spec);
  for (const candidate of [target.replace(/\.(m?)js$/, ".$1ts"), `${target}.ts`, join(target, "index.ts"), target])
    if (existsSync(candidate) && statSync(candidate).isFile()) return relative(root, candidate);
  return relative(root, target);
}

/** Every import, re-export and dynamic import of one file. */
export function importsOf(file: string, text: string): { spec: string; typeOnly: boolean }[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const out: { spec: string; typeOnly: boolean }[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const named = clause?.namedBindings;
      const allNamedTypes =
        !!named && ts.isNamedImports(named) && named.elements.length > 0 && named.elements.every((e) => e.isTypeOnly);
      const typeOnly = !!clause && (clause.isTypeOnly || (!clause.name && allNamedTypes));
      out.push({ spec: node.moduleSpecifier.text, typeOnly });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.exportClause;
      const allNamedTypes =
        !!clause &&
        ts.isNamedExports(clause) &&
        clause.elements.length > 0 &&
        clause.elements.every((e) => e.isTypeOnly);
      out.push({ spec: node.moduleSpecifier.text, typeOnly: node.isTypeOnly || allNamedTypes });
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments.length === 1 &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      out.push({ spec: node.arguments[0].text, typeOnly: false });
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      out.push({ spec: node.argument.literal.text, typeOnly: true });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

function allImports(): Import[] {
  const edges: Import[] = [];
  for (const pkg of readdirSync(join(root, "packages"))) {
    const src = join(root, "packages", pkg, "src");
    if (!existsSync(src)) continue;
    for (const file of sourceFiles(src)) {
      const from = relative(root, file);
      for (const { spec, typeOnly } of importsOf(file, readFileSync(file, "utf8"))) {
        if (spec.startsWith(".")) edges.push({ from, to: resolveRelative(file, spec), typeOnly });
        else if (spec.startsWith("@kiln/")) edges.push({ from, to: `@kiln/${spec.slice(6).split("/")[0]}`, typeOnly });
      }
    }
  }
  return edges;
}

const packageOf = (file: string) => (file.startsWith("@kiln/") ? file.slice(6) : file.split("/")[1]);

/** The strongly connected components with more than one file (Tarjan), each sorted. */
export function cycles(edges: readonly { from: string; to: string }[]): string[][] {
  const adj = new Map<string, string[]>();
  for (const e of edges) adj.set(e.from, [...(adj.get(e.from) ?? []), e.to]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const strong = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of adj.get(v) ?? []) {
      if (!index.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of adj.keys()) if (!index.has(v)) strong(v);
  return found;
}

describe("import floors (docs/ARCHITECTURE.md §Floors)", () => {
  const edges = allImports();

  it("reads imports with the parser: type-only ones, re-exports, dynamic imports, not comments", () => {
    const text = [
      '// import { x } from "./commented.js";',
      'import type { A } from "./a.js";',
      'import { type B, type C } from "./b.js";',
      'import { type D, e } from "./d.js";',
      'export { f } from "./f.js";',
      'export type { G } from "./g.js";',
      'const h = await import("./h.js");',
      'let i: import("./i.js").I;',
    ].join("\n");
    expect(importsOf("x.ts", text)).toEqual([
      { spec: "./a.js", typeOnly: true },
      { spec: "./b.js", typeOnly: true },
      { spec: "./d.js", typeOnly: false },
      { spec: "./f.js", typeOnly: false },
      { spec: "./g.js", typeOnly: true },
      { spec: "./h.js", typeOnly: false },
      { spec: "./i.js", typeOnly: true },
    ]);
    expect(
      cycles([
        { from: "a", to: "b" },
        { from: "b", to: "c" },
        { from: "c", to: "a" },
        { from: "c", to: "d" },
      ]),
    ).toEqual([["a", "b", "c"]]);
    expect(edges.length).toBeGreaterThan(1000);
  });

  it("packages import only the packages below them", () => {
    const bad = new Set<string>();
    for (const e of edges) {
      const from = packageOf(e.from);
      const to = packageOf(e.to);
      if (from === to) continue;
      if (!(from in PACKAGE_FLOOR)) bad.add(`${from}: a package without a floor in ARCHITECTURE.md`);
      else if (!MAY_IMPORT[from].includes(to)) bad.add(`${e.from} → @kiln/${to}`);
    }
    expect([...bad]).toEqual([]);
    for (const [pkg, deps] of Object.entries(MAY_IMPORT))
      for (const dep of deps) expect(PACKAGE_FLOOR[dep], `${pkg} → ${dep}`).toBeLessThan(PACKAGE_FLOOR[pkg]);
  });

  it("no kit file imports a file on a higher kit floor", () => {
    const kitSrc = "packages/kit/src/";
    const inKit = edges.filter((e) => e.from.startsWith(kitSrc) && e.to.startsWith(kitSrc));
    const local = (f: string) => f.slice(kitSrc.length);
    const targets = (barrel: string) => inKit.filter((e) => local(e.from) === barrel).map((e) => local(e.to));
    const floor = (f: string) => kitFloor(local(f), targets);
    const upward = inKit
      .filter((e) => KIT_FLOORS.indexOf(floor(e.to)) > KIT_FLOORS.indexOf(floor(e.from)))
      .map((e) => `${local(e.from)} (${floor(e.from)}) → ${local(e.to)} (${floor(e.to)})`);
    expect(upward).toEqual([]);
    expect(kitFloor("trainer/objectives/index.ts", targets)).toBe("trainer");
    expect(kitFloor("index.ts", targets)).toBe("cli");
  });

  it("no import cycle, type-only imports included", () => {
    const local = edges.filter((e) => !e.to.startsWith("@kiln/"));
    expect(local.some((e) => e.typeOnly)).toBe(true);
    expect(cycles(local)).toEqual([]);
  });
});
