// Every preset resolves to a full, valid configuration whose values are pinned in a committed file
// snapshot, test/fixtures/presets.json (made from the presets before they became one default + overrides, so that change moved no
// value). Changing a preset on purpose: `pnpm exec vitest run test/recipes/presets.test.ts --update` and
// commit the snapshot's diff with the change.
import { describe, expect, it } from "vitest";
import { configProblems } from "../../src/recipes/config-checks.js";
import { RecipeError } from "../../src/errors.js";
import { RECIPE_PRESETS, presetConfig, recipeConfig, resolveConfig } from "../../src/recipes/presets.js";
import { reproConfig, reproQuickConfig } from "../../src/repro/config.js";

const RECIPES = ["arp", "opd", "oel"] as const;

function allPresets(): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const recipe of RECIPES)
    for (const preset of ["seed", "tiny"]) out[`${recipe}/${preset}`] = presetConfig(recipe, preset);
  out["repro/default"] = reproConfig(42);
  out["repro/quick"] = reproQuickConfig(42);
  return out;
}

/** JSON with every object's keys sorted: the snapshot pins values, not the order a literal lists them in. */
function sortedJson(value: unknown): string {
  const sortKeys = (v: unknown): unknown =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]),
        )
      : v;
  return `${JSON.stringify(sortKeys(value), null, 2)}\n`;
}

describe("presets", () => {
  it("resolve to the values pinned in the snapshot", async () => {
    await expect(sortedJson(allPresets())).toMatchFileSnapshot("../fixtures/presets.json");
  });

  it("every preset is a full configuration that passes the checks", () => {
    for (const [name, config] of Object.entries(allPresets()))
      expect([name, configProblems(config)]).toEqual([name, []]);
  });

  it("a preset is its recipe's default with a few overrides merged on; the default is never modified", () => {
    const before = structuredClone(RECIPE_PRESETS.arp.defaults);
    const tiny = presetConfig("arp", "tiny");
    expect(tiny.sft.lr).toBe(5e-3);
    // What the override leaves out follows the default.
    expect(tiny.sft.schedule).toBe(RECIPE_PRESETS.arp.defaults.sft.schedule);
    expect(tiny.turnDpo1.modes).toEqual(["repeat", "length"]);
    tiny.turnDpo1.modes.push("invalid");
    tiny.lora.r = 99;
    expect(RECIPE_PRESETS.arp.defaults).toEqual(before);
    expect(presetConfig("arp", "seed")).toEqual(before);
    expect(recipeConfig("opd", { rounds: 5, objective: { clamp: 1 } })).toMatchObject({
      rounds: 5,
      objective: { clamp: 1, earlyTurnWeight: 1.5 },
    });
  });

  it("an override naming a field the configuration lacks, or the wrong shape, is an error naming its path", () => {
    const defaults = { a: 1, s: { b: 2, list: [1, 2] } };
    expect(resolveConfig(defaults, { s: { list: [3] } })).toEqual({ a: 1, s: { b: 2, list: [3] } });
    expect(() => resolveConfig(defaults, { s: { c: 3 } } as never)).toThrow(
      new RecipeError('override "s.c": the configuration has no such field'),
    );
    expect(() => resolveConfig(defaults, { s: 1 } as never)).toThrow(
      new RecipeError('override "s": a value for a section'),
    );
    expect(() => resolveConfig(defaults, { a: { x: 1 } } as never)).toThrow(
      new RecipeError('override "a": a section for a value'),
    );
    expect(() => presetConfig("oel", "huge")).toThrow('unknown preset "huge" for oel (seed | tiny)');
    expect(() => presetConfig("oel", "toString")).toThrow('unknown preset "toString"');
  });
});
