// Cross-package end to end: the `kiln demo` pipeline on the real stories260K model
// (hub-io convert → models load/generate → lora + losses SFT → merge → rollout/benchmarks).
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { verifyManifest } from "@kiln/hub-io";
import { markdownTable, reproArp, reproQuickConfig, runDemo, tinyChatSource, writeReproOutputs } from "@kiln/kit";
import { afterAll, describe, expect, it } from "vitest";

const tmp = mkdtempSync(join(tmpdir(), "kiln-e2e-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("kiln demo", () => {
  it("trains, merges, evaluates and leaves a complete, verifiable run directory", async () => {
    const lines: string[] = [];
    const result = await runDemo({ out: tmp, name: "e2e", steps: 25, progress: false, log: (l) => lines.push(l) });
    expect(result.lossLast).toBeLessThan(result.lossFirst * 0.5);
    expect(result.before).toMatch(/^Once upon a time, there was a little robot/);
    expect(result.after).not.toBe(result.before);
    expect(result.core3Total).toBe(30);
    expect(result.meanBf16DeltaLoss).toBeGreaterThan(0);
    const dir = join(tmp, "e2e");
    for (const f of [
      "config.json",
      "metadata.json",
      "metrics.jsonl",
      "summary.json",
      "SHA256SUMS",
      "base-model/model.safetensors",
    ]) {
      expect(existsSync(join(dir, f)), f).toBe(true);
    }
    expect(existsSync(join(dir, "checkpoints", "sft", "step-25", "adapter_model.safetensors"))).toBe(true);
    expect(existsSync(join(dir, "checkpoints", "sft", "step-25", "adapter_config.json"))).toBe(true);
    const metrics = readFileSync(join(dir, "metrics.jsonl"), "utf8").trim().split("\n");
    expect(metrics.filter((l) => l.includes('"stage":"sft"') && !l.includes('"eval"')).length).toBe(25);
    expect((await verifyManifest(dir)).ok).toBe(true);
    expect(lines.join("\n")).toMatch(/questworld Core-3/);
  });
});

// `npm run demo` runs `kiln repro arp`: here at --quick size on the random tiny model (the table's
// shape and files; the embedded agent model's numbers come from the full-size run).
describe("npm run demo (kiln repro arp, --quick)", () => {
  it("prints every ARP phase row with n, mean ± SE and the paired Δ, and writes report.html", async () => {
    const config = reproQuickConfig(1);
    const r = await reproArp(tinyChatSource(1), config, { out: tmp, progress: false, log: () => {} });
    const markdown = writeReproOutputs(r, config, "kiln repro arp --quick --model tiny");
    expect(markdown).toBe(r.tables.map(markdownTable).join("\n\n"));
    // Tables: clemscore per phase (with the seed card's column), per game, then the training game's episodes.
    const [clem, , training] = r.tables;
    expect(clem.header).toContain("seed card clemscore");
    expect(clem.rows).toHaveLength(8);
    const rows = markdownTable(training)
      .split("\n")
      .filter((l) => l.startsWith("| ") && !l.startsWith("| phase"));
    expect(rows).toHaveLength(8);
    for (const row of rows) expect(row).toMatch(/\| 3 \| \d\.\d{3} ± \d\.\d{3} \| \d\.\d{3} ± \d\.\d{3} \|/);
    expect(rows[rows.length - 1]).toContain("bf16 merge");
    expect(existsSync(join(r.dir, "report.html"))).toBe(true);
    expect((await verifyManifest(join(r.dir, "arp"))).ok).toBe(true);
  }, 600_000);
});
