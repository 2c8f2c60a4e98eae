// The evaluation runner behind `kiln eval questworld`: resolve a built-in policy by
// name, run Core-3, and write core3.json + core3.md into a run directory atomically.

import { type Core3Options, type Core3Result, evaluateCore3 } from "./core3.js";
import type { PolicyFactory } from "./episode.js";
import { QuestworldConfigError } from "./errors.js";
import { expertPolicy } from "./expert-policy.js";
import { randomPolicy } from "./random-policy.js";
import { formatCore3Json, formatCore3Markdown } from "./report.js";
import { writeFileAtomic } from "@kiln/hub-io";

/** The expert, bound to each episode's own state. */
export const expertFactory: PolicyFactory = ({ env }) => expertPolicy(() => env.getState());

/** A random policy seeded from the episode's seed and archetype, so runs repeat. */
export const randomFactory: PolicyFactory = ({ seed, archetype }) =>
  randomPolicy({ seed: seed * 31 + archetype.length, id: "questworld-random" });

export const BUILTIN_POLICIES = { expert: expertFactory, random: randomFactory } as const;
export type BuiltinPolicyName = keyof typeof BUILTIN_POLICIES;

export interface QuestworldEvalOptions extends Omit<Core3Options, "policy"> {
  policy: Core3Options["policy"] | BuiltinPolicyName;
  /** Directory to write core3.json and core3.md into (created if missing). */
  outDir?: string;
}

export interface QuestworldEvalOutput {
  result: Core3Result;
  markdown: string;
  json: string;
  /** Paths written (empty without outDir). */
  files: string[];
}

export async function runQuestworldEval(options: QuestworldEvalOptions): Promise<QuestworldEvalOutput> {
  let policy: Core3Options["policy"];
  if (typeof options.policy === "string") {
    const builtin = BUILTIN_POLICIES[options.policy as BuiltinPolicyName];
    if (!builtin) {
      throw new QuestworldConfigError(`policy ${JSON.stringify(options.policy)}: built-in policies are expert, random`);
    }
    policy = builtin;
  } else policy = options.policy;
  const result = await evaluateCore3({ ...options, policy });
  const markdown = formatCore3Markdown(result);
  const json = formatCore3Json(result);
  const files: string[] = [];
  if (options.outDir) {
    files.push(await writeAtomic(options.outDir, "core3.json", json));
    files.push(await writeAtomic(options.outDir, "core3.md", markdown));
  }
  return { result, markdown, json, files };
}

/** Written through hub-io's writeFileAtomic (temp + fsync + rename), so readers never see a half-written report. */
async function writeAtomic(dir: string, name: string, text: string): Promise<string> {
  // Imported lazily so the rest of questworld stays usable where node:path is absent.
  const path = await import("node:path");
  const target = path.join(dir, name);
  await writeFileAtomic(target, text);
  return target;
}
