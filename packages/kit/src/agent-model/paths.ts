// Where the embedded agent model (a Hugging Face directory under kit's data/agent-model/) lies.
// Under the `source` condition this module runs as src/agent-model/paths.ts (two levels below the
// package); built, it is bundled into dist/*.js (one level below). Both resolve to data/.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

function fromModule(relative: string): string {
  return fileURLToPath(new URL(relative, import.meta.url));
}

/** The embedded agent model's directory (config.json, model.safetensors, tokenizer files). */
export function agentModelDir(): string {
  const here = fileURLToPath(import.meta.url).replaceAll("\\", "/");
  const nested = /\/src\/agent-model\/[^/]+$/.test(here);
  const dir = fromModule(nested ? "../../data/agent-model/" : "../data/agent-model/");
  return dir.endsWith("/") ? dir.slice(0, -1) : dir;
}

/** The fixed held-out text set of the agent model's static score (absent until the model ships). */
export function agentModelHeldoutPath(): string {
  return `${agentModelDir()}/heldout.txt`;
}

/** Whether the embedded model's files are present (the checkpoint ships separately while it trains). */
export function agentModelAvailable(dir = agentModelDir()): boolean {
  return existsSync(`${dir}/config.json`) && existsSync(`${dir}/model.safetensors`);
}
