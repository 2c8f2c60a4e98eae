// OPD's default teacher in the repro: the base after ARP's acquisition stage (LoRA SFT on the
// bisecting expert's successful guess-number games, merged in f32) — a model of the same size that
// plays better than the student, as the seed's teacher did. It is trained once per source on
// first load, with the ARP table's own SFT settings, seed and expert episodes, so `repro all`
// and `repro opd` distil towards the same model that the ARP table reports as "A SFT".
import { attachLora, mergeAdapter } from "@kiln/lora";
import type { ChatCodec, Conversation } from "../trainer/chat-batches.js";
import { stageForward } from "../recipes/presets.js";
import { holdoutSplit, successOnlySftSet } from "../recipes/sft-set.js";
import { sftObjective } from "../trainer/objectives/index.js";
import { train } from "../trainer/trainer.js";
import type { Model } from "@kiln/models";
import { questworldCorpus } from "../agent-model/questworld-corpus.js";
import { questworldPrivilegedCorpus } from "../agent-model/questworld-privileged.js";
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

/**
 * Questworld's teacher: `base` + LoRA SFT on the expert planner's turns from the wall start, each
 * as the windowed context the model plays from (questworldCorpus with the expert alone, no
 * scaffold note), merged in f32. A model of the student's size and tokenizer that has seen the route
 * to the moonpetals every time instead of a third of the time — the seed's teacher was larger;
 * this one is trained in the run (kit README, "OPD").
 */
export function questworldSftTeacherSource(
  base: ModelSource,
  config: ReproConfig,
  options: { progress?: boolean; log?: (line: string) => void } = {},
): ModelSource {
  const t = config.opdQuestworld.teacher;
  for (const [name, v] of Object.entries(t))
    if (!(typeof v === "number" && Number.isFinite(v) && v > 0))
      throw new ReproError(`opdQuestworld.teacher.${name} must be a positive number, got ${JSON.stringify(v)}`);
  let trained: Promise<{ model: Model; codec: ChatCodec }> | undefined;
  return {
    label: `base + SFT on ${t.episodes} expert questworld episodes from the wall (seed ${config.seed})`,
    load() {
      trained ??= (async () => {
        const { model, codec } = await base.load();
        const docs = await questworldCorpus({
          seed: config.seed,
          episodes: t.episodes,
          skills: [{ name: "expert", epsilon: 0, weight: 1 }],
          wallRate: 1,
          noteRate: 0,
          maxTurns: t.maxTurns,
        });
        if (docs.length === 0) throw new ReproError("OPD questworld teacher: the expert made no call to train on");
        options.log?.(`[kiln repro opd] teacher: SFT of the base on ${docs.length} expert questworld turns`);
        return loraSftMerged(
          model,
          codec,
          t,
          config.seed,
          "teacher-sft",
          docs.map((d) => ({ messages: d.messages })),
          options,
        );
      })();
      return trained;
    },
  };
}

/**
 * Questworld's privileged-information teacher (`opdTeacher=privileged`): `base` + LoRA SFT on
 * questworldPrivilegedCorpus — players of mixed skill walk wall-start episodes, every state they
 * visit is labelled with the expert planner's call, shown to the model as a note before its reply
 * — merged in f32. At play and when it scores the student's tokens the note is the planner's call
 * for that state (questworld-privileged.ts), so it is the student's model with information the
 * student lacks, the family of OEL's teacher (kit README, "OPD on questworld").
 */
export function questworldPrivilegedTeacherSource(
  base: ModelSource,
  config: ReproConfig,
  options: { progress?: boolean; log?: (line: string) => void } = {},
): ModelSource {
  const t = config.opdQuestworld.privilegedTeacher;
  for (const [name, v] of Object.entries(t))
    if (!(typeof v === "number" && Number.isFinite(v) && v > 0))
      throw new ReproError(
        `opdQuestworld.privilegedTeacher.${name} must be a positive number, got ${JSON.stringify(v)}`,
      );
  let trained: Promise<{ model: Model; codec: ChatCodec }> | undefined;
  return {
    label: `base + SFT to act on the expert's note (${t.episodes} mixed-skill wall episodes, seed ${config.seed})`,
    load() {
      trained ??= (async () => {
        const { model, codec } = await base.load();
        const docs = await questworldPrivilegedCorpus({
          seed: config.seed,
          episodes: t.episodes,
          maxTurns: t.maxTurns,
        });
        if (docs.length === 0) throw new ReproError("OPD questworld privileged teacher: no state to train on");
        const offPath = docs.filter((d) => !d.playerAgreed).length;
        options.log?.(
          `[kiln repro opd] teacher: SFT of the base on ${docs.length} noted questworld states (${offPath} where the player did not make the expert's call)`,
        );
        return loraSftMerged(
          model,
          codec,
          t,
          config.seed,
          "teacher-privileged",
          docs.map((d) => ({ messages: d.messages, lossOnLastReply: true })),
          options,
        );
      })();
      return trained;
    },
  };
}

/** The questworld teachers' training: a fresh all-linear LoRA, SFT on `data` with `sizes`, merged in f32. */
async function loraSftMerged(
  model: Model,
  codec: ChatCodec,
  sizes: { r: number; alpha: number; lr: number; microBatchSize: number; epochs: number },
  seed: number,
  name: string,
  data: Conversation[],
  options: { progress?: boolean },
): Promise<{ model: Model; codec: ChatCodec }> {
  const adapter = attachLora(model, {
    r: sizes.r,
    alpha: sizes.alpha,
    dropout: 0,
    useRslora: false,
    targetModules: "all-linear",
    seed,
    name,
  });
  await train({
    stage: name,
    adapter,
    data,
    objective: sftObjective(model, codec),
    config: {
      lr: sizes.lr,
      microBatchSize: sizes.microBatchSize,
      gradAccum: 1,
      epochs: sizes.epochs,
      schedule: "cosine",
      warmupRatio: 0.05,
      weightDecay: 0,
      maxGradNorm: 1,
      seed,
    },
    progress: options.progress === false ? null : undefined,
  });
  mergeAdapter(adapter, { scale: 1, dtype: "f32" });
  return { model, codec };
}
