// `kiln repro arp|opd|oel|all`: the recipe tables on held-out instances, printed as Markdown, each
// with report.html in its directory. Default model: the embedded agent model (data/agent-model/);
// until it ships, the random tiny chat model stands in with a warning (`--model tiny` asks for it).
import { join } from "node:path";
import { type BackendName, disposeNativeBackend, disposeWasmBackend, initBackend, setBackend } from "@kiln/tensor";
import { agentModelAvailable, agentModelDir } from "../agent-model/paths.js";
import { type OptionValues, UsageError, defineCommand, setAssignments } from "../cli/args.js";
import { onInterrupt, shellQuote } from "../cli/interrupt.js";
import { withDirLocks } from "../dir-lock.js";
import { checkOutputSeparate } from "../output-dir.js";
import { checkRecipeConfig } from "../recipes/config-checks.js";
import { configProvenance, provenanceBlock } from "../recipes/preset-provenance.js";
import { overlayUserConfig } from "../recipes/presets.js";
import { reproArp, reproArpSeeds } from "./arp-repro.js";
import { type ReproConfig, reproConfig, reproLayers, reproQuickConfig } from "./config.js";
import { ReproError } from "./errors.js";
import { type ModelSource, dirModelSource, tinyChatSource } from "./model-source.js";
import { OelEvaluationCache, reproOel } from "./oel-repro.js";
import { reproOpd } from "./opd-repro.js";
import {
  type ReproEpisodeError,
  type ReproResult,
  acrossSeedsTable,
  secondsSince,
  timingTable,
  wallTimeTable,
  writeReproOutputs,
} from "./output.js";
import { markdownTable } from "./table.js";

export const REPRO_RECIPES = ["arp", "opd", "oel", "all"] as const;
/** Each ablation and the recipe it belongs to. */
export const REPRO_ABLATIONS = {
  scale: "arp",
  "dpo-reference": "arp",
  "early-turn-weight": "opd",
  clamp: "opd",
  objective: "opd",
} as const;
export type ReproAblation = keyof typeof REPRO_ABLATIONS;

/** What `kiln repro` reads to build its configuration. */
export interface ReproConfigFlags {
  quick?: boolean;
  seed?: number;
  config?: string;
  set?: string | readonly string[];
}

/** The configuration: preset (--quick or the budget-sized one), --config FILE, --set fields; every field checked. */
export function reproEffectiveConfig(flags: ReproConfigFlags): ReproConfig {
  const seed = flags.seed ?? 42;
  const config = flags.quick ? reproQuickConfig(seed) : reproConfig(seed);
  overlayUserConfig(config, flags.config, setAssignments(flags.set));
  try {
    checkRecipeConfig(config);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  return config;
}

/** --model DIR, --model tiny, or the embedded agent model (tiny with a warning while it is absent). */
export function reproModelSource(
  model: string | undefined,
  seed: number,
  warn: (line: string) => void = (l) => console.error(l),
): ModelSource {
  const dir = model;
  if (dir === "tiny" || dir === "random-tiny") return tinyChatSource(seed);
  if (dir !== undefined) {
    try {
      return dirModelSource(dir);
    } catch (e) {
      if (e instanceof ReproError) throw new UsageError(`--model: ${e.message}`);
      throw e;
    }
  }
  const embedded = agentModelDir();
  if (agentModelAvailable(embedded)) return dirModelSource(embedded);
  warn(
    `kiln repro: the embedded agent model is not in ${embedded} yet; using the random tiny chat model (a pipeline check: expect zeros). Pass --model DIR for a real model.`,
  );
  return tinyChatSource(seed);
}

const REPRO_OPTIONS = {
  model: {
    type: "string",
    placeholder: "DIR|tiny",
    description:
      "the base model; tiny (or random-tiny): the random tiny chat model (default: the embedded agent model)",
  },
  seed: { type: "integer", description: "one seed for every recipe (default: --seeds 42,43; --quick: 42)" },
  seeds: {
    type: "string",
    placeholder: "N,N…",
    description:
      "each table once per seed, then the mean across seeds (default 42,43; --quick and --ablation: the first only)",
  },
  out: { type: "string", default: "runs", placeholder: "DIR", description: "parent of the repro-<recipe> directories" },
  ablation: {
    type: "string",
    choices: ["scale", "dpo-reference", "early-turn-weight", "clamp", "objective"] satisfies readonly ReproAblation[],
    description: "scale, dpo-reference (arp); early-turn-weight, clamp, objective (opd)",
  },
  quick: { type: "boolean", description: "the small sizes (a pipeline check in minutes)" },
  set: { type: "string", multiple: true, placeholder: "PATH=V[;PATH=V…]", description: "single configuration fields" },
  config: { type: "string", placeholder: "FILE.json", description: "a JSON overlay of configuration fields" },
  "print-config": { type: "boolean", description: "print the effective configuration and exit" },
  teacher: { type: "string", placeholder: "DIR", description: "opd: a separate teacher model (same tokenizer)" },
  backend: {
    type: "string",
    choices: ["auto", "native", "wasm", "js"],
    default: "auto",
    description:
      "tensor backend (auto: native where a BLAS loads, else wasm; a table is deterministic per seed on one backend)",
  },
  quiet: { type: "boolean", description: "no progress bars or log lines, only the tables" },
  "no-progress": { type: "boolean", description: "no progress bars" },
  resume: { type: "boolean", description: "refused: repro recomputes each table from the start" },
} as const;

export const reproCommand = defineCommand({
  name: "repro",
  summary: "the recipes' result tables on held-out instances: n, mean ± SE, paired Δ ± SE vs the base, report.html",
  description:
    "Writes runs/repro-<recipe>/ (table.md, report.html, the models) and prints each table. Default model: the embedded agent model. A repro run does not resume: each table is recomputed from the start (an interrupted one is simply rerun).",
  positionals: [{ name: "recipe", description: "which table", choices: REPRO_RECIPES }],
  options: REPRO_OPTIONS,
  examples: ["kiln repro arp --quick", "kiln repro opd --ablation clamp --seed 7"],
  run: (a) => runReproCommand(a.positionals[0] as (typeof REPRO_RECIPES)[number], a.values, a.argv),
});

type ReproValues = OptionValues<typeof REPRO_OPTIONS>;

/** "42,43" → [42, 43]: integers, at least one, none twice. */
export function parseSeeds(text: string): number[] {
  const parts = text.split(",").map((p) => p.trim());
  const seeds = parts.map(Number);
  const bad = parts.find((p, i) => p === "" || !Number.isInteger(seeds[i]));
  if (bad !== undefined) throw new UsageError(`--seeds: "${bad}" is not an integer (expected e.g. 42,43)`);
  if (new Set(seeds).size !== seeds.length) throw new UsageError(`--seeds: a seed appears twice in "${text}"`);
  return seeds;
}

/** The seeds of a full `kiln repro` table when neither --seed nor --seeds names them: two draws of everything. */
export const REPRO_DEFAULT_SEEDS: readonly number[] = [42, 43];

/**
 * The seeds a `kiln repro` command runs: --seeds, or --seed alone, or REPRO_DEFAULT_SEEDS; --quick (a
 * pipeline check) and an ablation run the first unless --seeds asks for more (refused for an ablation).
 */
export function reproSeeds(f: { seed?: number; seeds?: string; quick?: boolean; ablation?: string }): number[] {
  if (f.seed !== undefined && f.seeds !== undefined)
    throw new UsageError("--seed and --seeds exclude each other (--seeds 42,43 runs both)");
  if (f.seeds !== undefined) {
    const seeds = parseSeeds(f.seeds);
    if (seeds.length > 1 && f.ablation !== undefined)
      throw new UsageError(`--ablation ${f.ablation} runs one seed: give --seed N instead of --seeds`);
    return seeds;
  }
  if (f.seed !== undefined) return [f.seed];
  return f.quick || f.ablation !== undefined ? [REPRO_DEFAULT_SEEDS[0]] : [...REPRO_DEFAULT_SEEDS];
}

export async function runReproCommand(
  recipe: (typeof REPRO_RECIPES)[number],
  f: ReproValues,
  argv: readonly string[] = [],
): Promise<number> {
  if (f.resume)
    throw new UsageError(
      "kiln repro does not resume: each table is recomputed from the start so its numbers come from one uninterrupted run; rerun the same command without --resume",
    );
  const ablation = f.ablation;
  if (ablation !== undefined) {
    const owner = REPRO_ABLATIONS[ablation];
    if (recipe !== owner && recipe !== "all")
      throw new UsageError(`--ablation ${ablation} belongs to \`kiln repro ${owner}\`, not ${recipe}`);
  }
  const seeds = reproSeeds(f);
  const configs = seeds.map((seed) => reproEffectiveConfig({ ...f, seed }));
  const config = configs[0];
  if (f["print-config"]) {
    console.log(JSON.stringify(config, null, 2));
    return 0;
  }
  const backend = f.backend as BackendName | "auto";
  const source = reproModelSource(f.model, config.seed);
  const io = {
    out: f.out,
    progress: !f["no-progress"] && !f.quiet,
    log: f.quiet ? () => {} : undefined,
  };
  const command = ["kiln repro", ...argv.map(shellQuote)].join(" ");
  const recipes = ablation ? [REPRO_ABLATIONS[ablation]] : recipe === "all" ? ["arp", "opd", "oel"] : [recipe];
  const dirs = recipes.map((r) => join(f.out, ablation ? `repro-${r}-${ablation}` : `repro-${r}`));
  if (source.dir)
    try {
      for (const d of dirs) checkOutputSeparate(d, [{ label: "the model", path: source.dir }], "the output");
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
  const start = performance.now();
  const wall: { label: string; seconds: number }[] = [];
  const errored: ReproEpisodeError[] = [];
  let current: string | undefined;
  let backendLine = "kiln backend: js";
  let active: string = backend;
  const stopInterrupts = onInterrupt(() => current, `${command} (repro does not resume: the table is recomputed)`);
  try {
    await withDirLocks(dirs, command, async () => {
      if (backend === "js") setBackend("js");
      else {
        const choice = await initBackend(backend);
        backendLine = choice.line;
        active = choice.backend;
      }
      if (!f.quiet) console.log(backendLine);
      try {
        for (const [i, r] of recipes.entries()) {
          current = dirs[i];
          const recipeStart = performance.now();
          const which = r as "arp" | "opd" | "oel";
          console.log(
            `${provenanceBlock(
              `kiln repro ${r}: which values follow the seed card and which are kiln's`,
              configProvenance(which, reproLayers(which, f.quick === true), config[which]),
            )}\n`,
          );
          // One per recipe: later seeds reuse the seed-free OEL rows the first seed played.
          const oelEvaluations = new OelEvaluationCache();
          const runOne = (c: ReproConfig, dir?: string): Promise<ReproResult> => {
            const seedIo = dir ? { ...io, dir } : io;
            if (r === "arp")
              return reproArp(source, c, { ...seedIo, ablation: ablation as "scale" | "dpo-reference" | undefined });
            if (r === "opd")
              return reproOpd(source, c, {
                ...seedIo,
                teacher: f.teacher ? dirModelSource(f.teacher) : undefined,
                ablation: ablation as "early-turn-weight" | "clamp" | "objective" | undefined,
              });
            return reproOel(source, c, { ...seedIo, evaluations: oelEvaluations });
          };
          const show = (result: ReproResult, c: ReproConfig) => {
            const markdown = writeReproOutputs(result, c, command, backendLine);
            console.log(`${markdown}\n\n${markdownTable(timingTable(result))}\n\nreport: ${result.dir}/report.html\n`);
          };
          let result: ReproResult;
          if (seeds.length === 1) {
            result = await runOne(config);
            wall.push({ label: `${r} (seed ${seeds[0]})`, seconds: secondsSince(recipeStart) });
          } else if (r === "arp") {
            result = await reproArpSeeds(source, configs, io);
            for (const seed of seeds)
              wall.push({ label: `arp, seed ${seed}`, seconds: result.seconds[`seed ${seed}`] });
          } else {
            // Each seed's whole table in <dir>/seed-<seed>/, printed as it finishes; then the mean across seeds.
            const runs: { seed: number; result: ReproResult }[] = [];
            for (const c of configs) {
              const seedStart = performance.now();
              const one = await runOne(c, join(dirs[i], `seed-${c.seed}`));
              show(one, c);
              runs.push({ seed: c.seed, result: one });
              wall.push({ label: `${r}, seed ${c.seed}`, seconds: secondsSince(seedStart) });
            }
            const across = acrossSeedsTable(r, runs);
            result = {
              recipe: r,
              dir: dirs[i],
              tables: across ? [across] : [],
              seconds: Object.fromEntries(runs.map((x) => [`seed ${x.seed}`, x.result.totalSeconds])),
              totalSeconds: secondsSince(recipeStart),
              details: Object.fromEntries(runs.map((x) => [`seed-${x.seed}`, x.result.details])),
              errors: runs.flatMap((x) => x.result.errors ?? []),
            };
          }
          show(result, config);
          const errors = result.errors ?? [];
          console.log(`${r}: ${errors.length} errored evaluation episode${errors.length === 1 ? "" : "s"}`);
          errored.push(...errors);
        }
      } finally {
        if (active !== "js") {
          setBackend("js");
          if (active === "native") disposeNativeBackend();
          disposeWasmBackend();
        }
      }
    });
  } finally {
    stopInterrupts();
  }
  if (wall.length > 1) console.log(`${markdownTable(wallTimeTable(command, wall))}\n`);
  console.log(`kiln repro ${recipe}: total wall time ${secondsSince(start).toFixed(1)} s`);
  if (errored.length === 0) return 0;
  // The tables count an errored episode as a failure; a table built on errors must not pass for a result.
  const first = errored[0];
  console.error(
    `kiln repro ${recipe}: ${errored.length} evaluation episodes errored (first: ${first.phase}, ${first.id}: ${first.reason}); the tables count them as failures`,
  );
  return 1;
}
