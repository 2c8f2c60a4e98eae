// The PDDL subset of adventuregame's action and domain definitions (clembench a717f238
// `resources/pddl_actions.lark`, `resources/pddl_domain.lark` and the `PDDLActionTransformer` /
// `PDDLDomainTransformer` of `if_wrapper.py`), read into the same shapes the reference's transformers build.
import { ResourceError } from "../../errors.js";

export type Variable = { variable: string };
export type PredArg = string | Variable;
/** `(pred ?a b)`: up to three arguments, missing ones null (as the reference's None). */
export interface Pred {
  predicate: string;
  arg1: PredArg | null;
  arg2: PredArg | null;
  arg3: PredArg | null;
}
export type FunctionTerm = { function_number: string } | { function_id: string; function_variable: Variable };
export interface NumComp {
  num_comp: "equal" | "less" | "leq" | "greater" | "greq";
  arg1: FunctionTerm;
  arg2: FunctionTerm;
}
export interface FunctionChange {
  function_change: "assign" | "increase" | "decrease";
  arg1: FunctionTerm;
  arg2: FunctionTerm;
}
export interface TypeListElement {
  type_list_element: string;
  items: (string | Variable)[];
}
export interface TypeList {
  type_list: TypeListElement[];
}
export interface And {
  and: Formula[];
}
export interface Or {
  or: Formula[];
}
export interface Not {
  not: Pred;
}
export interface When {
  when: [Formula, Formula];
}
export interface Forall {
  forall: TypeList | Pred;
  body: Formula[];
}
export type Formula = Pred | NumComp | FunctionChange | And | Or | Not | When | Forall | TypeList;

export interface ActionDefinition {
  action_name: string;
  parameters: TypeList;
  precondition: Formula[];
  effect: Formula[];
}

export interface DomainFunction {
  function_def_predicate: string;
  function_def_variable: Variable;
  function_def_type: string;
}

export interface DomainDefinition {
  domain_id?: string;
  types: Record<string, string[]>;
  functions?: DomainFunction[];
}

type SExp = string | SExp[];

function readSExp(src: string, where: string): SExp {
  const tokens = src.match(/\(|\)|[^\s()]+/g) ?? [];
  let i = 0;
  const read = (): SExp => {
    const t = tokens[i++];
    if (t === undefined) throw new ResourceError(`${where}: unexpected end of PDDL`);
    if (t === ")") throw new ResourceError(`${where}: unexpected ")" in PDDL`);
    if (t !== "(") return t;
    const list: SExp[] = [];
    while (tokens[i] !== ")") {
      if (i >= tokens.length) throw new ResourceError(`${where}: missing ")" in PDDL`);
      list.push(read());
    }
    i++;
    return list;
  };
  const out = read();
  if (i !== tokens.length) throw new ResourceError(`${where}: trailing text after the PDDL expression`);
  return out;
}

function isList(x: SExp): x is SExp[] {
  return Array.isArray(x);
}

function atom(x: SExp, where: string): string {
  if (isList(x)) throw new ResourceError(`${where}: expected a name, got a list`);
  return x;
}

function arg(x: SExp, where: string): PredArg {
  const a = atom(x, where);
  return a.startsWith("?") ? { variable: a.slice(1) } : a;
}

/** `(?a ?b - type ?c - other)`: variables (or names) grouped by the type after each dash. */
function typeList(list: SExp[], where: string): TypeList {
  const out: TypeListElement[] = [];
  let items: (string | Variable)[] = [];
  for (let i = 0; i < list.length; i++) {
    const x = atom(list[i], where);
    if (x === "-") {
      const t = list[++i];
      if (t === undefined) throw new ResourceError(`${where}: type list ends with "-"`);
      out.push({ type_list_element: atom(t, where), items });
      items = [];
    } else items.push(x.startsWith("?") ? { variable: x.slice(1) } : x);
  }
  if (items.length) throw new ResourceError(`${where}: type list items without a type`);
  return { type_list: out };
}

function functionTerm(x: SExp, where: string): FunctionTerm {
  if (!isList(x)) {
    if (!/^\d+(\.\d+)?$/.test(x)) throw new ResourceError(`${where}: bad number ${x}`);
    return { function_number: x };
  }
  if (x.length !== 2) throw new ResourceError(`${where}: a function term is (name ?var)`);
  const v = arg(x[1], where);
  if (typeof v === "string") throw new ResourceError(`${where}: a function term needs a variable`);
  return { function_id: atom(x[0], where), function_variable: v };
}

const NUM_COMP: Record<string, NumComp["num_comp"]> = {
  "=": "equal",
  "<": "less",
  "<=": "leq",
  ">": "greater",
  ">=": "greq",
};
const FN_CHANGE: Record<string, FunctionChange["function_change"]> = {
  assign: "assign",
  increase: "increase",
  decrease: "decrease",
};

function pred(list: SExp[], where: string): Pred {
  if (list.length < 1 || list.length > 4) throw new ResourceError(`${where}: a predicate has 0 to 3 arguments`);
  return {
    predicate: atom(list[0], where),
    arg1: list.length > 1 ? arg(list[1], where) : null,
    arg2: list.length > 2 ? arg(list[2], where) : null,
    arg3: list.length > 3 ? arg(list[3], where) : null,
  };
}

function formula(x: SExp, where: string): Formula {
  if (!isList(x) || x.length === 0) throw new ResourceError(`${where}: expected a PDDL formula`);
  const head = x[0];
  if (isList(head)) {
    // a bare type list, e.g. the iterated object of a forall
    return typeList(x, where);
  }
  if (head.startsWith("?")) return typeList(x, where);
  const rest = x.slice(1);
  switch (head) {
    case "and":
      return { and: rest.map((y) => formula(y, where)) };
    case "or":
      return { or: rest.map((y) => formula(y, where)) };
    case "not": {
      if (rest.length !== 1 || !isList(rest[0])) throw new ResourceError(`${where}: (not X) wraps one predicate`);
      return { not: pred(rest[0], where) };
    }
    case "when": {
      if (rest.length !== 2) throw new ResourceError(`${where}: (when condition effect)`);
      return { when: [formula(rest[0], where), formula(rest[1], where)] };
    }
    case "forall": {
      if (rest.length < 2 || !isList(rest[0])) throw new ResourceError(`${where}: (forall (?x - type) body)`);
      return { forall: typeList(rest[0], where), body: rest.slice(1).map((y) => formula(y, where)) };
    }
  }
  if (head in NUM_COMP) {
    if (rest.length !== 2) throw new ResourceError(`${where}: (${head} a b)`);
    return { num_comp: NUM_COMP[head], arg1: functionTerm(rest[0], where), arg2: functionTerm(rest[1], where) };
  }
  if (head in FN_CHANGE) {
    if (rest.length !== 2) throw new ResourceError(`${where}: (${head} a b)`);
    return {
      function_change: FN_CHANGE[head],
      arg1: functionTerm(rest[0], where),
      arg2: functionTerm(rest[1], where),
    };
  }
  return pred(x, where);
}

/** Read an `(:action NAME :parameters (...) :precondition (...) :effect (...))` definition. */
export function parseActionPddl(src: string, where: string): ActionDefinition {
  const x = readSExp(src, where);
  if (!isList(x) || x[0] !== ":action" || x.length < 2) throw new ResourceError(`${where}: expected (:action ...)`);
  const out: Partial<ActionDefinition> = { action_name: atom(x[1], where).toLowerCase() };
  for (let i = 2; i < x.length; i += 2) {
    const key = x[i];
    const value = x[i + 1];
    if (value === undefined) throw new ResourceError(`${where}: ${String(key)} has no value`);
    if (key === ":parameters") {
      if (!isList(value)) throw new ResourceError(`${where}: :parameters needs a list`);
      out.parameters = typeList(value, where);
    } else if (key === ":precondition") out.precondition = [formula(value, where)];
    else if (key === ":effect") out.effect = [formula(value, where)];
    else throw new ResourceError(`${where}: unsupported action part ${String(key)}`);
  }
  if (!out.parameters || !out.precondition || !out.effect)
    throw new ResourceError(`${where}: an action needs :parameters, :precondition and :effect`);
  return out as ActionDefinition;
}

/** Read a `(define (domain X) (:types ...) (:functions ...))` definition. */
export function parseDomainPddl(src: string, where: string): DomainDefinition {
  const x = readSExp(src, where);
  if (!isList(x) || x[0] !== "define") throw new ResourceError(`${where}: expected (define ...)`);
  const out: DomainDefinition = { types: {} };
  for (const part of x.slice(1)) {
    if (!isList(part) || part.length === 0) throw new ResourceError(`${where}: bad domain part`);
    const head = atom(part[0], where);
    if (head === "domain") out.domain_id = atom(part[1], where);
    else if (head === ":types") {
      // one `names - type` group per type; a later group for the same type replaces the earlier (Python dict)
      for (const el of typeList(part.slice(1), where).type_list)
        out.types[el.type_list_element] = el.items.map((it) => (typeof it === "string" ? it : `?${it.variable}`));
    } else if (head === ":functions") {
      out.functions = part.slice(1).map((f) => {
        if (!isList(f)) throw new ResourceError(`${where}: bad function definition`);
        const [name, variable, dash, type] = f;
        if (dash !== "-" || typeof type !== "string" || typeof variable !== "string" || !variable.startsWith("?"))
          throw new ResourceError(`${where}: a function is (name ?var - type)`);
        return {
          function_def_predicate: atom(name, where),
          function_def_variable: { variable: variable.slice(1) },
          function_def_type: type,
        };
      });
    } else throw new ResourceError(`${where}: unsupported domain part ${head}`);
  }
  if (!out.types.entity) throw new ResourceError(`${where}: the domain defines no entity types`);
  return out;
}
