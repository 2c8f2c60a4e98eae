// PEFT and Hub conventions of what kit ships: adapter_config.json names the base in
// base_model_name_or_path, and adapters and merged models carry a README.md model card with YAML
// front matter (base_model, library_name, tags) and the base, recipe, code/data revisions, metrics and
// the SHA-256 of every weight file.
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { parseModelCard, sha256File } from "@kiln/hub-io";
import { attachLora, loadAdapter } from "@kiln/lora";
import { afterAll, describe, expect, it } from "vitest";
import {
  type RunMetadata,
  baseModelId,
  mergeAdapterDirs,
  scaleAdapterDir,
  writeAdapterCard,
  writeAdapterDir,
  writeMergedModel,
} from "../../src/index.js";
import { tinyChat } from "../../src/recipes/tiny-chat.js";
import { tmpRoot } from "../recipes/helpers.js";

const root = tmpRoot();
afterAll(() => rmSync(root, { recursive: true, force: true }));

const run: RunMetadata = {
  name: "arp",
  startedAt: "2026-01-01T00:00:00.000Z",
  codeSha: "0123456789abcdef0123456789abcdef01234567",
  dirtyTree: false,
  baseModel: { source: "models/base", files: { "model.safetensors": "a".repeat(64), "config.json": "b".repeat(64) } },
  node: "v22",
  platform: "linux-x64",
  backend: "wasm",
  packages: { "@kiln/kit": "0.0.0" },
  seeds: { seed: 7 },
  datasets: { "rollouts/source.jsonl.gz": "c".repeat(64) },
};

function trainedAdapter(seed: number) {
  const t = tinyChat({ seed, std: 0.2 });
  // init false: A and B random, so the adapter changes the model and its bytes depend on the seed.
  const adapter = attachLora(t.model, { r: 2, alpha: 4, targetModules: "all-linear", init: false, seed });
  return { ...t, adapter };
}

const read = (p: string) => readFileSync(p, "utf8");

describe("model cards and base_model_name_or_path", () => {
  it("baseModelId: a Hub id or a directory is an identity; a description of an in-memory model is not", () => {
    expect(baseModelId("Qwen/Qwen3-0.6B")).toBe("Qwen/Qwen3-0.6B");
    expect(baseModelId("runs/agent-model")).toBe("runs/agent-model");
    expect(baseModelId("kiln tinyChat (random 2-layer Qwen3, character tokenizer, seed 0)")).toBeNull();
    expect(baseModelId(undefined)).toBeNull();
  });

  it("an adapter directory: base_model_name_or_path, a PEFT card with base, recipe, data revision, metrics, SHA-256s", async () => {
    const { model, adapter } = trainedAdapter(1);
    const dir = join(root, "adapter");
    const card = { baseModel: "Qwen/Qwen3-0.6B", recipe: "ARP (test)", run, title: "test adapter", tags: ["arp"] };
    await writeAdapterDir(adapter, dir, card);
    const config = JSON.parse(read(join(dir, "adapter_config.json")));
    expect(config.base_model_name_or_path).toBe("Qwen/Qwen3-0.6B");
    // The config is still PEFT's: the adapter loads back.
    expect((await loadAdapter(model, dir, { name: "again" })).config.r).toBe(2);

    const metrics = "## Evaluation\n\n| phase | score |\n|---|---|\n| final | 0.5 |";
    const hashes = await writeAdapterCard(dir, { ...card, body: metrics });
    const parsed = parseModelCard(read(join(dir, "README.md")));
    expect(parsed.data.base_model).toBe("Qwen/Qwen3-0.6B");
    expect(parsed.data.library_name).toBe("peft");
    expect(parsed.data.pipeline_tag).toBe("text-generation");
    expect(parsed.data.tags).toEqual(["base_model:adapter:Qwen/Qwen3-0.6B", "lora", "kiln", "arp"]);
    const weights = await sha256File(join(dir, "adapter_model.safetensors"));
    expect(hashes["adapter_model.safetensors"]).toBe(weights);
    expect(Object.keys(hashes).sort()).toEqual(["adapter_config.json", "adapter_model.safetensors"]);
    expect(parsed.body).toContain(`| adapter_model.safetensors | \`${weights}\` |`);
    expect(parsed.body).toContain("Recipe: ARP (test)");
    expect(parsed.body).toContain(`rollouts/source.jsonl.gz: \`${"c".repeat(64)}\``);
    expect(parsed.body).toContain(`model.safetensors: \`${"a".repeat(64)}\``);
    expect(parsed.body).toContain(run.codeSha as string);
    expect(parsed.body).toContain("| final | 0.5 |");
    expect(parsed.body).toContain("r = 2, alpha = 4");
  });

  it("an in-memory base: base_model_name_or_path null and no base_model field, the card says what it was", async () => {
    const { adapter } = trainedAdapter(2);
    const dir = join(root, "adapter-random");
    const description = "kiln tinyChat (random 2-layer Qwen3, character tokenizer, seed 2)";
    await writeAdapterDir(adapter, dir, { baseModel: description, title: "random" });
    expect(JSON.parse(read(join(dir, "adapter_config.json"))).base_model_name_or_path).toBeNull();
    const parsed = parseModelCard(read(join(dir, "README.md")));
    expect("base_model" in parsed.data).toBe(false);
    expect(parsed.data.tags).toEqual(["lora", "kiln"]);
    expect(parsed.body).toContain(`Base model: ${description}`);
  });

  it("a merged model: library_name transformers, base_model, every file's SHA-256; kiln scale and kiln merge write cards", async () => {
    const base = tinyChat({ seed: 3, std: 0.2 });
    const baseDir = join(root, "base");
    await writeMergedModel(baseDir, base.model, {
      tokenizer: base.tokenizer,
      template: base.template,
      baseModel: "none (random weights)",
      title: "base",
    });
    const { adapter } = trainedAdapter(3);
    const adapterDir = join(root, "adapter-3");
    await writeAdapterDir(adapter, adapterDir, { baseModel: baseDir, title: "a3" });

    const scaled = join(root, "scaled");
    await scaleAdapterDir(adapterDir, scaled, 0.5);
    const scaledCard = parseModelCard(read(join(scaled, "README.md")));
    expect(JSON.parse(read(join(scaled, "adapter_config.json"))).base_model_name_or_path).toBe(baseDir);
    expect(scaledCard.data.base_model).toBe(baseDir);
    expect(scaledCard.data.library_name).toBe("peft");
    expect(scaledCard.body).toContain("multiplied by 0.5");
    expect(scaledCard.body).toContain(await sha256File(join(scaled, "adapter_model.safetensors")));

    const merged = join(root, "merged");
    const hashes = await mergeAdapterDirs({ base: baseDir, adapters: [{ dir: adapterDir, scale: 1 }], out: merged });
    const card = parseModelCard(read(join(merged, "README.md")));
    expect(card.data.base_model).toBe(baseDir);
    expect(card.data.library_name).toBe("transformers");
    expect(card.data.tags).toEqual(["kiln", "lora-merged"]);
    expect(card.body).toContain("kiln merge");
    for (const f of ["model.safetensors", "config.json", "tokenizer.json"]) {
      const h = await sha256File(join(merged, f));
      expect(hashes[f]).toBe(h);
      expect(card.body).toContain(`| ${f} | \`${h}\` |`);
    }
    expect(hashes["README.md"]).toBeUndefined();
  });
});
