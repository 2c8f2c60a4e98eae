// `kiln arp --resume` after kill -9: the CLI in a child process is killed (SIGKILL) in the middle
// of a DPO stage, resumed, and must ship the same model bytes and the same metrics as a run that
// was never interrupted.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { tmpRoot } from "./helpers.js";

const cli = fileURLToPath(new URL("../../src/cli.ts", import.meta.url));
const kitDir = fileURLToPath(new URL("../..", import.meta.url));
const SMALL = [
  "data.sourceEpisodes=4",
  "data.capPerGame=4",
  "eval.episodes=2",
  "rollout.maxTokens=12",
  "rollout.maxTurns=2",
  "maxChars=12",
  "lora.r=2",
  "lora.alpha=4",
  "sft.maxSteps=4",
  "sft.checkpointEvery=1",
  "turnDpo1.maxSteps=3",
  "turnDpo1.checkpointEvery=1",
  "turnDpo1.studentEpisodes=2",
  "turnDpo2.maxSteps=2",
  "turnDpo2.studentEpisodes=2",
  "branchDpo.maxSteps=2",
  "branchDpo.forks=1",
  "branchDpo.k=2",
].join(";");

function kiln(root: string, name: string, extra: string[], killWhen?: () => boolean) {
  return new Promise<{ code: number | null; signal: string | null; out: string }>((resolve, reject) => {
    const p = spawn(
      process.execPath,
      [
        "--conditions=source",
        "--import",
        "tsx",
        cli,
        "arp",
        "--out",
        root,
        "--name",
        name,
        "--set",
        SMALL,
        "--backend",
        "js",
        ...extra,
      ],
      { cwd: kitDir, stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    p.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    p.stderr.on("data", (d: Buffer) => {
      out += d.toString();
    });
    const timer = killWhen
      ? setInterval(() => {
          if (killWhen()) {
            clearInterval(timer);
            p.kill("SIGKILL");
          }
        }, 25)
      : undefined;
    p.on("error", reject);
    p.on("close", (code, signal) => {
      if (timer) clearInterval(timer);
      resolve({ code, signal, out });
    });
  });
}

const records = (file: string) =>
  readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .map((l) => {
      const { time: _t, ...rest } = JSON.parse(l);
      return rest;
    });

describe("kiln arp --resume after kill -9", () => {
  it("ships the same model bytes and metrics as an uninterrupted run", async () => {
    const root = tmpRoot();
    const full = await kiln(root, "full", []);
    expect(full.code, full.out).toBe(0);
    const metrics = join(root, "cut", "metrics.jsonl");
    // Kill once SFT has logged its second step (checkpoints follow every step).
    const cut = await kiln(root, "cut", [], () => {
      if (!existsSync(metrics)) return false;
      return readFileSync(metrics, "utf8").includes('"stage":"sft","step":2');
    });
    expect(cut.signal).toBe("SIGKILL");
    expect(existsSync(join(root, "cut", "model"))).toBe(false);
    const resumed = await kiln(root, "cut", ["--resume"]);
    expect(resumed.code, resumed.out).toBe(0);
    const bytes = (name: string, f: string) => readFileSync(join(root, name, f));
    expect(Buffer.compare(bytes("full", "model/model.safetensors"), bytes("cut", "model/model.safetensors"))).toBe(0);
    expect(
      Buffer.compare(
        bytes("full", "adapter/adapter_model.safetensors"),
        bytes("cut", "adapter/adapter_model.safetensors"),
      ),
    ).toBe(0);
    expect(records(metrics)).toEqual(records(join(root, "full", "metrics.jsonl")));
  }, 600_000);
});
