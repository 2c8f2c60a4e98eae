// The `kiln repro` command line: bad input is a usage error that names what is wrong (exit 2),
// a model directory written here runs end to end, and the embedded model's locator points into
// the package's data/ folder.
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { verifyManifest } from "@kiln/hub-io";
import { afterAll, describe, expect, it, vi } from "vitest";
import { agentModelDir } from "../../src/agent-model/paths.js";
import { writeMergedModel } from "../../src/artifacts.js";
import { main } from "../../src/cli-main.js";
import { tinyChat } from "../../src/recipes/tiny-chat.js";
import { reproEffectiveConfig } from "../../src/repro/cli.js";
import { tmpRoot } from "../recipes/helpers.js";

const root = tmpRoot();
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const log = vi.spyOn(console, "log").mockImplementation((...a) => void out.push(a.join(" ")));
  const error = vi.spyOn(console, "error").mockImplementation((...a) => void err.push(a.join(" ")));
  try {
    const code = await main(argv);
    return { code, out: out.join("\n"), err: err.join("\n") };
  } finally {
    log.mockRestore();
    error.mockRestore();
  }
}

let modelDir: Promise<string> | undefined;
/** A tiny random chat model written as a Hugging Face directory, once per file. */
function tinyModelDir(): Promise<string> {
  modelDir ??= (async () => {
    const t = tinyChat({ seed: 4, std: 0.2 });
    const dir = join(root, "model");
    mkdirSync(dir, { recursive: true });
    await writeMergedModel(dir, t.model, {
      tokenizer: t.tokenizer,
      template: t.chatTemplate,
      dtype: "f32",
      baseModel: "kiln tinyChat",
      title: "tiny",
      body: "",
    });
    return dir;
  })();
  return modelDir;
}

describe("kiln repro (command line)", () => {
  it("refuses an unknown recipe, an unknown ablation, an ablation of another recipe and a missing model dir", async () => {
    const bad = await run(["repro", "nope"]);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('<recipe> must be one of arp, opd, oel, all, got "nope"');
    const ablation = await run(["repro", "arp", "--ablation", "temperature", "--quick"]);
    expect(ablation.code).toBe(2);
    expect(ablation.err).toContain(
      '--ablation must be one of scale, dpo-reference, early-turn-weight, clamp, objective, got "temperature"',
    );
    const other = await run(["repro", "oel", "--ablation", "clamp", "--quick"]);
    expect(other.code).toBe(2);
    expect(other.err).toContain("--ablation clamp belongs to `kiln repro opd`, not oel");
    const missing = join(root, "no-such-model");
    const m = await run(["repro", "arp", "--quick", "--model", missing]);
    expect(m.code).toBe(2);
    expect(m.err).toContain(`--model: model directory ${missing} has no config.json`);
    const set = await run(["repro", "arp", "--quick", "--set", "arp.nothing=1", "--print-config"]);
    expect(set.code).toBe(2);
    expect(set.err).toContain('config has no field "arp.nothing"');
  });

  it("--print-config shows the effective sizes; --set and --seed reach every recipe", () => {
    const c = reproEffectiveConfig({ quick: true, seed: 9, set: "arp.eval.episodes=5;ablations.scales=0.5,1" });
    expect(c.arp.eval.episodes).toBe(5);
    expect(c.ablations.scales).toEqual([0.5, 1]);
    expect([c.seed, c.arp.seed, c.opd.seed, c.oel.seed]).toEqual([9, 9, 9, 9]);
  });

  it("runs `repro oel --quick` on a model directory written here and leaves report.html", async () => {
    const dir = await tinyModelDir();
    const out = join(root, "runs");
    const r = await run(["repro", "oel", "--quick", "--model", dir, "--out", out, "--quiet"]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain("| base + its test-task memory in prompt (upper bound) | 2 | 6 |");
    expect(r.out).toMatch(/kiln repro oel: total wall time \d+\.\d s/);
    expect(existsSync(join(out, "repro-oel", "report.html"))).toBe(true);
    expect(readFileSync(join(out, "repro-oel", "table.md"), "utf8")).toContain("pass^3 ± SE");
    expect(JSON.parse(readFileSync(join(out, "repro-oel", "summary.json"), "utf8")).backend).toMatch(
      /^kiln backend: (native|wasm) \(/,
    );
  }, 600_000);

  it("--backend native runs the table on the machine's BLAS, records it, and gives the same table twice", async (ctx) => {
    const { initBackend, disposeNativeBackend } = await import("@kiln/tensor");
    try {
      await initBackend("native", { activate: false });
      disposeNativeBackend();
    } catch (e) {
      if (process.env.KILN_NATIVE === "required") throw e;
      return ctx.skip();
    }
    const dir = await tinyModelDir();
    const tables: string[] = [];
    for (const name of ["native-1", "native-2"]) {
      const out = join(root, name);
      const r = await run(["repro", "oel", "--quick", "--model", dir, "--out", out, "--backend", "native"]);
      expect(r.code, r.err).toBe(0);
      expect(r.out).toMatch(/^kiln backend: native \(/m);
      const summary = JSON.parse(readFileSync(join(out, "repro-oel", "summary.json"), "utf8"));
      expect(summary.backend).toMatch(/^kiln backend: native \(/);
      expect(readFileSync(join(out, "repro-oel", "report.html"), "utf8")).toContain("kiln backend: native (");
      tables.push(readFileSync(join(out, "repro-oel", "table.md"), "utf8"));
    }
    expect(tables[1]).toBe(tables[0]);
  }, 600_000);

  it("agentModelDir() is the package's data/agent-model folder", () => {
    const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
    expect(agentModelDir()).toBe(join(pkg, "data", "agent-model"));
  });

  it("the shipped agent model's SHA256SUMS matches every file beside it (the model card included)", async () => {
    const report = await verifyManifest(agentModelDir(), { strict: true });
    expect(report.ok).toBe(true);
  });
});
