// CLI subcommands beyond the demo: conversion, generation, serving, evaluation.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { clembench, questworld, tau2 } from "@kiln/benchmarks";
import { convertLlama2c } from "@kiln/hub-io";
import { LocalPolicy, generate, stories260KPaths } from "@kiln/models";
import { ProgressBar, createOpenAIServer } from "@kiln/rollout";
import { initBackend } from "@kiln/tensor";
import { type ParsedArgs, UsageError, intFlag, strFlag } from "./cli-main.js";
import { chatTemplateFor, loadLocalModel, resolvePolicy } from "./policies.js";

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
    case "serve": {
      const dir = need(args, 0, "<model-dir>");
      await backendFrom(args);
      const { model, tokenizer } = await loadLocalModel(dir, strFlag(args.flags, "adapter"));
      const chatTemplate = await chatTemplateFor(dir, tokenizer, strFlag(args.flags, "chat-template"));
      const policy = new LocalPolicy({ model, tokenizer, chatTemplate, id: strFlag(args.flags, "model-id", dir) });
      const server = await createOpenAIServer({
        policy,
        tokenizer,
        host: strFlag(args.flags, "host", "127.0.0.1"),
        port: intFlag(args.flags, "port", 8000),
        maxConcurrency: intFlag(args.flags, "max-concurrency", 1),
        log: (line) => console.error(line),
      });
      console.log(`kiln serve: OpenAI-compatible API for ${dir} at ${server.url}/v1 (Ctrl-C to stop)`);
      await new Promise<void>((resolve) => {
        const stop = () => resolve();
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
      });
      await server.close();
      return 0;
    }
    case "eval":
      return runEval(args);
    default:
      throw new UsageError(`unknown command ${command}`);
  }
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
