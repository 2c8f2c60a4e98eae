// `pnpm bench models [--json]` (and `pnpm bench models llama-cpp [--json]`: kiln vs llama.cpp on one GGUF): prefill and KV-cache decode tokens/s of @kiln/models against a
// PyTorch transcription running the same weights in the same run (bench/torch_decoder.py).
// Models: stories260K (llama2.c, converted by hub-io) and the tensor benchmark's reference
// decoder (4 layers, d=256, 4 heads, FFN 688, vocab 2048, untied) as a LlamaForCausalLM.
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { convertLlama2cToHf, serializeSafetensors } from "@kiln/hub-io";
import { Tensor, initBackend, nativeBackendInfo, noGrad, setBackend } from "@kiln/tensor";
import { BenchReporter, summarize } from "../../../tooling/src/bench.js";
import { peerEnv, torchNote } from "../../../tooling/src/peer.js";
import { type Model, argmaxOf, createModel, loadModel } from "../src/index.js";
import { REFERENCE_CONFIG } from "./reference-config.js";

const here = dirname(fileURLToPath(import.meta.url));
if (process.argv.includes("train-step")) {
  // The real-size training-step case: bench/train-step.ts (its own processes and rows).
  const { runTrainStepBench } = await import("./train-step.js");
  await runTrainStepBench(process.argv.slice(2));
  process.exit(0);
}
if (process.argv.includes("qwen35-step")) {
  // A Qwen3.5-2B-shaped step within 24 GiB: bench/qwen35-step.ts.
  const { runQwen35StepBench } = await import("./qwen35-step.js");
  await runQwen35StepBench(process.argv.slice(2));
  process.exit(0);
}
if (process.argv.includes("decode-profile")) {
  // Where a decode step's time goes, kernel by kernel: bench/decode-profile.ts.
  await import("./decode-profile.js");
  process.exit(0);
}
if (process.argv.includes("llama-cpp")) {
  // kiln vs llama.cpp on the same GGUF: bench/llama-cpp.ts.
  const { runLlamaCppBench } = await import("./llama-cpp.js");
  await runLlamaCppBench(process.argv.slice(2));
  process.exit(0);
}
const PROMPT = 128;
const STEPS = 64;
const REPS = 5;

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

interface Rep {
  prefillMs: number;
  decodeMs: number;
  tokens: number[];
}

/** One rep: prefill PROMPT tokens (logits of the last only), then STEPS greedy KV-cache steps. */
function kilnRep(model: Model): Rep {
  const V = model.config.vocabSize;
  const ids = Int32Array.from({ length: PROMPT }, (_, i) => (i * 7 + 3) % V);
  return noGrad(() => {
    const cache = model.newCache(1);
    const t0 = performance.now();
    let logits = model.forward(new Tensor(ids, [1, PROMPT], "i32"), { cache, logitsToKeep: 1 });
    const t1 = performance.now();
    const tokens: number[] = [];
    for (let s = 0; s < STEPS; s++) {
      const tok = argmaxOf(logits.toFloat32Array());
      tokens.push(tok);
      logits = model.forward(new Tensor(Int32Array.of(tok), [1, 1], "i32"), { cache });
    }
    return { prefillMs: t1 - t0, decodeMs: performance.now() - t1, tokens };
  });
}

/** bench/torch_decoder.py as a long-lived child, one rep per request. */
class TorchPeer {
  private constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    private readonly lines: AsyncIterator<string>,
    readonly version: string,
  ) {}

  static async start(dir: string): Promise<TorchPeer | null> {
    const child = spawn("/usr/bin/python3", [join(here, "torch_decoder.py"), dir, String(PROMPT), String(STEPS)], {
      // Full speed, 1 thread: OpenBLAS's pinning variables removed (tooling/src/peer.ts).
      env: peerEnv(1),
    });
    let stderr = "";
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const failed = new Promise<null>((resolve) => {
      child.on("error", () => resolve(null));
      child.on("exit", () => resolve(null));
    });
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const first = await Promise.race([lines.next(), failed]);
    if (!first || first.done) {
      process.stderr.write(`  torch peer missing: ${stderr.trim().split("\n").pop() ?? "python3 did not start"}\n`);
      child.kill();
      return null;
    }
    return new TorchPeer(child, lines, JSON.parse(first.value).torch);
  }

  async rep(): Promise<Rep> {
    this.child.stdin.write("run\n");
    const line = await this.lines.next();
    if (line.done) throw new Error("torch peer exited");
    const j = JSON.parse(line.value);
    return { prefillMs: j.prefill_ms, decodeMs: j.decode_ms, tokens: j.tokens };
  }

  close(): void {
    this.child.stdin.end();
  }
}

const median = (xs: number[]) => summarize(xs).median;

const reporter = new BenchReporter("models");
const stories = convertLlama2cToHf(
  new Uint8Array(readFileSync(join(here, "../data/stories260K/stories260K.bin"))),
  new Uint8Array(readFileSync(join(here, "../data/stories260K/tok512.bin"))),
);
const cases: [string, Model][] = [
  ["stories260K", await loadModel(stories.files)],
  ["reference-decoder", createModel(REFERENCE_CONFIG, { seed: 0 })],
];
await initBackend("wasm", { threads: 1, activate: false });
// kiln-native: BLAS GEMMs on 1 thread, loaded like the peer's (OPENBLAS_CORETYPE/L2_SIZE ignored).
const backends = ["js", "wasm"];
try {
  await initBackend("native", { threads: 1, activate: false, ignoreOpenblasEnv: true });
  backends.push("native");
} catch (err) {
  process.stderr.write(`  kiln-native unavailable: ${(err as Error).message}\n`);
}
const peerNote = torchNote(1);
for (const [name, model] of cases) {
  const dir = writeModelDir(model);
  const peer = await TorchPeer.start(dir);
  try {
    const kiln: Record<string, Rep[]> = Object.fromEntries(backends.map((b) => [b, []]));
    const torch: Rep[] = [];
    for (const backend of backends) {
      setBackend(backend);
      for (let w = 0; w < 3; w++) kilnRep(model); // warm-up (JIT)
    }
    // Interleave: every round runs one rep of each, so load changes hit all of them alike.
    for (let r = 0; r < REPS; r++) {
      for (const backend of backends) {
        setBackend(backend);
        kiln[backend].push(kilnRep(model));
      }
      if (peer) torch.push(await peer.rep());
    }
    const peerName = peer ? `torch ${peer.version} (1 thread)` : "torch";
    const tp = torch.length ? median(torch.map((t) => t.prefillMs)) : null;
    const td = torch.length ? median(torch.map((t) => t.decodeMs)) : null;
    for (const backend of backends) {
      const reps = kiln[backend];
      const agree = torch.length ? reps[0].tokens.join() === torch[0].tokens.join() : null;
      const check = agree === null ? "unchecked" : agree ? "equal torch's" : "DIFFER from torch's";
      process.stderr.write(`  ${name} ${backend}: greedy tokens ${check}\n`);
      const native = backend === "native" ? `kiln-native: ${nativeBackendInfo()?.summary}; ` : "";
      const note = `B=1, prompt ${PROMPT}, ${STEPS} greedy steps, 1 thread, ${REPS} interleaved reps; greedy tokens ${check}; ${native}peer: ${peerNote}`;
      const row = (metric: string, tokens: number, kilnMs: number, peerMs: number | null) =>
        reporter.add({
          case: `${name} ${backend}`,
          metric,
          unit: "tok/s",
          better: "higher",
          kiln: (tokens / kilnMs) * 1000,
          peer: peerName,
          peer_value: peerMs === null ? null : (tokens / peerMs) * 1000,
          note,
        });
      row("prefill", PROMPT, median(reps.map((k) => k.prefillMs)), tp);
      row("decode", STEPS, median(reps.map((k) => k.decodeMs)), td);
    }
  } finally {
    peer?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
setBackend("js");
reporter.finish();
process.exit(0);
