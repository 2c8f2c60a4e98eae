import { spawn } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { tmpRoot } from "../recipes/helpers.js";

const child = fileURLToPath(new URL("../fixtures/train-child.ts", import.meta.url));
const kitDir = fileURLToPath(new URL("../..", import.meta.url));

/** Run the child; with `killAtStep`, SIGKILL it as soon as it reports that step. */
function runChild(
  args: string[],
  killAtStep?: number,
): Promise<{ code: number | null; signal: string | null; out: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ["--conditions=source", "--import", "tsx", child, ...args], {
      cwd: kitDir,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    p.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      if (killAtStep !== undefined && out.includes(`step ${killAtStep}\n`)) p.kill("SIGKILL");
    });
    p.stderr.on("data", (d: Buffer) => {
      err += d.toString();
    });
    p.on("error", reject);
    p.on("close", (code, signal) => resolve({ code, signal, out: out + err }));
  });
}

const metricValues = (runDir: string) =>
  readFileSync(join(runDir, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => {
      const { time: _t, ...rest } = JSON.parse(l);
      return rest;
    });

describe("trainer resume after kill -9", () => {
  it("continues from the last checkpoint to bit-identical adapter bytes and metrics", async () => {
    const root = tmpRoot();
    const full = await runChild([root, "full", "new"]);
    expect(full.out).toContain("done 4 resumed null");
    const killed = await runChild([root, "killed", "new"], 2);
    expect(killed.signal).toBe("SIGKILL");
    expect(killed.out).not.toContain("done");
    const resumed = await runChild([root, "killed", "resume"]);
    expect(resumed.out).toMatch(/done 4 resumed [12]/);
    const final = (name: string) =>
      readFileSync(join(root, name, "checkpoints", "sft", "step-4", "adapter_model.safetensors"));
    expect(Buffer.compare(final("full"), final("killed"))).toBe(0);
    const opt = (name: string) =>
      readFileSync(join(root, name, "checkpoints", "sft", "step-4", "optimizer.safetensors"));
    expect(Buffer.compare(opt("full"), opt("killed"))).toBe(0);
    expect(metricValues(join(root, "killed"))).toEqual(metricValues(join(root, "full")));
    // an existing run is never reused silently
    const again = await runChild([root, "full", "new"]);
    expect(again.code).not.toBe(0);
    expect(again.out).toMatch(/already exists: pass --resume .* or --overwrite/);
  });

  it("stops on a NaN loss before the update and keeps the last good checkpoint", async () => {
    const root = tmpRoot();
    // micro-batch 3 is step 3
    const r = await runChild([root, "nan", "new", "3"]);
    expect(r.code).not.toBe(0);
    expect(r.out).toMatch(/sft step 3: loss NaN.*last good checkpoint: .*step-2/);
    expect(readdirSync(join(root, "nan", "checkpoints", "sft")).sort()).toEqual(["step-1", "step-2"]);
  });
});
