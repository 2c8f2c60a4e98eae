// The world state of adventuregame: a set of fact tuples such as ("at", "apple1", "kitchen1") or, for PDDL
// functions, ("itemcount", "inventory", 0). The reference keeps them in a Python `set`, whose iteration order
// follows string hashes (it changes with PYTHONHASHSEED); this set iterates in insertion order instead, so
// listings in feedback texts are deterministic.
import { InstanceError } from "../../errors.js";

export type FactValue = string | number;
export type Fact = readonly FactValue[];

function keyOf(f: Fact): string {
  return JSON.stringify(f);
}

export class FactSet implements Iterable<Fact> {
  private readonly facts = new Map<string, Fact>();

  constructor(facts: Iterable<Fact> = []) {
    for (const f of facts) this.add(f);
  }

  get size(): number {
    return this.facts.size;
  }

  has(f: Fact): boolean {
    return this.facts.has(keyOf(f));
  }

  add(f: Fact): void {
    const k = keyOf(f);
    if (!this.facts.has(k)) this.facts.set(k, [...f]);
  }

  delete(f: Fact): boolean {
    return this.facts.delete(keyOf(f));
  }

  [Symbol.iterator](): Iterator<Fact> {
    return this.facts.values();
  }

  clone(): FactSet {
    return new FactSet(this);
  }

  union(other: Iterable<Fact>): FactSet {
    const out = this.clone();
    for (const f of other) out.add(f);
    return out;
  }

  /** Facts of this set that `other` lacks. */
  difference(other: FactSet): FactSet {
    return new FactSet([...this].filter((f) => !other.has(f)));
  }

  /** Facts of this set that `other` has too. */
  intersection(other: FactSet): FactSet {
    return new FactSet([...this].filter((f) => other.has(f)));
  }

  equals(other: FactSet): boolean {
    return this.size === other.size && [...this].every((f) => other.has(f));
  }
}

/** `fact_str_to_tuple` (adv_util.py): "at(apple1,kitchen1)" → ["at", "apple1", "kitchen1"]; at most 3 parts. */
export function factFromString(s: string): Fact {
  const open = s.indexOf("(");
  if (open < 0 || !s.endsWith(")")) throw new InstanceError(`adventuregame: malformed fact ${JSON.stringify(s)}`);
  const type = s.slice(0, open);
  const rest = s.slice(open + 1);
  const comma = rest.indexOf(",");
  if (comma < 0) return [type, rest.slice(0, -1)];
  const inner = rest.slice(0, -1);
  return [type, inner.slice(0, comma), inner.slice(comma + 1)];
}

/** `fact_tuple_to_str`: ["on", "book1", "table1"] → "on(book1,table1)". */
export function factToString(f: Fact): string {
  return `${f[0]}(${f.slice(1).join(",")})`;
}
