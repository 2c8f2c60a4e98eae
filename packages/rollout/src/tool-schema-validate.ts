// Validates tool-call arguments against the tool's JSON schema.
// A deliberately small subset of JSON Schema (draft 2020-12) — the keywords OpenAI tool
// declarations use in practice (tau2's retail tools, clembench, questworld): type, properties,
// required, additionalProperties, items, enum, const, anyOf/oneOf/allOf, string/number/array
// bounds and pattern. Unknown keywords are ignored, as a permissive validator should.

import type { JsonSchema } from "./types.js";

export interface SchemaViolation {
  /** JSON-pointer-like path of the offending value, e.g. `/items/0/qty` ("" is the root). */
  path: string;
  message: string;
}

/** Returns every violation of `schema` by `value` (empty when valid). */
export function validateJsonSchema(value: unknown, schema: JsonSchema, path = ""): SchemaViolation[] {
  const out: SchemaViolation[] = [];
  check(value, schema, path, out);
  return out;
}

function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

function matchesType(value: unknown, type: string): boolean {
  switch (type) {
    case "integer":
      return typeof value === "number" && Number.isInteger(value);
    case "number":
      return typeof value === "number" && Number.isFinite(value);
    case "object":
      return typeOf(value) === "object";
    default:
      return typeOf(value) === type;
  }
}

function show(path: string): string {
  return path === "" ? "arguments" : `argument "${path.slice(1)}"`;
}

function check(value: unknown, schema: JsonSchema, path: string, out: SchemaViolation[]): void {
  if (typeof schema !== "object" || schema === null) return; // `true`/{} schemas accept anything
  const s = schema as Record<string, unknown>;

  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? (s.type as string[]) : [s.type as string];
    if (!types.some((t) => matchesType(value, t))) {
      out.push({ path, message: `${show(path)} must be ${types.join(" or ")}, got ${typeOf(value)}` });
      return; // further checks would only repeat the type error
    }
  }
  if (Array.isArray(s.enum) && !s.enum.some((e) => deepEqual(e, value))) {
    out.push({ path, message: `${show(path)} must be one of ${JSON.stringify(s.enum)}, got ${JSON.stringify(value)}` });
  }
  if (s.const !== undefined && !deepEqual(s.const, value)) {
    out.push({ path, message: `${show(path)} must equal ${JSON.stringify(s.const)}` });
  }

  if (typeof value === "string") {
    if (typeof s.minLength === "number" && [...value].length < s.minLength)
      out.push({ path, message: `${show(path)} must have at least ${s.minLength} characters` });
    if (typeof s.maxLength === "number" && [...value].length > s.maxLength)
      out.push({ path, message: `${show(path)} must have at most ${s.maxLength} characters` });
    if (typeof s.pattern === "string") {
      let re: RegExp | null = null;
      try {
        re = new RegExp(s.pattern, "u");
      } catch {
        re = null; // an invalid pattern in a declaration is the tool author's bug, not the agent's
      }
      if (re && !re.test(value)) out.push({ path, message: `${show(path)} must match /${s.pattern}/` });
    }
  }
  if (typeof value === "number") {
    if (typeof s.minimum === "number" && value < s.minimum)
      out.push({ path, message: `${show(path)} must be >= ${s.minimum}, got ${value}` });
    if (typeof s.maximum === "number" && value > s.maximum)
      out.push({ path, message: `${show(path)} must be <= ${s.maximum}, got ${value}` });
    if (typeof s.exclusiveMinimum === "number" && value <= s.exclusiveMinimum)
      out.push({ path, message: `${show(path)} must be > ${s.exclusiveMinimum}, got ${value}` });
    if (typeof s.exclusiveMaximum === "number" && value >= s.exclusiveMaximum)
      out.push({ path, message: `${show(path)} must be < ${s.exclusiveMaximum}, got ${value}` });
  }
  if (Array.isArray(value)) {
    if (typeof s.minItems === "number" && value.length < s.minItems)
      out.push({ path, message: `${show(path)} must have at least ${s.minItems} items` });
    if (typeof s.maxItems === "number" && value.length > s.maxItems)
      out.push({ path, message: `${show(path)} must have at most ${s.maxItems} items` });
    if (s.items && typeof s.items === "object" && !Array.isArray(s.items)) {
      for (let i = 0; i < value.length; i++) check(value[i], s.items as JsonSchema, `${path}/${i}`, out);
    }
  }
  if (typeOf(value) === "object") {
    const obj = value as Record<string, unknown>;
    const props = (s.properties ?? {}) as Record<string, JsonSchema>;
    if (Array.isArray(s.required)) {
      for (const key of s.required as string[]) {
        if (!(key in obj)) out.push({ path: `${path}/${key}`, message: `missing required argument "${key}"` });
      }
    }
    for (const [key, v] of Object.entries(obj)) {
      if (key in props) check(v, props[key], `${path}/${key}`, out);
      else if (s.additionalProperties === false)
        out.push({ path: `${path}/${key}`, message: `unexpected argument "${key}" (not in the tool's parameters)` });
      else if (typeof s.additionalProperties === "object" && s.additionalProperties !== null)
        check(v, s.additionalProperties as JsonSchema, `${path}/${key}`, out);
    }
  }

  if (Array.isArray(s.allOf)) for (const sub of s.allOf as JsonSchema[]) check(value, sub, path, out);
  if (Array.isArray(s.anyOf)) {
    const ok = (s.anyOf as JsonSchema[]).some((sub) => validateJsonSchema(value, sub, path).length === 0);
    if (!ok) out.push({ path, message: `${show(path)} matches none of the allowed alternatives (anyOf)` });
  }
  if (Array.isArray(s.oneOf)) {
    const n = (s.oneOf as JsonSchema[]).filter((sub) => validateJsonSchema(value, sub, path).length === 0).length;
    if (n !== 1) out.push({ path, message: `${show(path)} must match exactly one alternative (oneOf), matched ${n}` });
  }
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a as object);
  const kb = Object.keys(b as object);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

const SCHEMA_TYPES = new Set(["object", "array", "string", "number", "integer", "boolean", "null"]);
const COUNT_KEYWORDS = ["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"];
const NUMBER_KEYWORDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];
const SCHEMA_LIST_KEYWORDS = ["anyOf", "oneOf", "allOf", "prefixItems"];
const SCHEMA_MAP_KEYWORDS = ["properties", "$defs", "definitions", "patternProperties"];
const MAX_SCHEMA_DEPTH = 64;

/**
 * Problems with a JSON Schema itself (not with a value): what OpenAI and vLLM refuse in a tool's
 * `parameters` — an unknown `type`, `properties`/`required`/`enum`/`anyOf` of the wrong shape,
 * non-numeric bounds, a `pattern` that is not a regular expression, nesting deeper than 64.
 * Unknown keywords are allowed (annotations such as `title`, `examples`).
 */
export function checkJsonSchemaDefinition(schema: unknown, path = ""): SchemaViolation[] {
  const out: SchemaViolation[] = [];
  checkDefinition(schema, path, 0, out);
  return out;
}

function checkDefinition(schema: unknown, path: string, depth: number, out: SchemaViolation[]): void {
  const at = path === "" ? "the schema" : path;
  if (typeof schema === "boolean") return;
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
    out.push({ path, message: `${at} must be an object (a JSON Schema), got ${typeOf(schema)}` });
    return;
  }
  if (depth > MAX_SCHEMA_DEPTH) {
    out.push({ path, message: `${at} nests deeper than ${MAX_SCHEMA_DEPTH} levels` });
    return;
  }
  const s = schema as Record<string, unknown>;
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    const bad = types.find((t) => typeof t !== "string" || !SCHEMA_TYPES.has(t));
    if (types.length === 0 || bad !== undefined)
      out.push({
        path: `${path}/type`,
        message: `${path}/type must be one of ${[...SCHEMA_TYPES].join(", ")} (or a list of them), got ${JSON.stringify(s.type)}`,
      });
  }
  for (const key of SCHEMA_MAP_KEYWORDS) {
    if (s[key] === undefined) continue;
    const map = s[key];
    if (typeof map !== "object" || map === null || Array.isArray(map)) {
      out.push({ path: `${path}/${key}`, message: `${path}/${key} must be an object of schemas, got ${typeOf(map)}` });
      continue;
    }
    for (const [name, sub] of Object.entries(map)) checkDefinition(sub, `${path}/${key}/${name}`, depth + 1, out);
  }
  if (s.required !== undefined && !(Array.isArray(s.required) && s.required.every((r) => typeof r === "string")))
    out.push({ path: `${path}/required`, message: `${path}/required must be a list of property names` });
  if (s.enum !== undefined && !(Array.isArray(s.enum) && s.enum.length > 0))
    out.push({ path: `${path}/enum`, message: `${path}/enum must be a non-empty list` });
  for (const key of SCHEMA_LIST_KEYWORDS) {
    if (s[key] === undefined) continue;
    const list = s[key];
    if (!Array.isArray(list) || list.length === 0) {
      out.push({ path: `${path}/${key}`, message: `${path}/${key} must be a non-empty list of schemas` });
      continue;
    }
    for (const [i, sub] of list.entries()) checkDefinition(sub, `${path}/${key}/${i}`, depth + 1, out);
  }
  if (s.items !== undefined) {
    if (Array.isArray(s.items))
      for (const [i, sub] of s.items.entries()) checkDefinition(sub, `${path}/items/${i}`, depth + 1, out);
    else checkDefinition(s.items, `${path}/items`, depth + 1, out);
  }
  for (const key of ["additionalProperties", "not", "contains", "propertyNames"])
    if (s[key] !== undefined) checkDefinition(s[key], `${path}/${key}`, depth + 1, out);
  for (const key of COUNT_KEYWORDS)
    if (s[key] !== undefined && !(Number.isInteger(s[key]) && (s[key] as number) >= 0))
      out.push({
        path: `${path}/${key}`,
        message: `${path}/${key} must be an integer ≥ 0, got ${JSON.stringify(s[key])}`,
      });
  for (const key of NUMBER_KEYWORDS)
    if (s[key] !== undefined && !(typeof s[key] === "number" && Number.isFinite(s[key])))
      out.push({ path: `${path}/${key}`, message: `${path}/${key} must be a number, got ${JSON.stringify(s[key])}` });
  if (s.multipleOf !== undefined && !(typeof s.multipleOf === "number" && s.multipleOf > 0))
    out.push({ path: `${path}/multipleOf`, message: `${path}/multipleOf must be a number > 0` });
  if (s.pattern !== undefined) {
    let ok = typeof s.pattern === "string";
    if (ok) {
      try {
        new RegExp(s.pattern as string, "u");
      } catch {
        ok = false;
      }
    }
    if (!ok)
      out.push({
        path: `${path}/pattern`,
        message: `${path}/pattern is not a regular expression: ${JSON.stringify(s.pattern)}`,
      });
  }
  for (const key of ["description", "title", "$ref"])
    if (s[key] !== undefined && typeof s[key] !== "string")
      out.push({ path: `${path}/${key}`, message: `${path}/${key} must be a string` });
}
