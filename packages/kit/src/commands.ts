// CLI subcommands beyond the demo: conversion, generation, serving, evaluation.
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { clembench, questworld, tau2 } from "@kiln/benchmarks";
import { convertLlama2c } from "@kiln/hub-io";
import { generate, stories260KPaths } from "@kiln/models";
import { ProgressBar } from "@kiln/rollout";
import { initBackend } from "@kiln/tensor";
import { type ParsedArgs, UsageError, intFlag, strFlag } from "./cli-main.js";
import { mergeAdapterDirs, scaleAdapterDir } from "./artifacts.js";
import { type AdapterSpec, loadLocalModel, parseAdapterSpecs, resolvePolicy } from "./policies.js";
import { startServe } from "./serve.js";

function need(args: ParsedArgs, index: number, what: string): string {
  const v = args.positional[index];
  if (!v) throw new UsageError(`missing ${what}`);
  return v;
}

async function backendFrom(args: ParsedArgs): Promise<void> {
  const backend = strFlag(args.flags, "backend", "wasm")!;
  if (backend !== "js") await initBackend(backend);
}

export async function runCommand(command: string, args: ParsedArgs): Promise<number> {
  switch (command) {
    case "convert-llama2c": {
      // `kiln convert-llama2c stories260K <out-dir>`: the model @kiln/models ships.
      const embedded = args.positional[0] === "stories260K" && args.positional.length === 2;
      const [checkpoint, tokenizer, outDir] = embedded
        ? [stories260KPaths().checkpoint, stories260KPaths().tokenizer, need(args, 1, "<out-dir>")]
        : [need(args, 0, "<checkpoint.bin>"), need(args, 1, "<tokenizer.bin>"), need(args, 2, "<out-dir>")];
      const c = await convertLlama2c({ checkpoint, tokenizer, outDir });
      console.log(`wrote ${[...c.files.keys()].join(", ")} to ${outDir}`);
      return 0;
    }
    case "generate": {
      const dir = need(args, 0, "<model-dir>");
      await backendFrom(args);
      const { model, tokenizer } = await loadLocalModel(dir, strFlag(args.flags, "adapter"));
      const prompt = strFlag(args.flags, "prompt", "Once upon a time")!;
      const temperature = Number(strFlag(args.flags, "temperature", "0"));
      const [out] = generate(model, [tokenizer.encode(prompt, { addSpecialTokens: true })], {
        maxNewTokens: intFlag(args.flags, "max-tokens", 64),
        temperature,
        seed: intFlag(args.flags, "seed", 0),
        tokenizer,
      });
      console.log(prompt + out.text);
      return 0;
    }
    case "serve":
      return runServe(args);
    case "merge": {
      // kiln merge <base-dir> --adapter a[,b] [--adapter-scale s[,t]] --out DIR [--dtype f32|bf16]
      const base = need(args, 0, "<base-model-dir>");
      const out = strFlag(args.flags, "out");
      if (!out) throw new UsageError("merge needs --out DIR");
      const adapters = parseAdapterSpecs(strFlag(args.flags, "adapter"), strFlag(args.flags, "adapter-scale"));
      if (adapters.length === 0) throw new UsageError("merge needs --adapter DIR[,DIR…]");
      const dtype = strFlag(args.flags, "dtype", "f32");
      if (dtype !== "f32" && dtype !== "bf16") throw new UsageError(`--dtype must be f32 or bf16, got ${dtype}`);
      await backendFrom(args);
      const hashes = await mergeAdapterDirs({ base, adapters, out, dtype });
      console.log(`kiln merge: wrote ${Object.keys(hashes).join(", ")} to ${out}`);
      return 0;
    }
    case "scale": {
      // kiln scale <adapter-dir> --scale s --out DIR
      const source = need(args, 0, "<adapter-dir>");
      const out = strFlag(args.flags, "out");
      if (!out) throw new UsageError("scale needs --out DIR");
      const raw = strFlag(args.flags, "scale");
      const scale = Number(raw);
      if (raw === undefined || raw.trim() === "" || !Number.isFinite(scale))
        throw new UsageError(`--scale needs a number, got ${raw}`);
      await scaleAdapterDir(source, out, scale);
      console.log(`kiln scale: wrote ${source} × ${scale} to ${out}`);
      return 0;
    }
    case "eval":
      return runEval(args);
    default:
      throw new UsageError(`unknown command ${command}`);
  }
}

/** `kiln serve`: flags are checked before the model loads, so a bad one fails at once. */
async function runServe(args: ParsedArgs): Promise<number> {
  const dir = need(args, 0, "<model-dir>");
  const port = intFlag(args.flags, "port", 8000);
  if (port < 0 || port > 65535) throw new UsageError(`--port must be in [0, 65535], got ${port}`);
  const host = strFlag(args.flags, "host", "127.0.0.1")!;
  if (host.trim() === "") throw new UsageError("--host needs an address");
  const maxConcurrency = intFlag(args.flags, "max-concurrency", 1);
  if (maxConcurrency < 1) throw new UsageError(`--max-concurrency must be at least 1, got ${maxConcurrency}`);
  const maxQueue = intFlag(args.flags, "max-queue", 256);
  if (maxQueue < 0) throw new UsageError(`--max-queue must be at least 0, got ${maxQueue}`);
  const maxTokensFlag = args.flags["max-tokens-limit"];
  const maxTokensLimit = maxTokensFlag === undefined ? undefined : intFlag(args.flags, "max-tokens-limit", 0);
  if (maxTokensLimit !== undefined && maxTokensLimit < 1)
    throw new UsageError(`--max-tokens-limit must be at least 1, got ${maxTokensLimit}`);
  const apiKey = strFlag(args.flags, "api-key") ?? process.env.KILN_API_KEY;
  if (apiKey !== undefined && apiKey === "") throw new UsageError("--api-key (or KILN_API_KEY) must not be empty");
  const chatTemplate = strFlag(args.flags, "chat-template");
  if (chatTemplate !== undefined && chatTemplate !== "chatml" && !existsSync(chatTemplate))
    throw new UsageError(`--chat-template: not "chatml" and no file ${chatTemplate}`);
  const backend = strFlag(args.flags, "backend", "wasm")!;
  let adapters: AdapterSpec[];
  try {
    adapters = parseAdapterSpecs(strFlag(args.flags, "adapter"), strFlag(args.flags, "adapter-scale"));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const serve = await startServe({
    dir,
    host,
    port,
    maxConcurrency,
    maxQueue,
    backend,
    ...(maxTokensLimit !== undefined ? { maxTokensLimit } : {}),
    ...(apiKey !== undefined ? { apiKey } : {}),
    ...(chatTemplate !== undefined ? { chatTemplate } : {}),
    adapters,
    modelId: strFlag(args.flags, "model-id", dir)!,
    log: (line) => console.error(line),
    warn: (line) => console.error(`warning: ${line}`),
  });
  const { contextLength, hasChatTemplate } = serve.info;
  console.log(
    `kiln serve: OpenAI-compatible API for ${dir} at ${serve.server.url}/v1 (context ${contextLength} tokens${
      hasChatTemplate ? "" : "; no chat template: /v1/completions only, or pass --chat-template FILE"
    }${apiKey !== undefined ? "; API key required" : ""}; Ctrl-C to stop)`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  await serve.close();
  return 0;
}

/** tau2 and clembench carry full CLIs of their own; kit forwards the arguments. */
export async function runBenchmarkCli(benchmark: "tau2" | "clem", argv: string[]): Promise<number> {
  if (benchmark === "tau2") return tau2.tau2Main(argv);
  return clembench.runClemCli(argv);
}

async function runEval(args: ParsedArgs): Promise<number> {
  const benchmark = need(args, 0, "<benchmark> (questworld | tau2 | clem)");
  const out = strFlag(args.flags, "out", join("runs", `eval-${benchmark}`))!;
  mkdirSync(out, { recursive: true });
  const model = strFlag(args.flags, "model");
  const adapter = strFlag(args.flags, "adapter");
  const maxTokens = intFlag(args.flags, "max-tokens", 256);
  if (benchmark === "questworld") {
    const spec = strFlag(args.flags, "policy", "expert")!;
    const seeds = (strFlag(args.flags, "seeds", "1,2,3") ?? "").split(",").map(Number);
    if (spec !== "expert" && spec !== "random") await backendFrom(args);
    const policy =
      spec === "expert" || spec === "random"
        ? spec
        : await resolvePolicy(spec, { model, adapter, maxTokens, chatTemplate: strFlag(args.flags, "chat-template") });
    const bar = new ProgressBar({ total: seeds.length * 3, label: "questworld" });
    const r = await questworld.runQuestworldEval({
      policy,
      seeds,
      outDir: out,
      params: { maxTokens }, // per request, so --max-tokens also bounds a server's replies
      onProgress: () => bar.tick(1),
    });
    bar.finish();
    console.log(r.markdown);
    return 0;
  }
  throw new UsageError(`unknown benchmark "${benchmark}" (questworld | tau2 | clem)`);
}
