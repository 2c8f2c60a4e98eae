// Rollouts on llama.cpp while kiln trains (docs/ARCHITECTURE.md §Recipes): a RolloutEngine gives a
// recipe the policy that plays a round. `llamaCppRollouts` exports the base model to GGUF once and,
// each round, the earlier rounds' PEFT adapters to GGUF LoRA (each once), then applies them together
// on the loaded base in node-llama-cpp (LlamaCppPolicy.setAdapters: no reload of the base). Their
// deltas add, so the base with rounds 1 … r − 1 applied is the model kiln has them merged into.
// llama.cpp samples; log-probs, when the recipe asks, are kiln's student's own of those tokens.
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { exportAdapterToGguf, exportModelToGguf, readRepoConfigs } from "@kiln/hub-io";
import { LlamaCppPolicy, type LocalPolicy } from "@kiln/models";
import type { Policy } from "@kiln/rollout";
import type { AdapterSpec } from "./policies.js";

/** Where a recipe's rollouts run. The default (no engine) is kiln's student itself. */
export interface RolloutEngine {
  readonly name: string;
  /**
   * The policy that plays `round`'s rollouts. `student` is kiln's policy (the base with the earlier
   * rounds merged); `adapters` are those rounds' PEFT adapter directories with the scale each was
   * merged at, in order.
   */
  policy(input: { student: LocalPolicy; round: number; adapters: readonly AdapterSpec[] }): Promise<Policy>;
  dispose(): Promise<void>;
}

export interface LlamaCppRolloutOptions {
  /** The base model's Hugging Face directory (the recipe's base; its config decides adapter layouts). */
  baseDir: string;
  /** Where the GGUF files go (the base and one per adapter). */
  workDir: string;
  /** The base already exported (f32) to GGUF; default: exported into `workDir` on first use. */
  baseGguf?: string;
  /** llama.cpp threads (default 1). */
  threads?: number;
  /** llama.cpp context window in tokens (default 4096). */
  contextSize?: number;
}

/** A RolloutEngine on node-llama-cpp (optional dependency; a one-line LlamaCppUnavailableError when absent). */
export function llamaCppRollouts(options: LlamaCppRolloutOptions): RolloutEngine & { readonly policyLoads: number } {
  let policy: LlamaCppPolicy | undefined;
  let loads = 0;
  const exported = new Map<string, Promise<string>>();
  const baseConfig = readRepoConfigs(options.baseDir).then((c) => c.config);
  const ggufOf = (dir: string): Promise<string> => {
    let p = exported.get(dir);
    if (!p) {
      const out = join(options.workDir, `adapter-${exported.size + 1}.gguf`);
      p = baseConfig.then((config) => exportAdapterToGguf(dir, out, { baseConfig: config })).then(() => out);
      exported.set(dir, p);
    }
    return p;
  };
  return {
    name: "llama-cpp",
    get policyLoads() {
      return loads;
    },
    async policy({ student, adapters }) {
      if (!policy) {
        await mkdir(options.workDir, { recursive: true });
        let modelPath = options.baseGguf;
        if (!modelPath) {
          modelPath = join(options.workDir, "base.gguf");
          await exportModelToGguf(options.baseDir, modelPath, { dtype: "f32" });
        }
        policy = await LlamaCppPolicy.load({
          modelPath,
          tokenizer: student.tokenizer,
          chatTemplate: student.chatTemplate,
          id: `llama.cpp:${options.baseDir}`,
          threads: options.threads ?? 1,
          contextSize: options.contextSize ?? 4096,
          logprobsModel: student.model,
        });
        loads++;
      }
      const files = await Promise.all(adapters.map(async (a) => ({ path: await ggufOf(a.dir), scale: a.scale })));
      await policy.setAdapters(files);
      return policy;
    },
    async dispose() {
      await policy?.dispose();
      policy = undefined;
    },
  };
}
