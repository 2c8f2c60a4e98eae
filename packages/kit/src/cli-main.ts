// `kiln` CLI. Each subcommand composes package APIs; the maths lives in the packages.
import { runDemo } from "./demo.js";

const HELP = `usage: kiln <command> [options]

commands:
  demo [--out DIR] [--name NAME] [--steps N] [--backend wasm|js] [--seed N]
        convert the embedded stories260K model, generate, LoRA SFT, merge (s=0.85, fp32),
        generate again, play questworld, write a run directory (default runs/demo)
  convert-llama2c <checkpoint.bin> <tokenizer.bin> <out-dir> | convert-llama2c stories260K <out-dir>
        convert a llama2.c checkpoint (or the stories260K model @kiln/models ships) to a Hugging Face Llama directory
  generate <model-dir> [--prompt TEXT] [--max-tokens N] [--temperature T] [--seed N]
  serve <model-dir> [--host 127.0.0.1] [--port 8000] [--adapter DIR] [--max-concurrency N] [--chat-template chatml|FILE]
        an OpenAI-compatible server (chat completions with tools and log-probs, completions); a model without a
        chat template (a base model such as stories260K) needs --chat-template
  eval questworld [--policy expert|random|<model-dir>|<http-url>] [--seeds 1,2,3] [--out DIR]
        [--model NAME (http)] [--adapter DIR --chat-template chatml|FILE (model dir)] [--max-tokens N]
  eval tau2 --agent oracle | --agent-url URL --agent-model NAME [--user scripted | --user-url URL ...]
        [--split test] [--task-version v1.0|v0.2.0] [--tasks 5,9] [--trials 3] [--out runs/tau2]
  eval clem run --model NAME [--model NAME2] --base-url URL [--games wordle,taboo] [--results DIR]
  eval clem score RESULTS_DIR
        (serve a local model for tau2/clem with: kiln serve <model-dir>)
  arp   ARP on guess-number: success-only SFT → turn-DPO (repeat/length) → turn-DPO (invalid/duplicate field)
        → branch-DPO from the current policy → W₀ + s·ΣΔ merged in fp32 (runs/NAME/model, runs/NAME/adapter)
  opd [--env questworld|guess-number] [--teacher MODEL_DIR | --teacher-url URL [--teacher-model NAME]
        [--teacher-tokenizer DIR] | --scaffold TEXT]
        on-policy distillation rounds (fresh LoRA per round on the merged previous round), wall-state starts,
        Core-3 over the eval seeds with the wall table; writes rounds/rN/{adapter,model}
  oel   deploy without memory → consolidate with the memory in the teacher prompt (full KL) → merge;
        greedy pass^k ± SE over trials of the same task
        arp/opd/oel options: --preset tiny|seed  --config FILE.json  --set "sft.lr=1e-4;turnDpo1.beta=0.2"
        --print-config  --resume | --overwrite  --model DIR  --out DIR  --name NAME  --seed N  --backend wasm|js
        (without --model: the embedded random tiny Qwen3 with a character tokenizer — a pipeline check)
  repro arp|opd|oel|all [--model DIR|tiny] [--seed N] [--out runs] [--ablation NAME] [--quick]
        [--set "arp.eval.episodes=40"] [--config FILE.json] [--print-config] [--backend wasm|js]
        the recipes' result tables on held-out instances: n, mean ± SE, paired Δ ± SE vs the base, report.html
        per table (runs/repro-<recipe>/); default model: the embedded agent model. Ablations: scale (arp),
        dpo-reference (arp), early-turn-weight (opd), clamp (opd). opd --teacher DIR: a separate teacher model
        (same tokenizer; e.g. the ARP model, runs/repro-arp/arp/model) instead of the scaffolded base
  agent-model [--out DIR] [--seed N] [--steps N] [--backend wasm|native|js]
        build the embedded agent model from nothing: scripted-player transcripts (guess-number, questworld,
        Wordle) and stories → BPE tokenizer → a small Qwen3 trained from random weights → a Hugging Face dir
  help`;

export interface ParsedArgs {
  positional: string[];
  flags: Record<string, string | true>;
}

export function parseArgs(argv: string[]): ParsedArgs {
  const positional: string[] = [];
  const flags: Record<string, string | true> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a.startsWith("--")) {
      const eq = a.indexOf("=");
      if (eq > 0) flags[a.slice(2, eq)] = a.slice(eq + 1);
      else if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) flags[a.slice(2)] = argv[++i];
      else flags[a.slice(2)] = true;
    } else positional.push(a);
  }
  return { positional, flags };
}

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

export function intFlag(flags: ParsedArgs["flags"], name: string, fallback: number): number {
  const v = flags[name];
  if (v === undefined) return fallback;
  const n = Number(v);
  if (v === true || !Number.isInteger(n)) throw new UsageError(`--${name} needs an integer, got ${JSON.stringify(v)}`);
  return n;
}

export function strFlag(flags: ParsedArgs["flags"], name: string, fallback?: string): string | undefined {
  const v = flags[name];
  if (v === true) throw new UsageError(`--${name} needs a value`);
  return v ?? fallback;
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const args = parseArgs(rest);
  try {
    switch (command) {
      case undefined:
      case "help":
      case "--help":
      case "-h":
        console.log(HELP);
        return 0;
      case "demo": {
        const backend = strFlag(args.flags, "backend", "wasm");
        if (backend !== "wasm" && backend !== "js")
          throw new UsageError(`--backend must be wasm or js, got ${backend}`);
        await runDemo({
          out: strFlag(args.flags, "out", "runs"),
          name: strFlag(args.flags, "name", "demo"),
          steps: intFlag(args.flags, "steps", 60),
          seed: intFlag(args.flags, "seed", 0),
          backend,
          mode: args.flags.overwrite ? "overwrite" : "new",
        });
        return 0;
      }
      case "eval":
        if (rest[0] === "tau2" || rest[0] === "clem") {
          // These benchmarks bring their own CLIs (OpenAI-compatible servers, e.g. `kiln serve`).
          const { runBenchmarkCli } = await import("./commands.js");
          return await runBenchmarkCli(rest[0], rest.slice(1));
        }
        return await (await import("./commands.js")).runCommand(command, args);
      case "convert-llama2c":
      case "generate":
      case "merge":
      case "scale":
      case "serve": {
        const { runCommand } = await import("./commands.js");
        return await runCommand(command, args);
      }
      case "agent-model": {
        const { runAgentModelCommand } = await import("./agent-model/cli.js");
        return await runAgentModelCommand(args);
      }
      case "repro": {
        const { runReproCommand } = await import("./repro/cli.js");
        return await runReproCommand(args);
      }
      case "arp":
      case "opd":
      case "oel": {
        const { runRecipeCommand } = await import("./recipes/cli-recipes.js");
        return await runRecipeCommand(command, args);
      }
      default:
        console.error(`kiln: unknown command "${command}". Run "kiln help".`);
        return 2;
    }
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`kiln ${command}: ${err.message}\n\n${HELP}`);
      return 2;
    }
    throw err;
  }
}
