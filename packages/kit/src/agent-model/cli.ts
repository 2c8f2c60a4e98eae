// `kiln agent-model`: rebuild the embedded agent model (the committed one was made with the defaults).
import { defineCommand, setAssignments } from "../cli/args.js";
import { onInterruptGracefully, shellQuote } from "../cli/interrupt.js";
import { withDirLocks } from "../dir-lock.js";
import { UsageError } from "../errors.js";
import {
  AGENT_MODEL_COPY_WARMUP_STEPS,
  AGENT_MODEL_SIZE,
  AGENT_MODEL_STEPS,
  AgentModelBuildInterrupted,
  buildAgentModel,
} from "./build.js";
import { agentModelCorpusExtras } from "./extras.js";
import {
  AGENT_MODEL_CHECKPOINT_EVERY,
  AgentModelCheckpointError,
  agentModelCheckpointDir,
  checkpointToResume,
} from "./checkpoint.js";
import { agentModelSettingKeys, agentModelSettings, checkAgentModelSize, checkCopyWarmup } from "./settings.js";

export const agentModelCommand = defineCommand({
  name: "agent-model",
  summary: "build the embedded agent model from nothing",
  description:
    "Scripted-player transcripts (guess-number, questworld, eight clembench games — taboo and guesswhat mostly on generated instances — tau2 retail), spelling and copy drills, and stories → BPE tokenizer → a Qwen3 of 2.8M parameters trained from random weights → a Hugging Face directory. Its 5,500 default steps (the first 1,500 on the copy drills alone) took 71 minutes on two quiet cores (2026-12-06). It checkpoints every 200 steps into DIR.checkpoint/; after an interrupt, the same command with --resume continues to the same bytes.",
  options: {
    out: { type: "string", default: "agent-model", placeholder: "DIR", description: "the model directory to write" },
    seed: { type: "integer", default: 0, description: "seed of the corpus, the tokenizer and the weights" },
    steps: { type: "integer", default: AGENT_MODEL_STEPS, min: 1, description: "training steps" },
    "copy-warmup": {
      type: "integer",
      default: AGENT_MODEL_COPY_WARMUP_STEPS,
      min: 0,
      description: "the first steps train on the copy drills alone (0: none); counted in --steps",
    },
    backend: { type: "string", choices: ["wasm", "native", "js"], default: "wasm", description: "tensor backend" },
    "checkpoint-every": {
      type: "integer",
      default: AGENT_MODEL_CHECKPOINT_EVERY,
      min: 0,
      description: "steps between checkpoints in DIR.checkpoint/ (0: none); removed when the model is written",
    },
    resume: {
      type: "boolean",
      description: "continue an interrupted build from DIR.checkpoint/ (same options, same corpus): the same bytes",
    },
    "no-progress": { type: "boolean", description: "no progress bar" },
    set: {
      type: "string",
      multiple: true,
      placeholder: "KEY=V[;KEY=V…]",
      description: `the model's size, its training rows or the corpus's (${agentModelSettingKeys().join(", ")})`,
    },
  },
  examples: [
    "kiln agent-model --out my-agent-model --backend native",
    'kiln agent-model --out bigger --set "size.hiddenSize=192;size.layers=6;size.heads=6" --steps 1800',
    "kiln agent-model --out my-agent-model --backend native --resume   # after an interrupt: the same bytes",
  ],
  run: async ({ values, argv }) => {
    const settings = agentModelSettings(setAssignments(values.set));
    checkAgentModelSize({ ...AGENT_MODEL_SIZE, ...settings.size });
    const copyWarmup = values["copy-warmup"];
    checkCopyWarmup(copyWarmup, values.steps, settings.corpus);
    const { initBackend, setBackend } = await import("@kiln/tensor");
    const again = ["kiln", "agent-model", ...argv.filter((a) => a !== "--resume"), "--resume"]
      .map(shellQuote)
      .join(" ");
    const checkpoints =
      values["checkpoint-every"] > 0
        ? `from the last checkpoint in ${agentModelCheckpointDir(values.out)}, written every ${values["checkpoint-every"]} steps`
        : "from the start: --checkpoint-every 0 kept no checkpoint";
    // Ctrl-C while training: the step in flight finishes and is checkpointed; before training, nothing is lost.
    const controller = new AbortController();
    let training = false;
    const stopInterrupts = onInterruptGracefully({
      graceful: () => training,
      stop: () => controller.abort(),
      notice:
        values["checkpoint-every"] > 0
          ? "stopping after the step in flight, which is checkpointed (Ctrl-C again: stop at once)"
          : "stopping after the step in flight (--checkpoint-every 0: nothing is kept; Ctrl-C again: stop at once)",
      continueWith: `${again} (${checkpoints})`,
    });
    return withDirLocks([values.out], again, async () => {
      // Before the corpus (the longest part before training) is made; buildAgentModel checks again.
      checkpointToResume(values.out, values.resume === true);
      if (values.backend === "js") setBackend("js");
      else await initBackend(values.backend);
      const r = await buildAgentModel({
        outDir: values.out,
        seed: values.seed,
        steps: values.steps,
        copyWarmupSteps: copyWarmup,
        size: settings.size,
        ...settings.build,
        ...settings.train,
        recipe: [
          "kiln agent-model",
          `--seed ${values.seed}`,
          `--steps ${values.steps}`,
          ...(copyWarmup > 0 ? [`--copy-warmup ${copyWarmup}`] : []),
          ...setAssignments(values.set).map(([k, v]) => `--set ${shellQuote(`${k}=${v}`)}`),
        ].join(" "),
        extraDocuments: await agentModelCorpusExtras(values.seed, settings.corpus),
        progress: !values["no-progress"],
        checkpointEvery: values["checkpoint-every"],
        resume: values.resume === true,
        signal: controller.signal,
        onTrainingStart: () => {
          training = true;
        },
      });
      console.log(JSON.stringify(r));
      return 0;
    })
      .catch((err) => {
        if (err instanceof AgentModelBuildInterrupted) {
          console.error(`kiln agent-model: ${err.message}${err.checkpoint ? `; continue with: ${again}` : ""}`);
          return 130;
        }
        // What the user asked of the checkpoint (resume what is not there, or what another build made).
        throw err instanceof AgentModelCheckpointError ? new UsageError(err.message) : err;
      })
      .finally(stopInterrupts);
  },
});
