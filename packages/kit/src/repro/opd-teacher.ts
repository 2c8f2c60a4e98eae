// OPD's default teacher in the repro: the base after ARP's acquisition stage (LoRA SFT on the
// bisecting expert's successful guess-number games, merged in f32) — a model of the same size that
// plays better than the student, as the seed's teacher did. It is trained once per source on
// first load, with the ARP table's own SFT settings, seed and expert episodes, so `repro all`
// and `repro opd` distil towards the same model that the ARP table reports as "A SFT".
import { attachLora, mergeAdapter } from "@kiln/lora";
import type { ChatCodec } from "../trainer/chat-batches.js";
import { stageForward } from "../recipes/presets.js";
import { holdoutSplit, successOnlySftSet } from "../recipes/sft-set.js";
import { sftObjective } from "../trainer/objectives/index.js";
import { train } from "../trainer/trainer.js";
import type { Model } from "@kiln/models";
import { expertSourceEpisodes } from "./arp-repro.js";
import type { ReproConfig } from "./config.js";
import { ReproError } from "./errors.js";
import type { ModelSource } from "./model-source.js";

/** `base` + ARP's phase A (success-only SFT on expert episodes), trained on the first load(). */
export function sftTeacherSource(
  base: ModelSource,
  config: ReproConfig,
  options: { progress?: boolean; log?: (line: string) => void } = {},
): ModelSource {
  let trained: Promise<{ model: Model; codec: ChatCodec }> | undefined;
  const c = config.arp;
  return {
    label: `base + ARP phase A (SFT on ${c.data.sourceEpisodes} expert games, seed ${c.seed})`,
    load() {
      trained ??= (async () => {
        const { model, codec } = await base.load();
        const source = await expertSourceEpisodes(c);
        const corpus = successOnlySftSet(source, {
          capPerEnv: c.data.capPerGame,
          seed: c.seed,
        });
        const { train: examples } = holdoutSplit(corpus, c.data.holdoutFraction, c.seed);
        if (examples.length === 0) throw new ReproError("OPD teacher: the expert won no game to train on");
        options.log?.(`[kiln repro opd] teacher: SFT of the base on ${examples.length} expert games`);
        const adapter = attachLora(model, {
          r: c.lora.r,
          alpha: c.lora.alpha,
          dropout: c.lora.dropout ?? 0,
          useRslora: c.lora.useRslora ?? false,
          targetModules: c.lora.targetModules ?? "all-linear",
          seed: c.seed,
          name: "teacher-sft",
        });
        await train({
          stage: "teacher-sft",
          adapter,
          data: examples,
          objective: sftObjective(model, codec, stageForward(c.sft)),
          config: {
            lr: c.sft.lr,
            microBatchSize: c.sft.microBatchSize,
            gradAccum: c.sft.gradAccum,
            epochs: c.sft.epochs,
            maxSteps: c.sft.maxSteps,
            schedule: c.sft.schedule,
            warmupRatio: c.sft.warmupRatio,
            weightDecay: c.sft.weightDecay,
            maxGradNorm: c.sft.maxGradNorm,
            seed: c.seed,
          },
          progress: options.progress === false ? null : undefined,
        });
        mergeAdapter(adapter, { scale: 1, dtype: "f32" });
        return { model, codec };
      })();
      return trained;
    },
  };
}
