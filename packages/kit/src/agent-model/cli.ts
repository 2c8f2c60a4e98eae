// `kiln agent-model`: rebuild the embedded agent model (the committed one was made with the defaults).
import { defineCommand } from "../cli/args.js";
import { onInterrupt, shellQuote } from "../cli/interrupt.js";
import { withDirLocks } from "../dir-lock.js";
import { AGENT_MODEL_STEPS, buildAgentModel } from "./build.js";
import { agentModelCorpusExtras } from "./extras.js";

export const agentModelCommand = defineCommand({
  name: "agent-model",
  summary: "build the embedded agent model from nothing",
  description:
    "Scripted-player transcripts (guess-number, questworld, eight clembench games, tau2 retail) and stories → BPE tokenizer → a small Qwen3 trained from random weights → a Hugging Face directory. Its 850 default steps took 56 minutes on two loaded cores (2026-12-01); 1,700 steps took 33 minutes on two quiet ones since right-padded rows skip attention's masked path (2026-12-02).",
  options: {
    out: { type: "string", default: "agent-model", placeholder: "DIR", description: "the model directory to write" },
    seed: { type: "integer", default: 0, description: "seed of the corpus, the tokenizer and the weights" },
    steps: { type: "integer", default: AGENT_MODEL_STEPS, min: 1, description: "training steps" },
    backend: { type: "string", choices: ["wasm", "native", "js"], default: "wasm", description: "tensor backend" },
    "no-progress": { type: "boolean", description: "no progress bar" },
  },
  examples: ["kiln agent-model --out my-agent-model --backend native"],
  run: async ({ values, argv }) => {
    const { initBackend, setBackend } = await import("@kiln/tensor");
    const again = ["kiln", "agent-model", ...argv].map(shellQuote).join(" ");
    const stopInterrupts = onInterrupt(() => undefined, `${again} (the build starts over; it keeps no checkpoints)`);
    return withDirLocks([values.out], again, async () => {
      if (values.backend === "js") setBackend("js");
      else await initBackend(values.backend);
      const r = await buildAgentModel({
        outDir: values.out,
        seed: values.seed,
        steps: values.steps,
        extraDocuments: await agentModelCorpusExtras(values.seed),
        progress: !values["no-progress"],
      });
      console.log(JSON.stringify(r));
      return 0;
    }).finally(stopInterrupts);
  },
});
