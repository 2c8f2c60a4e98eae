// Integrity under misuse (#31 items 1, 2) and the CLI's promises (#28): Ctrl-C leaves a resumable run and
// says how to continue; two resumes of one run cannot both write it; merge/scale never write over an
// input; an evaluation whose requests fail exits non-zero naming the first error.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { hostname, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { gunzipSync } from "node:zlib";
import { attachLora, saveAdapter } from "@kiln/lora";
import { afterAll, describe, expect, it, vi } from "vitest";
import { tinyChat } from "../src/recipes/tiny-chat.js";
import { DirLockError, acquireDirLock, runCli, writeMergedModel } from "../src/index.js";

const root = mkdtempSync(join(tmpdir(), "kiln-integrity-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const cli = resolve(import.meta.dirname, "../src/cli.ts");

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const log = vi.spyOn(console, "log").mockImplementation((...a) => void out.push(a.join(" ")));
  const error = vi.spyOn(console, "error").mockImplementation((...a) => void err.push(a.join(" ")));
  const stderr = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
  try {
    const code = await runCli(argv);
    return { code, out: out.join("\n"), err: err.join("\n") };
  } finally {
    log.mockRestore();
    error.mockRestore();
    stderr.mockRestore();
  }
}

/** SHA-256 of every file under `dir`, by relative path. */
function digest(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of readdirSync(dir, { recursive: true, encoding: "utf8" }).sort()) {
    const p = join(dir, f);
    try {
      out[f] = createHash("sha256").update(readFileSync(p)).digest("hex");
    } catch {
      // a directory
    }
  }
  return out;
}

describe("merge and scale never write over an input (#31 item 2)", () => {
  it("kiln merge BASE --adapter A --out BASE (or inside, or around it) is refused and BASE is unchanged", async () => {
    const base = join(root, "models", "base");
    const t = tinyChat({ seed: 3, std: 0.2 });
    await writeMergedModel(base, t.model, {
      tokenizer: t.tokenizer,
      template: t.chatTemplate,
      baseModel: "tiny",
      title: "base",
    });
    const adapterDir = join(root, "models", "adapter");
    await saveAdapter(attachLora(t.model, { r: 2, alpha: 4, targetModules: "all-linear", init: false }), adapterDir);
    const before = digest(base);
    const adapterBefore = digest(adapterDir);
    for (const [out, how] of [
      [base, "is"],
      [join(base, "merged"), "is inside"],
      [join(root, "models"), "contains"],
      [adapterDir, "is"],
    ] as const) {
      const r = await run(["merge", base, "--adapter", adapterDir, "--out", out, "--backend", "js"]);
      expect(r.code, out).toBe(2);
      expect(r.err).toContain(`--out ${out} ${how}`);
    }
    const scaled = await run(["scale", adapterDir, "--scale", "2", "--out", adapterDir]);
    expect(scaled.code).toBe(2);
    expect(scaled.err).toContain("is the adapter");
    expect(digest(base)).toEqual(before);
    expect(digest(adapterDir)).toEqual(adapterBefore);
    expect(existsSync(`${base}.lock`)).toBe(false);

    // A new --out is written through a temporary directory; an existing one needs --overwrite.
    const merged = join(root, "merged");
    expect((await run(["merge", base, "--adapter", adapterDir, "--out", merged, "--backend", "js"])).code).toBe(0);
    expect(readdirSync(root).filter((n) => n.includes(".tmp-"))).toEqual([]);
    await expect(runCli(["merge", base, "--adapter", adapterDir, "--out", merged, "--backend", "js"])).rejects.toThrow(
      /already exists and is not empty: choose a new one or pass --overwrite/,
    );
    const files = digest(merged);
    expect(
      (await run(["merge", base, "--adapter", adapterDir, "--out", merged, "--backend", "js", "--overwrite"])).code,
    ).toBe(0);
    expect(digest(merged)).toEqual(files);
  });
});

describe("run directory locks (#31 item 1)", () => {
  it("a lock held by a live process names it; a dead holder's lock is taken over; another host's is never guessed", async () => {
    const dir = join(root, "locked-run");
    const sleeper = spawn("sleep", ["30"]);
    try {
      const holder = {
        pid: sleeper.pid,
        host: hostname(),
        command: "kiln arp --resume",
        startedAt: "2026-01-01T00:00:00Z",
      };
      writeFileSync(`${dir}.lock`, JSON.stringify(holder));
      expect(() => acquireDirLock(dir, "test")).toThrow(DirLockError);
      expect(() => acquireDirLock(dir, "test")).toThrow(
        `is in use by pid ${sleeper.pid} on ${hostname()} (kiln arp --resume, since 2026-01-01T00:00:00Z)`,
      );
      await expect(runCli(["manifest", "write", dir])).rejects.toThrow(DirLockError);
    } finally {
      sleeper.kill();
    }
    await new Promise((r) => sleeper.once("exit", r));
    const notes: string[] = [];
    const lock = acquireDirLock(dir, "test", (l) => notes.push(l));
    expect(notes.join("")).toContain(`left by pid ${sleeper.pid}`);
    expect(JSON.parse(readFileSync(`${dir}.lock`, "utf8")).pid).toBe(process.pid);
    expect(() => acquireDirLock(dir, "again")).toThrow(DirLockError); // the same process, a second time
    lock.release();
    expect(existsSync(`${dir}.lock`)).toBe(false);
    writeFileSync(`${dir}.lock`, JSON.stringify({ pid: 1, host: "elsewhere", command: "kiln oel", startedAt: "t" }));
    expect(() => acquireDirLock(dir, "test")).toThrow(/on elsewhere .*delete .*locked-run\.lock/);
    rmSync(`${dir}.lock`);
  });

  it("Ctrl-C during training prints where and how to continue (exit 130); two concurrent resumes: one is refused, no duplicates", async () => {
    const out = join(root, "runs");
    const small =
      "tasks=2;train.maxSteps=12;train.checkpointEvery=2;eval.trials=1;rollout.maxTokens=6;rollout.maxTurns=1;lora.r=2;lora.alpha=4";
    const args = ["oel", "--model", "random-tiny", "--out", out, "--backend", "js", "--set", small];
    const child = spawn(process.execPath, ["--import", "tsx", "--conditions=source", cli, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
    const first = join(out, "oel", "checkpoints", "consolidate", "step-2");
    for (let i = 0; i < 1500 && !existsSync(first); i++) await new Promise((r) => setTimeout(r, 100));
    expect(existsSync(first), stderr).toBe(true);
    child.kill("SIGINT");
    expect(await exited).toBe(130);
    expect(stderr).toMatch(
      /\ninterrupted at consolidate step \d+ \(the step in flight is discarded\); last checkpoint: .*step-\d+/,
    );
    expect(stderr).toContain(
      `continue with: kiln oel --model random-tiny --out ${out} --backend js --set '${small}' --resume`,
    );
    expect(existsSync(join(out, "oel.lock"))).toBe(false);
    expect(existsSync(join(out, "oel", "model"))).toBe(false);

    const resume = [...args, "--resume"];
    const results = await Promise.allSettled([run(resume), run(resume)]);
    const done = results.filter((r) => r.status === "fulfilled");
    const refused = results.filter((r) => r.status === "rejected");
    expect(done.length).toBe(1);
    expect((done[0] as PromiseFulfilledResult<{ code: number }>).value.code).toBe(0);
    expect(refused.length).toBe(1);
    expect(String((refused[0] as PromiseRejectedResult).reason)).toMatch(
      new RegExp(`DirLockError: .*oel is in use by pid ${process.pid} on ${hostname()} \\(kiln oel `),
    );
    // The files of the run hold each record once.
    const records = readFileSync(join(out, "oel", "metrics.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => {
        const { time: _t, ...rest } = JSON.parse(l);
        return JSON.stringify(rest);
      });
    expect(new Set(records).size).toBe(records.length);
    const steps = records
      .map((r) => JSON.parse(r))
      .filter((r) => r.stage === "consolidate" && r.step !== undefined && !r.eval);
    expect(steps.map((r) => r.step)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    for (const f of readdirSync(join(out, "oel", "rollouts")).filter((n) => n.endsWith(".gz"))) {
      const ids = gunzipSync(readFileSync(join(out, "oel", "rollouts", f)))
        .toString("utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).episodeId ?? JSON.parse(l).episode_id)
        .filter((id) => id !== undefined);
      expect(new Set(ids).size, f).toBe(ids.length);
    }
    expect(existsSync(join(out, "oel", "model", "model.safetensors"))).toBe(true);
  }, 300_000);
});

describe("evaluation errors never look like a result (#28)", () => {
  it("eval clem run fits max_tokens to the server's max_model_len, counts errored episodes and exits 1 naming the first", async () => {
    const seen: number[] = [];
    const names: string[] = [];
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => {
        body += d;
      });
      req.on("end", () => {
        res.setHeader("content-type", "application/json");
        if (req.url === "/v1/models") {
          res.end(JSON.stringify({ object: "list", data: [{ id: "m", object: "model", max_model_len: 2048 }] }));
          return;
        }
        const request = JSON.parse(body);
        seen.push(request.max_tokens);
        names.push(request.model);
        res.statusCode = 400;
        res.end(JSON.stringify({ error: { message: "prompt too long for this test", type: "invalid_request_error" } }));
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`;
    try {
      const results = join(root, "clem");
      const r = await run([
        "eval",
        "clem",
        "run",
        "--model",
        "m",
        "--base-url",
        url.replace(/\/v1$/, ""), // without /v1, as the README writes it
        "--games",
        "wordle",
        "--limit",
        "1",
        "--results",
        results,
        "--no-progress",
      ]);
      expect(r.code).toBe(1);
      expect(r.err).toContain("max_tokens 5000 → 1024");
      expect(seen.length).toBeGreaterThan(0);
      expect(Math.max(...seen)).toBe(1024);
      expect(r.out).toMatch(/episodes: 0 played, \d+ errored/);
      expect(r.err).toMatch(/\d+ of \d+ episodes errored \(first: wordle\/.*prompt too long for this test/);
      const wrong = await run([
        "eval",
        "clem",
        "run",
        "--model",
        "other",
        "--base-url",
        url,
        "--games",
        "wordle",
        "--limit",
        "1",
        "--results",
        results,
      ]);
      expect(wrong.code).toBe(2);
      expect(wrong.err).toContain('does not serve a model named "other" (it serves: m)');
      // tau2 against the same failing server: no episode is scored, and the command fails naming the error.
      await expect(
        runCli([
          "eval",
          "tau2",
          "--agent-url",
          url,
          "--agent-model",
          "m",
          "--tasks",
          "5",
          "--trials",
          "1",
          "--out",
          join(root, "tau2"),
          "--no-progress",
        ]),
      ).rejects.toThrow(/all 1 simulations ended in infrastructure errors \(first: .*prompt too long for this test/);
      // questworld without --model: the one model the server serves is named in every request.
      names.length = 0;
      await expect(
        runCli(["eval", "questworld", "--policy", url, "--seeds", "1", "--out", join(root, "qw"), "--no-progress"]),
      ).rejects.toThrow(/prompt too long for this test/);
      expect(names.length).toBeGreaterThan(0);
      expect(new Set(names)).toEqual(new Set(["m"]));
    } finally {
      server.close();
    }
  });
});
