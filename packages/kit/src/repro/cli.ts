// `kiln repro arp|opd|oel|all`: the recipe tables on held-out instances, printed as Markdown, each
// with report.html in its directory. Default model: the embedded agent model (data/agent-model/);
// until it ships, the random tiny chat model stands in with a warning (`--model tiny` asks for it).
import { readFileSync } from "node:fs";
import { type BackendName, disposeWasmBackend, initBackend, setBackend } from "@kiln/tensor";
import { agentModelAvailable, agentModelDir } from "../agent-model/paths.js";
import { type ParsedArgs, UsageError, intFlag, strFlag } from "../cli-main.js";
import { applyConfigObject, setConfigValue } from "../recipes/presets.js";
import { reproArp } from "./arp-repro.js";
import { type ReproConfig, reproConfig, reproQuickConfig } from "./config.js";
import { ReproError } from "./errors.js";
import { type ModelSource, dirModelSource, tinyChatSource } from "./model-source.js";
import { reproOel } from "./oel-repro.js";
import { reproOpd } from "./opd-repro.js";
import { type ReproResult, timingTable, writeReproOutputs } from "./output.js";
import { markdownTable } from "./table.js";

export const REPRO_RECIPES = ["arp", "opd", "oel", "all"] as const;
/** Each ablation and the recipe it belongs to. */
export const REPRO_ABLATIONS = {
  scale: "arp",
  "dpo-reference": "arp",
  "early-turn-weight": "opd",
  clamp: "opd",
} as const;
export type ReproAblation = keyof typeof REPRO_ABLATIONS;

/** The configuration: preset (--quick or the budget-sized one), --config FILE, --set fields. */
export function reproEffectiveConfig(flags: ParsedArgs["flags"]): ReproConfig {
  const seed = intFlag(flags, "seed", 42);
  const config = flags.quick ? reproQuickConfig(seed) : reproConfig(seed);
  const file = strFlag(flags, "config");
  try {
    if (file) applyConfigObject(config, JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>);
    for (const part of (strFlag(flags, "set") ?? "").split(";").filter((s) => s.trim())) {
      const eq = part.indexOf("=");
      if (eq <= 0) throw new Error(`--set needs path=value, got "${part}"`);
      setConfigValue(config, part.slice(0, eq).trim(), part.slice(eq + 1).trim());
    }
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  return config;
}

/** --model DIR, --model tiny, or the embedded agent model (tiny with a warning while it is absent). */
export function reproModelSource(
  flags: ParsedArgs["flags"],
  seed: number,
  warn: (line: string) => void = (l) => console.error(l),
): ModelSource {
  const dir = strFlag(flags, "model");
  if (dir === "tiny") return tinyChatSource(seed);
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

export async function runReproCommand(args: ParsedArgs): Promise<number> {
  const f = args.flags;
  const recipe = args.positional[0];
  if (!REPRO_RECIPES.includes(recipe as (typeof REPRO_RECIPES)[number]))
    throw new UsageError(`repro needs one of ${REPRO_RECIPES.join(" | ")}, got ${recipe ?? "nothing"}`);
  const ablationName = strFlag(f, "ablation");
  let ablation: ReproAblation | undefined;
  if (ablationName !== undefined) {
    if (!(ablationName in REPRO_ABLATIONS))
      throw new UsageError(
        `--ablation must be one of ${Object.keys(REPRO_ABLATIONS).join(", ")}, got "${ablationName}"`,
      );
    ablation = ablationName as ReproAblation;
    const owner = REPRO_ABLATIONS[ablation];
    if (recipe !== owner && recipe !== "all")
      throw new UsageError(`--ablation ${ablation} belongs to \`kiln repro ${owner}\`, not ${recipe}`);
  }
  const config = reproEffectiveConfig(f);
  if (f["print-config"]) {
    console.log(JSON.stringify(config, null, 2));
    return 0;
  }
  const backend = strFlag(f, "backend", "wasm") as BackendName;
  if (backend !== "wasm" && backend !== "js") throw new UsageError(`--backend must be wasm or js, got ${backend}`);
  const source = reproModelSource(f, config.seed);
  const io = {
    out: strFlag(f, "out", "runs"),
    progress: f.progress !== "false" && !f.quiet,
    log: f.quiet ? () => {} : undefined,
  };
  const command = [
    "kiln repro",
    ...args.positional,
    ...Object.entries(f).map(([k, v]) => (v === true ? `--${k}` : `--${k} ${JSON.stringify(v)}`)),
  ].join(" ");
  const recipes = ablation ? [REPRO_ABLATIONS[ablation]] : recipe === "all" ? ["arp", "opd", "oel"] : [recipe];
  const start = performance.now();
  if (backend === "wasm") await initBackend("wasm");
  else setBackend("js");
  try {
    for (const r of recipes) {
      let result: ReproResult;
      if (r === "arp") {
        result = await reproArp(source, config, { ...io, ablation: ablation as "scale" | "dpo-reference" | undefined });
      } else if (r === "opd")
        result = await reproOpd(source, config, {
          ...io,
          teacher: strFlag(f, "teacher") ? dirModelSource(strFlag(f, "teacher")!) : undefined,
          ablation: ablation as "early-turn-weight" | "clamp" | undefined,
        });
      else result = await reproOel(source, config, io);
      const markdown = writeReproOutputs(result, config, command);
      console.log(`${markdown}\n\n${markdownTable(timingTable(result))}\n\nreport: ${result.dir}/report.html\n`);
    }
  } finally {
    if (backend === "wasm") {
      setBackend("js");
      disposeWasmBackend();
    }
  }
  console.log(`kiln repro ${recipe}: total wall time ${((performance.now() - start) / 1000).toFixed(1)} s`);
  return 0;
}
