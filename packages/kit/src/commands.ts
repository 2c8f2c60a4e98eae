// CLI subcommands beyond the demo: conversion, generation, serving, evaluation.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { clembench, questworld, tau2 } from "@kiln/benchmarks";
import { convertLlama2c } from "@kiln/hub-io";
import { loadAdapter } from "@kiln/lora";
import { LocalPolicy, generate, loadModel, loadTokenizer } from "@kiln/models";
import { ProgressBar, createOpenAIServer } from "@kiln/rollout";
import { initBackend } from "@kiln/tensor";
import { type ParsedArgs, UsageError, intFlag, strFlag } from "./cli-main.js";
import { resolvePolicy } from "./policies.js";

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
      const [checkpoint, tokenizer, outDir] = [
        need(args, 0, "<checkpoint.bin>"),
        need(args, 1, "<tokenizer.bin>"),
        need(args, 2, "<out-dir>"),
      ];
      const c = await convertLlama2c({ checkpoint, tokenizer, outDir });
      console.log(`wrote ${[...c.files.keys()].join(", ")} to ${outDir}`);
      return 0;
    }
    case "generate": {
      const dir = need(args, 0, "<model-dir>");
      await backendFrom(args);
      const model = await loadModel(dir);
      const tokenizer = await loadTokenizer(dir);
      const adapter = strFlag(args.flags, "adapter");
      if (adapter) await loadAdapter(model, adapter);
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
      const model = await loadModel(dir);
      const tokenizer = await loadTokenizer(dir);
      const adapter = strFlag(args.flags, "adapter");
      if (adapter) await loadAdapter(model, adapter);
      const policy = new LocalPolicy({ model, tokenizer, id: strFlag(args.flags, "model-id", dir) });
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
      spec === "expert" || spec === "random" ? spec : await resolvePolicy(spec, { model, adapter, maxTokens });
    const bar = new ProgressBar({ total: seeds.length * 3, label: "questworld" });
    const r = await questworld.runQuestworldEval({ policy, seeds, outDir: out, onProgress: () => bar.tick(1) });
    bar.finish();
    console.log(r.markdown);
    return 0;
  }
  if (benchmark === "tau2") {
    const agentSpec = strFlag(args.flags, "agent", "oracle")!;
    const userSpec = strFlag(args.flags, "user", "oracle")!;
    if (agentSpec !== "oracle" || userSpec !== "oracle") await backendFrom(args);
    const agent =
      agentSpec === "oracle" ? tau2.oracleAgent : await resolvePolicy(agentSpec, { model, adapter, maxTokens });
    const user =
      userSpec === "oracle"
        ? (t: tau2.Tau2Task) => tau2.scriptedUser(t)
        : await resolvePolicy(userSpec, { model, maxTokens });
    const tasks = strFlag(args.flags, "tasks");
    const result = await tau2.runTau2({
      agent,
      user,
      split: (strFlag(args.flags, "split", "test") as tau2.Tau2SplitName) ?? "test",
      version: (strFlag(args.flags, "version", "v1.0") as tau2.Tau2TaskVersion) ?? "v1.0",
      taskIds: tasks ? tasks.split(",") : undefined,
      numTrials: intFlag(args.flags, "trials", 3),
      concurrency: intFlag(args.flags, "concurrency", 1),
      onProgress: tau2.consoleProgress(),
    });
    const files = tau2.writeTau2Results(out, result);
    console.log(tau2.tau2MarkdownReport(result));
    console.log(`wrote ${files.json}, ${files.markdown}, ${files.trajectories}`);
    return 0;
  }
  if (benchmark === "clem") {
    const specs = (strFlag(args.flags, "players") ?? "").split(",").filter(Boolean);
    if (specs.length === 0)
      throw new UsageError("eval clem needs --players <spec>[,<spec>] (model dirs or server URLs)");
    await backendFrom(args);
    const players = await Promise.all(specs.map((s) => resolvePolicy(s, { model, adapter, maxTokens })));
    const games = (strFlag(args.flags, "games", "wordle") ?? "wordle").split(",");
    const summary = await clembench.runBenchmark({
      games,
      players,
      resultsDir: out,
      concurrency: intFlag(args.flags, "concurrency", 1),
      maxTokens,
      enableThinking: args.flags["enable-thinking"] === true,
    });
    console.log(`played ${summary.results.length} episodes; clemscore tables in ${out}`);
    return 0;
  }
  throw new UsageError(`unknown benchmark "${benchmark}" (questworld | tau2 | clem)`);
}
