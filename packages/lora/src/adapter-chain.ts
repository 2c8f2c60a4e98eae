// Adapter chains (OPD rounds): train an adapter, merge it into the base in f32, attach a
// fresh adapter to the merged model, repeat — saving each stage's adapter.
import type { Model } from "@kiln/models";
import { saveAdapter } from "./adapter-files.js";
import { type LoraAdapter, type LoraOptions, attachLora } from "./lora-adapter.js";
import { type MergeReport, mergeAdapter } from "./merge.js";

export interface ChainStage {
  index: number;
  adapter: LoraAdapter;
  merge?: MergeReport;
  savedTo?: string;
}

export class AdapterChain {
  readonly stages: ChainStage[] = [];

  constructor(
    readonly model: Model,
    private readonly options: LoraOptions,
  ) {
    this.stages.push({
      index: 0,
      adapter: attachLora(model, { ...options, name: `${options.name ?? "round"}-0`, seed: options.seed ?? 0 }),
    });
  }

  get current(): LoraAdapter {
    return this.stages[this.stages.length - 1].adapter;
  }

  /**
   * Close the current stage: optionally save its adapter to `saveDir`, merge it in f32
   * (scaled by `scale`), then attach and return a fresh adapter for the next stage.
   */
  async advance(options: { saveDir?: string; scale?: number } = {}): Promise<LoraAdapter> {
    const stage = this.stages[this.stages.length - 1];
    if (options.saveDir) {
      await saveAdapter(stage.adapter, options.saveDir);
      stage.savedTo = options.saveDir;
    }
    stage.merge = mergeAdapter(stage.adapter, { scale: options.scale ?? 1, dtype: "f32", keepOriginal: false });
    const index = stage.index + 1;
    const next = attachLora(this.model, {
      ...this.options,
      name: `${this.options.name ?? "round"}-${index}`,
      seed: (this.options.seed ?? 0) + index,
    });
    this.stages.push({ index, adapter: next });
    return next;
  }
}
