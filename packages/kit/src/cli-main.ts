// `kiln` CLI: the command table. Each row names a command, says what it does in one line (for `kiln
// help`) and loads its spec (options, help, run) on demand, so `kiln help` starts no backend. Adding a
// command is one row here (or `registerCommand` from code); its spec lives beside its implementation.
import { type CommandSpec, UsageError, closest, formatCommandHelp, parseCommandArgs, wantsHelp } from "./cli/args.js";

export interface CommandEntry {
  /** The words after `kiln`, e.g. "eval clem run". */
  name: string;
  summary: string;
  // biome-ignore lint/suspicious/noExplicitAny: each spec has its own option types; the parser checks them
  load: () => Promise<CommandSpec<any>>;
}

const COMMANDS: CommandEntry[] = [
  {
    name: "demo",
    summary: "stories260K → generate → LoRA SFT → merge → generate → questworld, in one run directory",
    load: async () => (await import("./cli/model-commands.js")).demoCommand,
  },
  {
    name: "arp",
    summary: "ARP on guess-number or Wordle: SFT → turn-DPO ×2 → branch-DPO → merged model",
    load: async () => (await import("./recipes/cli-recipes.js")).recipeCommands.arp,
  },
  {
    name: "opd",
    summary: "on-policy distillation rounds from a teacher (a model, a server or a scaffold)",
    load: async () => (await import("./recipes/cli-recipes.js")).recipeCommands.opd,
  },
  {
    name: "oel",
    summary: "OEL: deploy without memory → consolidate with the memory in the teacher prompt → merge",
    load: async () => (await import("./recipes/cli-recipes.js")).recipeCommands.oel,
  },
  {
    name: "presets",
    summary: "each preset's values and their source: the seed card, or kiln's choice and why",
    load: async () => (await import("./cli/presets-command.js")).presetsCommand,
  },
  {
    name: "repro",
    summary: "the recipes' result tables on held-out instances (n, mean ± SE, Δ vs base, report.html)",
    load: async () => (await import("./repro/cli.js")).reproCommand,
  },
  {
    name: "eval questworld",
    summary: "Core-3 questworld scores of the expert, random, a model directory or a server",
    load: async () => (await import("./cli/eval-commands.js")).evalQuestworldCommand,
  },
  {
    name: "eval tau2",
    summary: "tau2-bench retail pass^k of an OpenAI-compatible agent (or the oracle)",
    load: async () => (await import("./cli/eval-commands.js")).evalTau2Command,
  },
  {
    name: "eval clem run",
    summary: "play clembench games against OpenAI-compatible servers and score them",
    load: async () => (await import("./cli/eval-commands.js")).evalClemRunCommand,
  },
  {
    name: "eval clem score",
    summary: "aggregate a clembench results directory (clemscore / statscore)",
    load: async () => (await import("./cli/eval-commands.js")).evalClemScoreCommand,
  },
  {
    name: "serve",
    summary: "an OpenAI-compatible server for a model directory (chat, tools, log-probs, completions)",
    load: async () => (await import("./cli/serve-command.js")).serveCommand,
  },
  {
    name: "generate",
    summary: "continue a prompt with a model directory",
    load: async () => (await import("./cli/model-commands.js")).generateCommand,
  },
  {
    name: "merge",
    summary: "merge PEFT LoRA adapters into a base model: W₀ + Σ sᵢ·ΔWᵢ in fp32 → a new model directory",
    load: async () => (await import("./cli/model-commands.js")).mergeCommand,
  },
  {
    name: "scale",
    summary: "write a copy of a PEFT adapter with its delta scaled by s",
    load: async () => (await import("./cli/model-commands.js")).scaleCommand,
  },
  {
    name: "manifest",
    summary: "write or verify a directory's SHA256SUMS",
    load: async () => (await import("./cli/model-commands.js")).manifestCommand,
  },
  {
    name: "convert-llama2c",
    summary: "a llama2.c checkpoint (or the shipped stories260K) → a Hugging Face Llama directory",
    load: async () => (await import("./cli/model-commands.js")).convertLlama2cCommand,
  },
  {
    name: "export gguf",
    summary: "a model or LoRA adapter directory → a GGUF file llama.cpp runs (--dtype f32|f16|bf16|q8_0)",
    load: async () => (await import("./cli/gguf-commands.js")).exportGgufCommand,
  },
  {
    name: "convert gguf",
    summary: "a GGUF model → a Hugging Face directory kiln loads and trains",
    load: async () => (await import("./cli/gguf-commands.js")).convertGgufCommand,
  },
  {
    name: "agent-model",
    summary: "rebuild the embedded agent model from nothing (scripted transcripts → BPE → a small Qwen3)",
    load: async () => (await import("./agent-model/cli.js")).agentModelCommand,
  },
  {
    name: "completion",
    summary: "print a bash completion script for these commands and their options",
    load: async () => (await import("./cli/completion.js")).completionCommand(listCommands),
  },
];

/** Add a command to the table (a plugin, or a colleague's `kiln export gguf`); its name must be new. */
export function registerCommand(entry: CommandEntry): void {
  if (COMMANDS.some((c) => c.name === entry.name))
    throw new Error(`kiln: command "${entry.name}" is already registered`);
  COMMANDS.push(entry);
}

/** Every command's table row, in `kiln help` order. */
export function listCommands(): readonly CommandEntry[] {
  return COMMANDS;
}

function overview(prefix = ""): string {
  const rows = COMMANDS.filter((c) => c.name.startsWith(prefix));
  const width = Math.max(...rows.map((c) => c.name.length)) + 2;
  return [
    `usage: kiln ${prefix || "<command> "}[options]      (kiln <command> --help: its options, defaults and an example)`,
    "",
    "commands:",
    ...rows.map((c) => `  ${c.name.padEnd(width)}${c.summary}`),
    ...(prefix ? [] : [`  ${"help [COMMAND]".padEnd(width)}this list, or one command's help`]),
  ].join("\n");
}

/** The entry whose words start argv, longest first ("eval clem run" before "eval"), and the rest of argv. */
function resolve(argv: readonly string[]): { entry?: CommandEntry; rest: readonly string[]; words: string[] } {
  const words: string[] = [];
  for (const a of argv) {
    if (a.startsWith("-")) break;
    words.push(a);
  }
  for (let n = words.length; n > 0; n--) {
    const name = words.slice(0, n).join(" ");
    const entry = COMMANDS.find((c) => c.name === name);
    if (entry) return { entry, rest: argv.slice(n), words };
  }
  return { rest: argv, words };
}

export async function main(argv: string[]): Promise<number> {
  if (argv.length === 0 || argv[0] === "--help" || argv[0] === "-h") {
    console.log(overview());
    return 0;
  }
  if (argv[0] === "help") {
    if (argv.length === 1) {
      console.log(overview());
      return 0;
    }
    return main([...argv.slice(1), "--help"]);
  }
  const { entry, rest, words } = resolve(argv);
  if (!entry) {
    // A group's first word ("eval", "eval clem"): list its commands.
    const group = words.length > 0 ? words.join(" ") : argv[0];
    let prefix = "";
    for (let n = words.length; n > 0 && !prefix; n--) {
      const p = `${words.slice(0, n).join(" ")} `;
      if (COMMANDS.some((c) => c.name.startsWith(p))) prefix = p;
    }
    if (prefix && wantsHelp(argv) && prefix.trim() === group) {
      console.log(overview(prefix));
      return 0;
    }
    if (prefix && prefix.trim() === group) {
      console.error(`kiln ${group}: give one of its commands.\n\n${overview(prefix)}`);
      return 2;
    }
    const candidates = COMMANDS.filter((c) => c.name.startsWith(prefix)).map((c) => c.name);
    const guess = closest(group, candidates);
    console.error(
      `kiln: unknown command "${group}"${guess ? ` (did you mean "${guess}"?)` : ""}.\n\n${overview(prefix)}`,
    );
    return 2;
  }
  const spec = await entry.load();
  if (wantsHelp(rest)) {
    console.log(formatCommandHelp(spec));
    return 0;
  }
  try {
    return await spec.run(parseCommandArgs(spec, rest));
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`kiln ${entry.name}: ${err.message}\n(kiln ${entry.name} --help: its usage)`);
      return 2;
    }
    throw err;
  }
}

export { UsageError };
