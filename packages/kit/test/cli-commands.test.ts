// The command table as a user meets it, for every command: `--help` prints its own usage and writes
// nothing; an unknown option or a malformed value exits 2 naming the option, before any file is written.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  type OptionSpec,
  UsageError,
  closest,
  defineCommand,
  editDistance,
  listCommands,
  parseCommandArgs,
  registerCommand,
  runCli,
  configProblems,
  interruptMessage,
  onInterruptGracefully,
  presetConfig,
  resumeCommand,
  runPosition,
} from "../src/index.js";
import { reproConfig, reproQuickConfig } from "../src/repro/config.js";

const root = mkdtempSync(join(tmpdir(), "kiln-cli-table-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Every file under `dir` (relative paths). */
function tree(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" }).sort();
}

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const log = vi.spyOn(console, "log").mockImplementation((...a) => void out.push(a.join(" ")));
  const error = vi.spyOn(console, "error").mockImplementation((...a) => void err.push(a.join(" ")));
  try {
    const code = await runCli(argv);
    return { code, out: out.join("\n"), err: err.join("\n") };
  } finally {
    log.mockRestore();
    error.mockRestore();
  }
}

const commands = listCommands().map((c) => c.name);

describe("every command (table-driven)", () => {
  let cwd: string;
  const home = process.cwd();
  beforeEach(() => {
    // Each case runs in an empty directory: "writes nothing" means it stays empty.
    cwd = mkdtempSync(join(root, "case-"));
    process.chdir(cwd);
  });
  afterEach(() => process.chdir(home));

  it("the table lists merge, scale, manifest and every recipe; kiln help shows them all", async () => {
    for (const name of ["merge", "scale", "manifest", "arp", "opd", "oel", "repro", "serve", "eval clem run"])
      expect(commands).toContain(name);
    const r = await run(["help"]);
    expect(r.code).toBe(0);
    for (const name of commands) expect(r.out).toContain(`  ${name} `);
  });

  it.each(commands)(
    "kiln %s --help prints its usage, options and an example, exits 0, writes nothing",
    async (name) => {
      const r = await run([...name.split(" "), "--help"]);
      expect(r.code, r.err).toBe(0);
      expect(r.out).toContain(`usage: kiln ${name}`);
      expect(r.out).toContain("-h, --help");
      expect(r.out).toMatch(/examples?:\n {2}kiln /);
      expect(tree(cwd)).toEqual([]);
      const viaHelp = await run(["help", ...name.split(" ")]);
      expect(viaHelp.out).toBe(r.out);
    },
  );

  it.each(commands)("kiln %s --no-such-option exits 2 naming it, writes nothing", async (name) => {
    const r = await run([...name.split(" "), "--no-such-option", "7"]);
    expect(r.code).toBe(2);
    expect(r.err).toContain("unknown option --no-such-option");
    expect(tree(cwd)).toEqual([]);
  });

  it("every integer and number option refuses a malformed value with exit 2 naming it, writing nothing", async () => {
    let checked = 0;
    for (const entry of listCommands()) {
      const spec = await entry.load();
      // Required positionals are given so that only the option is wrong.
      const positionals = (spec.positionals ?? [])
        .filter((p) => !p.optional)
        .map((p) => p.choices?.[0] ?? join(cwd, "nothing-here"));
      for (const [option, o] of Object.entries(spec.options as Record<string, OptionSpec>)) {
        if (o.type !== "integer" && o.type !== "number" && o.type !== "integers") continue;
        const r = await run([...entry.name.split(" "), ...positionals, `--${option}`, "many"]);
        expect(r.code, `${entry.name} --${option}`).toBe(2);
        expect(r.err).toContain(`--${option} needs`);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(20);
    expect(tree(cwd)).toEqual([]);
  });

  it("a near miss names the closest valid option or command", async () => {
    const flag = await run(["arp", "--preest", "tiny"]);
    expect(flag.code).toBe(2);
    expect(flag.err).toContain("unknown option --preest (did you mean --preset?)");
    const cmd = await run(["mrege"]);
    expect(cmd.code).toBe(2);
    expect(cmd.err).toContain('unknown command "mrege" (did you mean "merge"?)');
    const choice = await run(["arp", "--env", "wordel"]);
    expect(choice.err).toContain(
      '--env must be one of guess-number, wordle, wordle_withclue, got "wordel" (did you mean wordle?)',
    );
    const group = await run(["eval"]);
    expect(group.code).toBe(2);
    expect(group.err).toContain("eval clem run");
    expect(tree(cwd)).toEqual([]);
  });

  it("a value for a switch, a repeated single option and a surplus argument are refused", async () => {
    const sw = await run(["oel", "--resume=yes"]);
    expect(sw.code).toBe(2);
    expect(sw.err).toContain("--resume");
    const twice = await run(["arp", "--seed", "1", "--seed", "2", "--print-config"]);
    expect(twice.code).toBe(2);
    expect(twice.err).toContain("--seed was given 2 times");
    const extra = await run(["arp", "yes", "--print-config"]);
    expect(extra.code).toBe(2);
    expect(extra.err).toContain('unexpected argument "yes"');
    expect(tree(cwd)).toEqual([]);
  });

  it("recipe options are checked completely before a run directory exists (#31: --set sft.lr=-1, --name ../../escape)", async () => {
    const out = join(cwd, "runs");
    const lr = await run(["arp", "--model", "random-tiny", "--out", out, "--set", "sft.lr=-1;lora.r=0"]);
    expect(lr.code).toBe(2);
    expect(lr.err).toContain("sft.lr must be a number ≥ 0, got -1");
    expect(lr.err).toContain("lora.r must be a positive integer, got 0");
    const outside = await run(["oel", "--model", "random-tiny", "--out", out, "--name", "../../escape"]);
    expect(outside.code).toBe(2);
    expect(outside.err).toContain("run name must be a single path component");
    const demo = await run(["demo", "--out", out, "--name", "a/b"]);
    expect(demo.code).toBe(2);
    const repro = await run(["repro", "oel", "--quick", "--out", out, "--set", "oel.eval.trials=0"]);
    expect(repro.code).toBe(2);
    expect(repro.err).toContain("oel.eval.trials must be a positive integer, got 0");
    const model = await run(["agent-model", "--out", join(cwd, "m"), "--set", "size.width=3"]);
    expect(model.code).toBe(2);
    expect(model.err).toContain('unknown key "size.width"');
    const heads = await run(["agent-model", "--out", join(cwd, "m"), "--set", "size.hiddenSize=130"]);
    expect(heads.code).toBe(2);
    expect(heads.err).toContain("size.hiddenSize (130) must be a multiple of size.heads");
    const resume = await run(["agent-model", "--out", join(cwd, "m"), "--resume"]);
    expect(resume.code).toBe(2);
    expect(resume.err).toContain(`cannot resume: there is no checkpoint at ${join(cwd, "m")}.checkpoint`);
    expect(tree(cwd)).toEqual([]);
  });
});

describe("shell completion", () => {
  it("kiln completion bash completes commands, subcommands, options and choices from the table", async () => {
    const chunks: string[] = [];
    const write = vi.spyOn(process.stdout, "write").mockImplementation((c) => {
      chunks.push(String(c));
      return true;
    });
    try {
      expect(await runCli(["completion", "bash"])).toBe(0);
    } finally {
      write.mockRestore();
    }
    const probe = [
      chunks.join(""),
      // biome-ignore lint/suspicious/noTemplateCurlyInString: bash's ${…}, not a template
      't() { COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _kiln; echo "${COMPREPLY[*]}"; }',
      "t kiln ev",
      't kiln eval clem ""',
      "t kiln arp --pre",
      't kiln arp --preset ""',
      "t kiln serve x --served",
    ].join("\n");
    const r = spawnSync("bash", ["-c", probe], { encoding: "utf8" });
    expect(r.stdout.trim().split("\n")).toEqual(["eval", "run score", "--preset", "tiny seed", "--served-model-name"]);
  });
});

describe("interrupt messages", () => {
  it("name the stage, step and newest complete checkpoint, and the command that continues the run", () => {
    const run = mkdtempSync(join(root, "run-"));
    mkdirSync(join(run, "checkpoints", "sft", "step-4"), { recursive: true });
    mkdirSync(join(run, "checkpoints", "sft", "step-6.partial"), { recursive: true });
    writeFileSync(
      join(run, "metrics.jsonl"),
      `${JSON.stringify({ stage: "sft", step: 5, loss: 1 })}\n${JSON.stringify({ stage: "sft", step: 6 }).slice(0, 9)}`,
    );
    expect(runPosition(run)).toEqual({ stage: "sft", step: 5, checkpoint: join(run, "checkpoints", "sft", "step-4") });
    const again = resumeCommand("arp", ["--set", "sft.lr=1e-3;seed=2", "--overwrite", "--name", "x"]);
    expect(again).toBe("kiln arp --set 'sft.lr=1e-3;seed=2' --name x --resume");
    expect(interruptMessage(run, again)).toBe(
      `interrupted at sft step 5 (the step in flight is discarded); last checkpoint: ${join(run, "checkpoints", "sft", "step-4")}; run directory: ${run}; continue with: ${again}`,
    );
    expect(interruptMessage(undefined, "kiln agent-model")).toBe("interrupted; continue with: kiln agent-model");
  });

  it("a graceful command stops on the first signal while it can, and exits on the second or before it can", () => {
    const exit = vi.spyOn(process, "exit").mockImplementation(((code: number) => {
      throw new Error(`exit ${code}`);
    }) as never);
    const lines: string[] = [];
    let graceful = false;
    let stops = 0;
    const listen = () =>
      onInterruptGracefully({
        graceful: () => graceful,
        stop: () => stops++,
        notice: "stopping after the step in flight",
        continueWith: "kiln agent-model --resume",
        write: (line) => lines.push(line),
      });
    let off = listen();
    try {
      // Before it can stop cleanly (nothing to save yet): at once.
      expect(() => process.emit("SIGINT")).toThrow("exit 130");
      expect(stops).toBe(0);
      expect(lines.pop()).toBe("\ninterrupted; continue with: kiln agent-model --resume\n");
      off();
      off = listen();
      graceful = true;
      process.emit("SIGTERM");
      expect(stops).toBe(1);
      expect(lines.pop()).toBe("\nstopping after the step in flight\n");
      // A second signal does not wait.
      expect(() => process.emit("SIGINT")).toThrow("exit 130");
      expect(stops).toBe(1);
    } finally {
      off();
      exit.mockRestore();
    }
  });
});

describe("configuration checks", () => {
  it("every preset and repro configuration passes; each bad field is named", () => {
    for (const recipe of ["arp", "opd", "oel"] as const)
      for (const preset of ["tiny", "seed"]) expect(configProblems(presetConfig(recipe, preset))).toEqual([]);
    expect(configProblems(reproConfig(42))).toEqual([]);
    expect(configProblems(reproQuickConfig(42))).toEqual([]);
    const c = presetConfig("opd", "tiny") as unknown as Record<string, Record<string, unknown>>;
    c.train.warmupRatio = 2;
    c.rollout.temperature = Number.NaN;
    c.eval.seeds = [1, Number.POSITIVE_INFINITY];
    expect(configProblems(c)).toEqual([
      "train.warmupRatio must be in [0, 1], got 2",
      "rollout.temperature must be a number ≥ 0, got NaN",
      "eval.seeds[1] must be finite, got Infinity",
    ]);
  });
});

describe("the parser", () => {
  const spec = defineCommand({
    name: "t",
    summary: "a test command",
    positionals: [{ name: "dir", description: "a directory" }],
    options: {
      count: { type: "integer", default: 3, min: 1, description: "how many" },
      name: { type: "string", multiple: true, aliases: ["alias"], description: "names" },
      mode: { type: "string", choices: ["a", "b"], description: "a mode" },
      seeds: { type: "integers", default: "1,2", description: "seeds" },
      fast: { type: "boolean", description: "go" },
    },
    examples: ["kiln t x"],
    run: async () => 0,
  });

  it("types values, applies defaults, merges aliases in order and reports what was given", () => {
    const a = parseCommandArgs(spec, ["d", "--name", "x", "--alias=y", "--count", "5", "--fast"]);
    expect(a.positionals).toEqual(["d"]);
    expect(a.values).toEqual({ count: 5, name: ["x", "y"], mode: undefined, seeds: [1, 2], fast: true });
    expect([...a.given].sort()).toEqual(["count", "fast", "name"]);
  });

  it("refuses with UsageError naming the option", () => {
    expect(() => parseCommandArgs(spec, ["d", "--count", "0"])).toThrow("--count must be at least 1, got 0");
    expect(() => parseCommandArgs(spec, ["d", "--count", "1.5"])).toThrow('--count needs an integer, got "1.5"');
    expect(() => parseCommandArgs(spec, ["d", "--mode", "c"])).toThrow('--mode must be one of a, b, got "c"');
    expect(() => parseCommandArgs(spec, ["d", "--seeds", "1,,2"])).toThrow("--seeds needs comma-separated integers");
    expect(() => parseCommandArgs(spec, ["--count", "2"])).toThrow("missing <dir>");
    expect(() => parseCommandArgs(spec, ["d", "--cont", "2"])).toThrow("did you mean --count?");
    expect(() => parseCommandArgs(spec, ["d", "--count"])).toThrow(UsageError);
  });

  it("edit distance and the closest candidate", () => {
    expect(editDistance("kitten", "sitting")).toBe(3);
    expect(closest("preest", ["preset", "print-config"])).toBe("preset");
    expect(closest("zzzzzz", ["preset"])).toBeUndefined();
  });

  it("registering a command is one call; a taken name is refused", async () => {
    registerCommand({ name: "export test-format", summary: "a registered command", load: async () => spec });
    const r = await run(["export", "test-format", "--help"]);
    expect(r.out).toContain("usage: kiln t <dir>");
    expect(() => registerCommand({ name: "merge", summary: "again", load: async () => spec })).toThrow(
      /already registered/,
    );
  });
});
