// `kiln presets [arp|opd|oel|repro]`: every preset with the source of each of its values — the seed
// card's (seed 000, 002/003, 004), kiln's with its reason, or a preset's — so a reader can tell which
// numbers follow the seeds before spending a GPU hour on them.
import { configProvenance, presetLayers, provenanceBlock } from "../recipes/preset-provenance.js";
import { RECIPE_PRESETS, type RecipeName, presetConfig } from "../recipes/presets.js";
import { reproConfig, reproLayers, reproQuickConfig } from "../repro/config.js";
import { defineCommand } from "./args.js";

const RECIPES: readonly RecipeName[] = ["arp", "opd", "oel"];

/** The blocks `kiln presets` prints for `which` (a recipe, "repro", or everything). */
export function presetsReport(which?: string): string {
  const blocks: string[] = [];
  for (const recipe of RECIPES) {
    if (which !== undefined && which !== recipe) continue;
    for (const [name, preset] of Object.entries(RECIPE_PRESETS[recipe].presets))
      blocks.push(
        provenanceBlock(
          `kiln ${recipe} --preset ${name} (${preset.about}):`,
          configProvenance(recipe, presetLayers(recipe, name), presetConfig(recipe, name)),
        ),
      );
  }
  if (which === undefined || which === "repro")
    for (const quick of [false, true])
      for (const recipe of RECIPES) {
        const config = (quick ? reproQuickConfig() : reproConfig())[recipe];
        blocks.push(
          provenanceBlock(
            `kiln repro ${recipe}${quick ? " --quick" : ""}, the ${recipe} configuration:`,
            configProvenance(recipe, reproLayers(recipe, quick), config),
          ),
        );
      }
  return blocks.join("\n\n");
}

export const presetsCommand = defineCommand({
  name: "presets",
  summary: "each preset's values and where they come from: the seed card, kiln's choice (with why), a preset",
  description:
    "Prints, per preset, the values that follow the seed card (ARP: seeds 002/003, OPD: seed 000, OEL: seed 004) and those that are kiln's, each with its reason. `kiln <recipe> --print-config` and `kiln repro` print the same block for their effective configuration.",
  positionals: [
    { name: "which", description: "one recipe, or repro", optional: true, choices: ["arp", "opd", "oel", "repro"] },
  ],
  options: {},
  examples: ["kiln presets", "kiln presets oel", "kiln presets repro"],
  run: async (a) => {
    console.log(presetsReport(a.positionals[0]));
    return 0;
  },
});
