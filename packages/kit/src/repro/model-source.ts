// Where a repro run's base model comes from. Every variant row (the bf16 merge, another delta
// scale, an ablation arm) starts again from the same base, so a source can load it any number of
// times: a Hugging Face directory, or kit's random tiny chat model (a pipeline check).
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ChatTemplate, type Model, loadModel, loadTokenizer } from "@kiln/models";
import type { ChatCodec } from "../trainer/chat-batches.js";
import { tinyChat } from "../recipes/tiny-chat.js";
import { ReproError } from "./errors.js";

export interface ModelSource {
  /** What the tables and metadata say the base model is. */
  label: string;
  dir?: string;
  load(): Promise<{ model: Model; codec: ChatCodec }>;
}

/** A Hugging Face model directory with a tokenizer and a chat template (checked before loading). */
export function dirModelSource(dir: string): ModelSource {
  for (const f of ["config.json", "tokenizer.json"])
    if (!existsSync(join(dir, f))) throw new ReproError(`model directory ${dir} has no ${f}`);
  return {
    label: dir,
    dir,
    async load() {
      const tokenizer = await loadTokenizer(dir);
      const template = ChatTemplate.fromTokenizer(tokenizer);
      return { model: await loadModel(dir), codec: { tokenizer, template } };
    },
  };
}

/** kit's random tiny Qwen3 with the character tokenizer (`tinyChat`): same seed, same weights. */
export function tinyChatSource(seed = 0, config?: Record<string, unknown>): ModelSource {
  return {
    label: `kiln tinyChat (random Qwen3, character tokenizer, seed ${seed})`,
    async load() {
      const t = tinyChat({ seed, std: 0.2, config });
      return { model: t.model, codec: { tokenizer: t.tokenizer, template: t.chatTemplate } };
    },
  };
}
