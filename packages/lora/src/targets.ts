// Which Linear layers get an adapter (PEFT tuners_utils / lora config semantics).
import { matchesTargetModules } from "@kiln/hub-io";
import type { Linear } from "@kiln/models";
import { LoraError } from "./errors.js";

export type TargetModules = readonly string[] | string | RegExp | "all-linear";

/**
 * Resolve targets against a model's HF module names:
 * - list: exact name or "."-suffix match; string: full regex match;
 * - "all-linear" (any case): every Linear except the output head (`lm_head`), as PEFT for causal LMs.
 */
export function resolveTargets(
  linears: readonly [string, Linear][],
  targets: TargetModules,
  outputHead = "lm_head",
): [string, Linear][] {
  let picked: [string, Linear][];
  if (typeof targets === "string" && targets.toLowerCase() === "all-linear") {
    picked = linears.filter(([name]) => name !== outputHead);
  } else if (targets instanceof RegExp) {
    picked = linears.filter(([name]) => {
      const m = targets.exec(name);
      return m !== null && m.index === 0 && m[0].length === name.length;
    });
  } else {
    picked = linears.filter(([name]) => matchesTargetModules(name, targets as string[] | string));
  }
  if (picked.length === 0) {
    const sample = linears
      .slice(0, 8)
      .map(([n]) => n)
      .join(", ");
    throw new LoraError(`target_modules ${describe(targets)} matched no linear layer (the model has e.g. ${sample})`);
  }
  return picked;
}

function describe(t: TargetModules): string {
  return t instanceof RegExp ? String(t) : JSON.stringify(t);
}

/** Short names (q_proj, …) for a saved config, as PEFT writes target_modules. */
export function shortTargetNames(modules: readonly string[]): string[] {
  return [...new Set(modules.map((m) => m.slice(m.lastIndexOf(".") + 1)))].sort();
}
