// kiln merge with a PEFT adapter that saves embed_tokens (modules_to_save): the merged model's
// embeddings are the adapter's, as PEFT's merge_and_unload gives (was: silently the base's).
import { rmSync } from "node:fs";
import { join } from "node:path";
import { SafetensorsFile, fromFloat32, writePeftAdapter } from "@kiln/hub-io";
import { toPeftAdapter } from "@kiln/lora";
import { attachLora } from "@kiln/lora";
import { afterAll, describe, expect, it } from "vitest";
import { mergeAdapterDirs, writeMergedModel } from "../../src/index.js";
import { tinyChat } from "../../src/recipes/tiny-chat.js";
import { tmpRoot } from "../recipes/helpers.js";

const root = tmpRoot();
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("kiln merge applies modules_to_save", () => {
  it("an adapter saving embed_tokens merges to a model whose embeddings are the adapter's", async () => {
    const base = tinyChat({ seed: 3, std: 0.2 });
    const baseDir = join(root, "base");
    await writeMergedModel(baseDir, base.model, {
      tokenizer: base.tokenizer,
      template: base.template,
      baseModel: "none (random weights)",
      title: "base",
    });
    const embedKey = "model.embed_tokens.weight";
    const [V, H] = base.model.stateDict().get(embedKey)!.shape;
    const trained = Float32Array.from({ length: V * H }, (_, i) => Math.cos(i * 0.11));
    const lora = toPeftAdapter(attachLora(tinyChat({ seed: 3 }).model, { r: 2, alpha: 4, targetModules: ["q_proj"] }));
    const other = new Map([
      [`base_model.model.${embedKey}`, { dtype: "F32" as const, shape: [V, H], data: fromFloat32(trained, "F32") }],
    ]);
    const write = async (dir: string, ensureTying: boolean) => {
      const config = { ...lora.config, modules_to_save: ["embed_tokens"], ensure_weight_tying: ensureTying };
      await writePeftAdapter(dir, { config, layers: lora.layers, other });
      return dir;
    };
    // tinyChat ties lm_head to embed_tokens: PEFT keeps them tied only with ensure_weight_tying.
    await expect(
      mergeAdapterDirs({
        base: baseDir,
        adapters: [{ dir: await write(join(root, "a0"), false), scale: 1 }],
        out: join(root, "m0"),
      }),
    ).rejects.toThrow(/tie_word_embeddings/);
    const out = join(root, "merged");
    await mergeAdapterDirs({ base: baseDir, adapters: [{ dir: await write(join(root, "a1"), true), scale: 1 }], out });
    const file = await SafetensorsFile.open(join(out, "model.safetensors"));
    try {
      expect(Array.from(await file.readFloat32(embedKey))).toEqual(Array.from(trained));
    } finally {
      await file.close();
    }
  });
});
