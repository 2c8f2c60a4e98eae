// Checks tool-call arguments against the subset of JSON Schema the questworld tools use
// (object with properties/required/additionalProperties; string enums; bounded integers).
// Kept local so the environment depends on @kiln/rollout's types only.

import type { JsonSchema } from "@kiln/rollout";

/** Returns one message per violation, each naming the argument and the rule; [] when valid. */
export function validateArgs(args: unknown, schema: JsonSchema): string[] {
  const errors: string[] = [];
  if (typeof args !== "object" || args === null || Array.isArray(args)) {
    return ["arguments: must be a JSON object"];
  }
  const obj = args as Record<string, unknown>;
  const props = (schema.properties ?? {}) as Record<string, JsonSchema>;
  for (const name of (schema.required ?? []) as string[]) {
    if (!(name in obj)) errors.push(`${name}: is required`);
  }
  for (const [name, value] of Object.entries(obj)) {
    const p = props[name];
    if (!p) {
      if (schema.additionalProperties === false) errors.push(`${name}: is not a parameter of this tool`);
      continue;
    }
    errors.push(...checkValue(name, value, p));
  }
  return errors;
}

function checkValue(name: string, value: unknown, p: JsonSchema): string[] {
  if (p.type === "string") {
    if (typeof value !== "string") return [`${name}: must be a string`];
    const options = p.enum as string[] | undefined;
    if (options && !options.includes(value))
      return [`${name}: ${JSON.stringify(value)} is not one of ${options.join(", ")}`];
    return [];
  }
  if (p.type === "integer") {
    if (typeof value !== "number" || !Number.isInteger(value)) return [`${name}: must be an integer`];
    if (typeof p.minimum === "number" && value < p.minimum) return [`${name}: must be ≥ ${p.minimum}`];
    if (typeof p.maximum === "number" && value > p.maximum) return [`${name}: must be ≤ ${p.maximum}`];
    return [];
  }
  return [];
}
