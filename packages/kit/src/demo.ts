// `kiln demo`: the most complete real pipeline the packages offer, on embedded defaults.
// A real pretrained model (llama2.c stories260K) → HF files → generate → LoRA SFT →
// PEFT adapter → delta-scaled fp32 merge → generate → questworld through the rollout
// harness → a run directory with metrics, checkpoints, trajectories and SHA256SUMS.
import { mkdirSync } from "node:fs";
import { questworld } from "@kiln/benchmarks";
import { convertLlama2c } from "@kiln/hub-io";
import { collateSft, countTargetTokens, sftLoss } from "@kiln/losses";
import { attachLora, mergeAdapter, parameterReport } from "@kiln/lora";
import { generate, loadModel, loadTokenizer } from "@kiln/models";
import { ProgressBar } from "@kiln/rollout";
import { type BackendName, disposeWasmBackend, getBackend, initBackend, setBackend } from "@kiln/tensor";
import { stories260KPaths } from "./data-dir.js";
import { RunDir } from "./run-dir.js";
import { train } from "./trainer/trainer.js";
import { trainingLogits } from "./trainer/training-logits.js";

export interface DemoOptions {
  out?: string;
  name?: string;
  steps?: number;
  backend?: BackendName;
  seed?: number;
  log?: (line: string) => void;
  /** Show progress bars (default: when stderr is a TTY or not silenced). */
  progress?: boolean;
  /** An existing run directory: "overwrite" replaces it (default "new" refuses it). */
  mode?: "new" | "overwrite";
}

export interface DemoResult {
  runDir: string;
  lossFirst: number;
  lossLast: number;
  before: string;
  after: string;
  core3Total: number;
  meanBf16DeltaLoss: number;
  files: number;
}

/** Short stories in the TinyStories style the adapter learns to continue. */
const TRAINING_TEXT = [
  "Once upon a time, there was a little robot named Bolt. Bolt loved to fix things. One day, Bolt found a broken kite in the park. He fixed the kite and gave it to a girl named Mia. Mia smiled and said thank you.",
  "Once upon a time, there was a little robot named Bolt. Bolt had a red hat. He went to the garden to help his friend the bee. They worked all day and had a big party at night.",
  "Once upon a time, there was a little robot named Bolt. Bolt was sad because it was raining. His friend Mia came with an umbrella. They played in the rain and Bolt was happy again.",
];

export async function runDemo(options: DemoOptions = {}): Promise<DemoResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  const steps = options.steps ?? 60;
  const seed = options.seed ?? 0;
  const backend = options.backend ?? "wasm";
  const stream = options.progress === false ? null : undefined;
  if (backend !== "js") await initBackend(backend);
  else setBackend("js");
  try {
    const run = await RunDir.create(
      options.out ?? "runs",
      options.name ?? "demo",
      {
        recipe: "demo",
        model: "stories260K (llama2.c)",
        lora: { r: 16, alpha: 32, dropout: 0.05, targets: "all-linear" },
        steps,
        lr: 5e-3,
        mergeScale: 0.85,
        backend,
      },
      { seeds: { lora: seed, sampling: seed, questworld: 1 }, mode: options.mode },
    );
    log(`[kiln] run directory: ${run.path} (backend ${getBackend()})`);

    // 1. A real model none of us trained: llama2.c checkpoint → Hugging Face Llama directory.
    const paths = stories260KPaths();
    const baseDir = run.file("base-model");
    await convertLlama2c({ checkpoint: paths.checkpoint, tokenizer: paths.tokenizer, outDir: baseDir });
    await run.recordDataset("stories260K.bin", paths.checkpoint);
    const model = await loadModel(baseDir);
    const tokenizer = await loadTokenizer(baseDir);
    const c = model.config;
    log(
      `[kiln] converted stories260K → ${baseDir}: ${c.architecture}, ${c.numLayers} layers, d=${c.hiddenSize}, vocab ${c.vocabSize}`,
    );

    const prompt = "Once upon a time, there was a little robot";
    const story = () => {
      const promptIds = tokenizer.encode(prompt, { addSpecialTokens: true });
      const [out] = generate(model, [promptIds], { maxNewTokens: 48, temperature: 0, tokenizer });
      // Decode prompt and completion together so the word boundary between them survives.
      return tokenizer.decode([...promptIds, ...out.tokenIds], { skipSpecialTokens: true });
    };
    const before = story();
    log(`[kiln] base model, greedy:   ${before}`);

    // 2. LoRA SFT with the masked next-token loss.
    const adapter = attachLora(model, { r: 16, alpha: 32, dropout: 0.05, targetModules: "all-linear", seed });
    const counts = parameterReport(model, [adapter]);
    log(
      `[kiln] LoRA r=16 α=32 on all linear layers: ${counts.trainable} trainable of ${counts.total} (${counts.trainablePercent.toFixed(2)}%)`,
    );
    const rows = TRAINING_TEXT.map((t) => tokenizer.encode(t, { addSpecialTokens: true }));
    // Every token is a label; padding (id 0) is not.
    const batch = collateSft(
      rows.map((ids) => ({ ids, mask: new Uint8Array(ids.length).fill(1) })),
      0,
    );
    // The one trainer loop: 3 fixed rows, all of them every step (micro-batch 3, no shuffle).
    const result = await train<number>({
      stage: "sft",
      adapter,
      data: [0],
      objective: {
        items: () => countTargetTokens(batch.labels),
        loss: (_rows, stepItems) => {
          const logits = trainingLogits(model, batch.inputIds, batch.attentionMask);
          const out = sftLoss(logits, batch.labels, { numItemsInBatch: stepItems });
          return {
            loss: out.loss,
            tokens: batch.inputIds.size,
            metrics: { mean_token_accuracy: out.metrics.mean_token_accuracy ?? 0 },
          };
        },
      },
      config: { lr: 5e-3, maxSteps: steps, warmupRatio: 0.1, maxGradNorm: 1, schedule: "cosine", shuffle: false },
      run,
      progress: stream === null ? null : undefined,
    });
    const history = result.history;
    const lossFirst = history[0].loss;
    const lossLast = history[history.length - 1].loss;
    log(`[kiln] SFT loss ${lossFirst.toFixed(3)} → ${lossLast.toFixed(3)} over ${steps} steps`);
    log(`[kiln] saved PEFT adapter and trainer state → ${result.lastCheckpoint}`);

    // 3. Training-free delta scaling s = 0.85, merged in fp32 (ARP); report the bf16 loss.
    const report = mergeAdapter(adapter, { scale: 0.85, dtype: "f32", keepOriginal: false });
    run.logMetrics({
      phase: "merge",
      scale: 0.85,
      mean_bf16_delta_loss: report.meanBf16DeltaLoss,
      max_bf16_delta_loss: report.maxBf16DeltaLoss,
    });
    log(
      `[kiln] merged with s=0.85 in fp32; a bf16 merge would lose ${(100 * report.meanBf16DeltaLoss).toFixed(1)}% of the delta on average (max ${(100 * report.maxBf16DeltaLoss).toFixed(1)}%)`,
    );
    const after = story();
    log(`[kiln] merged model, greedy: ${after}`);

    // 4. A benchmark through the rollout harness: questworld Core-3 with the scripted expert.
    const qDir = run.file("rollouts", "questworld");
    mkdirSync(qDir, { recursive: true });
    const qBar = new ProgressBar({ total: 9, label: "questworld", stream });
    const q = await questworld.runQuestworldEval({
      policy: "expert",
      seeds: [1, 2, 3],
      outDir: qDir,
      onProgress: () => qBar.tick(1),
    });
    qBar.finish();
    const total = q.result.score.mean;
    run.logMetrics({ stage: "eval", benchmark: "questworld", core3_mean: total, core3_se: q.result.score.se });
    log(`[kiln] questworld Core-3 (expert planner, 3 seeds): ${total.toFixed(1)} / 30`);

    await run.writeJson("summary.json", {
      lossFirst,
      lossLast,
      before,
      after,
      core3: total,
      meanBf16DeltaLoss: report.meanBf16DeltaLoss,
    });
    const files = await run.finalize();
    log(`[kiln] wrote SHA256SUMS over ${files} files in ${run.path}`);
    return {
      runDir: run.path,
      lossFirst,
      lossLast,
      before,
      after,
      core3Total: total,
      meanBf16DeltaLoss: report.meanBf16DeltaLoss,
      files,
    };
  } finally {
    if (backend === "wasm") {
      setBackend("js");
      disposeWasmBackend();
    }
  }
}
