// `pnpm bench models [--json]`: prefill and KV-cache decode tokens/s of @kiln/models against a
// PyTorch transcription running the same weights in the same run (bench/torch_decoder.py).
// Models: stories260K (llama2.c, converted by hub-io) and the tensor benchmark's reference
// decoder (4 layers, d=256, 4 heads, FFN 688, vocab 2048, untied) as a LlamaForCausalLM.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { convertLlama2cToHf, serializeSafetensors } from "@kiln/hub-io";
import { Tensor, initBackend, noGrad, setBackend } from "@kiln/tensor";
import { BenchReporter, summarize } from "../../../tooling/src/bench.js";
import { type Model, argmaxOf, createModel, loadModel } from "../src/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const PROMPT = 128;
const STEPS = 64;
const REPS = 3;

const REFERENCE_CONFIG = {
  architectures: ["LlamaForCausalLM"],
  model_type: "llama",
  vocab_size: 2048,
  hidden_size: 256,
  intermediate_size: 688,
  num_hidden_layers: 4,
  num_attention_heads: 4,
  num_key_value_heads: 4,
  rms_norm_eps: 1e-5,
  rope_theta: 10000.0,
  tie_word_embeddings: false,
  max_position_embeddings: 512,
};

/** The model's files in a temp dir, for the PyTorch peer. */
function writeModelDir(model: Model): string {
  const dir = mkdtempSync(join(tmpdir(), "kiln-models-bench-"));
  writeFileSync(join(dir, "config.json"), JSON.stringify(model.config.raw));
  const tensors = new Map(
    [...model.stateDict()].map(([name, t]) => {
      const f = t.toFloat32Array();
      return [
        name,
        { dtype: "F32" as const, shape: [...t.shape], data: new Uint8Array(f.buffer, f.byteOffset, f.byteLength) },
      ];
    }),
  );
  writeFileSync(join(dir, "model.safetensors"), serializeSafetensors(tensors));
  return dir;
}

interface Timed {
  prefillMs: number;
  decodeMs: number;
  tokens: number[];
}

function timeKiln(model: Model): Timed {
  const V = model.config.vocabSize;
  const ids = Int32Array.from({ length: PROMPT }, (_, i) => (i * 7 + 3) % V);
  const pre: number[] = [];
  const dec: number[] = [];
  let tokens: number[] = [];
  noGrad(() => {
    for (let r = 0; r <= REPS; r++) {
      const cache = model.newCache(1);
      const t0 = performance.now();
      let logits = model.forward(new Tensor(ids, [1, PROMPT], "i32"), { cache, logitsToKeep: 1 });
      const t1 = performance.now();
      tokens = [];
      for (let s = 0; s < STEPS; s++) {
        const tok = argmaxOf(logits.toFloat32Array());
        tokens.push(tok);
        logits = model.forward(new Tensor(Int32Array.of(tok), [1, 1], "i32"), { cache });
      }
      const t2 = performance.now();
      if (r > 0) {
        pre.push(t1 - t0);
        dec.push(t2 - t1);
      }
    }
  });
  return { prefillMs: summarize(pre).median, decodeMs: summarize(dec).median, tokens };
}

function timeTorch(dir: string): (Timed & { version: string }) | null {
  const res = spawnSync(
    "/usr/bin/python3",
    [join(here, "torch_decoder.py"), dir, String(PROMPT), String(STEPS), String(REPS)],
    {
      encoding: "utf8",
      env: { ...process.env, OMP_NUM_THREADS: "1", OPENBLAS_NUM_THREADS: "1" },
    },
  );
  if (res.status !== 0) {
    process.stderr.write(`  torch peer missing: ${(res.stderr || String(res.error)).trim().split("\n").pop()}\n`);
    return null;
  }
  const j = JSON.parse(res.stdout.trim().split("\n").pop() ?? "{}");
  return { prefillMs: j.prefill_ms, decodeMs: j.decode_ms, tokens: j.tokens, version: j.torch };
}

const reporter = new BenchReporter("models");
const stories = convertLlama2cToHf(
  new Uint8Array(readFileSync(join(here, "../test/fixtures/stories260K/stories260K.bin"))),
  new Uint8Array(readFileSync(join(here, "../test/fixtures/stories260K/tok512.bin"))),
);
const cases: [string, Model][] = [
  ["stories260K", await loadModel(stories.files)],
  ["reference-decoder", createModel(REFERENCE_CONFIG, { seed: 0 })],
];
await initBackend("wasm", { threads: 1, activate: false });
for (const [name, model] of cases) {
  const dir = writeModelDir(model);
  try {
    const peer = timeTorch(dir);
    for (const backend of ["js", "wasm"]) {
      setBackend(backend);
      const k = timeKiln(model);
      const agree = peer ? k.tokens.join() === peer.tokens.join() : null;
      process.stderr.write(
        `  ${name} ${backend}: greedy tokens ${agree === null ? "unchecked" : agree ? "equal torch's" : "DIFFER from torch's"}\n`,
      );
      const note = `B=1, prompt ${PROMPT}, ${STEPS} greedy steps, 1 thread; greedy tokens ${agree === null ? "unchecked" : agree ? "equal torch's" : "DIFFER from torch's"}`;
      const peerName = peer ? `torch ${peer.version} (1 thread)` : "torch";
      reporter.add({
        case: `${name} ${backend}`,
        metric: "prefill",
        unit: "tok/s",
        better: "higher",
        kiln: (PROMPT / k.prefillMs) * 1000,
        peer: peerName,
        peer_value: peer ? (PROMPT / peer.prefillMs) * 1000 : null,
        note,
      });
      reporter.add({
        case: `${name} ${backend}`,
        metric: "decode",
        unit: "tok/s",
        better: "higher",
        kiln: (STEPS / k.decodeMs) * 1000,
        peer: peerName,
        peer_value: peer ? (STEPS / peer.decodeMs) * 1000 : null,
        note,
      });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
setBackend("js");
reporter.finish();
process.exit(0);
