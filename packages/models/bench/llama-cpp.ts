// `pnpm bench models llama-cpp [--json] [--layers N] [--reps R] [--cases stories,qwen3-bf16,qwen3-f32] [--bf16-gemm widen|onednn]`: kiln's prefill and KV-cache decode
// tokens/s against llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU build) on the same GGUF file, both
// on 1 thread, in the same process, reps interleaved. Models: stories260K (f32, written by
// exportModelToGguf) and a Qwen3-0.6B-shaped model with random weights (the real config's dims; all 28
// layers by default), bf16 and f32, written straight to GGUF one tensor at a time and loaded by kiln from
// that file (matrices in the file's dtype, as llama.cpp holds them). llama.cpp runs with its defaults (F16 KV cache, flash
// attention "auto"), i.e. as a llama.cpp user would; kiln with wasm and, where a BLAS loads, native.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type GgufMetadata,
  type GgufTensorInput,
  convertLlama2cToHf,
  exportModelToGguf,
  ggufEncode,
  ggufHyperparameters,
  ggufTensorName,
  ggufValue,
  writeGgufFile,
  writeRepoFiles,
} from "@kiln/hub-io";
import { Tensor, initBackend, nativeBackendInfo, noGrad, setBackend } from "@kiln/tensor";
import { BenchReporter, summarize } from "../../../tooling/src/bench.js";
import {
  type LlamaCppHandle,
  type Model,
  argmaxOf,
  loadLlamaCpp,
  loadModel,
  parameterShapes,
  parseDecoderConfig,
  stories260KPaths,
} from "../src/index.js";
import { qwen3_06b } from "./train-step.js";

function flag(argv: string[], name: string, fallback: number): number {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
}

interface Rep {
  prefillMs: number;
  decodeMs: number;
  tokens: number[];
}

function promptIds(n: number, vocab: number): number[] {
  return Array.from({ length: n }, (_, i) => (i * 7 + 3) % vocab);
}

function kilnRep(model: Model, prompt: number[], steps: number): Rep {
  return noGrad(() => {
    const cache = model.newCache(1);
    const t0 = performance.now();
    let logits = model.forward(new Tensor(Int32Array.from(prompt), [1, prompt.length], "i32"), {
      cache,
      logitsToKeep: 1,
    });
    const first = argmaxOf(logits.toFloat32Array());
    const t1 = performance.now();
    const tokens = [first];
    for (let s = 1; s < steps; s++) {
      logits = model.forward(new Tensor(Int32Array.of(tokens[tokens.length - 1]), [1, 1], "i32"), { cache });
      tokens.push(argmaxOf(logits.toFloat32Array()));
    }
    return { prefillMs: t1 - t0, decodeMs: performance.now() - t1, tokens };
  });
}

interface NlcSeq {
  evaluate(tokens: number[], o: { temperature: number }): AsyncGenerator<number>;
  clearHistory(): Promise<void>;
}

/** llama.cpp: prefill = evaluating the prompt up to the first sampled token; decode = the rest. */
async function llamaRep(seq: NlcSeq, prompt: number[], steps: number): Promise<Rep> {
  await seq.clearHistory();
  const tokens: number[] = [];
  const t0 = performance.now();
  let t1 = t0;
  for await (const t of seq.evaluate(prompt, { temperature: 0 })) {
    if (tokens.length === 0) t1 = performance.now();
    tokens.push(t);
    if (tokens.length === steps) break;
  }
  return { prefillMs: t1 - t0, decodeMs: performance.now() - t1, tokens };
}

/** A Qwen3-0.6B-shaped GGUF with random bf16 or f32 matrices (f32 vectors) and a synthetic byte-level vocabulary. */
async function writeRandomQwen3(path: string, layers: number, matrixType: "BF16" | "F32"): Promise<void> {
  const config = qwen3_06b(layers);
  const decoder = parseDecoderConfig(config);
  const meta: GgufMetadata = new Map([
    ["general.architecture", ggufValue.string("qwen3")],
    ["general.type", ggufValue.string("model")],
    // LLAMA_FTYPE_MOSTLY_BF16 = 32, ALL_F32 = 0
    ["general.file_type", ggufValue.u32(matrixType === "BF16" ? 32 : 0)],
  ]);
  for (const [k, v] of ggufHyperparameters("qwen3", config)) meta.set(k, v);
  const vocab = config.vocab_size as number;
  meta.set("tokenizer.ggml.model", ggufValue.string("gpt2"));
  meta.set("tokenizer.ggml.pre", ggufValue.string("qwen2"));
  meta.set(
    "tokenizer.ggml.tokens",
    ggufValue.array(
      "string",
      Array.from({ length: vocab }, (_, i) => `t${i}`),
    ),
  );
  meta.set("tokenizer.ggml.token_type", ggufValue.array("i32", new Int32Array(vocab).fill(1)));
  meta.set("tokenizer.ggml.merges", ggufValue.array("string", []));
  meta.set("tokenizer.ggml.eos_token_id", ggufValue.u32(0));
  let seed = 1;
  const random = (n: number, scale: number) => {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
      out[i] = (seed / 2 ** 32 - 0.5) * scale;
    }
    return out;
  };
  const tensors: GgufTensorInput[] = [];
  for (const [hf, shape] of parameterShapes(decoder)) {
    const name = ggufTensorName(hf) as string;
    const n = shape.reduce((a, d) => a * d, 1);
    tensors.push(
      shape.length === 2
        ? { name, type: matrixType, shape, data: () => ggufEncode(random(n, 0.05), matrixType) }
        : {
            name,
            type: "F32",
            shape,
            data: () =>
              ggufEncode(
                Float32Array.from({ length: n }, () => 1),
                "F32",
              ),
          },
    );
  }
  await writeGgufFile(path, meta, tensors);
}

export async function runLlamaCppBench(argv: string[]): Promise<void> {
  const reporter = new BenchReporter("models", argv);
  let llama: LlamaCppHandle;
  try {
    llama = await loadLlamaCpp();
  } catch (e) {
    process.stderr.write(`  ${(e as Error).message}: no llama.cpp rows\n`);
    return;
  }
  const layers = flag(argv, "--layers", 28);
  const reps = flag(argv, "--reps", 3);
  // kiln-native's bf16 products: "widen" (f32 compute, the default) or "onednn" (bf16 compute with activations
  // rounded to bf16, as llama.cpp's bf16 dot products and PyTorch on CPU do).
  const at = argv.indexOf("--bf16-gemm");
  const bf16Gemm = at >= 0 ? argv[at + 1] : "widen";
  if (bf16Gemm !== "widen" && bf16Gemm !== "onednn") {
    process.stderr.write(`--bf16-gemm must be widen or onednn, got ${JSON.stringify(bf16Gemm)}\n`);
    process.exit(2);
  }
  await initBackend("wasm", { threads: 1, activate: false });
  const backends = ["wasm"];
  try {
    await initBackend("native", { threads: 1, activate: false, ignoreOpenblasEnv: true, bf16Gemm });
    backends.push("native");
  } catch (err) {
    process.stderr.write(`  kiln-native unavailable: ${(err as Error).message}\n`);
  }
  const tmp = mkdtempSync(join(tmpdir(), "kiln-llama-bench-"));
  try {
    const storiesHf = join(tmp, "stories260K");
    const paths = stories260KPaths();
    const read = (p: string) => new Uint8Array(readFileSync(p));
    await writeRepoFiles(storiesHf, convertLlama2cToHf(read(paths.checkpoint), read(paths.tokenizer)).files);
    await exportModelToGguf(storiesHf, join(tmp, "stories260K.gguf"), { dtype: "f32" });
    const qwen = `qwen3-0.6B-shaped${layers === 28 ? "" : ` (${layers} layers)`}`;
    const all = [
      {
        key: "stories",
        name: "stories260K f32",
        file: "stories260K.gguf",
        dtype: "f32" as const,
        prompt: 128,
        steps: 64,
      },
      {
        key: "qwen3-bf16",
        name: `${qwen} bf16`,
        file: "qwen3-0.6b-bf16.gguf",
        dtype: "bf16" as const,
        prompt: 64,
        steps: 16,
      },
      // The same shapes stored f32 (2.4 GB at 28 layers): the case where both sides read twice the bytes.
      {
        key: "qwen3-f32",
        name: `${qwen} f32`,
        file: "qwen3-0.6b-f32.gguf",
        dtype: "f32" as const,
        prompt: 64,
        steps: 16,
      },
    ];
    const only = argv.indexOf("--cases");
    const cases = only >= 0 ? all.filter((c) => argv[only + 1].split(",").includes(c.key)) : all;
    for (const c of cases) {
      const path = join(tmp, c.file);
      if (c.key === "qwen3-bf16") await writeRandomQwen3(path, layers, "BF16");
      if (c.key === "qwen3-f32") await writeRandomQwen3(path, layers, "F32");
      const model = await loadModel(path, { dtype: c.dtype });
      const prompt = promptIds(c.prompt, model.config.vocabSize);
      const nlcModel = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
      const ctx = await nlcModel.createContext({ contextSize: 512, threads: 1, batchSize: 512 });
      const seq = ctx.getSequence() as unknown as NlcSeq;
      const kiln: Record<string, Rep[]> = Object.fromEntries(backends.map((b) => [b, []]));
      const lc: Rep[] = [];
      for (const b of backends) {
        setBackend(b);
        kilnRep(model, prompt, Math.min(c.steps, 4)); // warm-up
      }
      await llamaRep(seq, prompt, 4);
      for (let r = 0; r < reps; r++) {
        for (const b of backends) {
          setBackend(b);
          kiln[b].push(kilnRep(model, prompt, c.steps));
        }
        lc.push(await llamaRep(seq, prompt, c.steps));
      }
      const median = (xs: number[]) => summarize(xs).median;
      for (const b of backends) {
        const rs = kiln[b];
        const same = rs[0].tokens.join() === lc[0].tokens.join();
        const native = b === "native" ? `kiln-native: ${nativeBackendInfo()?.summary}; ` : "";
        const note = `same GGUF; B=1, prompt ${c.prompt}, ${c.steps} greedy steps, 1 thread each, ${reps} interleaved reps; greedy tokens ${same ? "equal" : "differ (llama.cpp's F16 KV cache and f16 flash attention round differently)"}; ${native}llama.cpp with its default context settings; shared machine`;
        const row = (metric: string, tokens: number, kMs: number, lMs: number) =>
          reporter.add({
            case: `${c.name} ${b}${b === "native" && bf16Gemm === "onednn" ? " (oneDNN bf16)" : ""}`,
            metric,
            unit: "tok/s",
            better: "higher",
            kiln: (tokens / kMs) * 1000,
            peer: "llama.cpp (node-llama-cpp 3.21.1, CPU, 1 thread)",
            peer_value: (tokens / lMs) * 1000,
            note,
          });
        row("prefill", c.prompt, median(rs.map((x) => x.prefillMs)), median(lc.map((x) => x.prefillMs)));
        row("decode", c.steps - 1, median(rs.map((x) => x.decodeMs)), median(lc.map((x) => x.decodeMs)));
      }
      await ctx.dispose();
      await nlcModel.dispose();
      // The next case's weights reuse this one's memory (a WebAssembly memory never shrinks; 4 GiB at most).
      for (const [, t] of model.stateDict()) t.dispose();
      rmSync(path, { force: true });
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
    setBackend("js");
  }
  reporter.finish();
}
