import * as fs from "node:fs";
import { join } from "node:path";
import { writeFileAtomicSync } from "@kiln/hub-io";
import type { Tau2EpisodeResult } from "./episode.js";
import type { PassHatKSummary } from "./pass-k.js";

// Results files of a tau2 run: results.json (config, metrics, per-episode rewards),
// trajectories.jsonl (one episode per line) and results.md (tables). All written atomically.

export interface Tau2RunResult {
  config: Record<string, unknown>;
  metrics: PassHatKSummary;
  episodes: Tau2EpisodeResult[];
  startedAt: string;
  durationMs: number;
}

const writeFileAtomic = (path: string, text: string) => writeFileAtomicSync(fs, path, text);

const pct = (x: number) => (100 * x).toFixed(1);

/** The Markdown report: pass^k ± SE, average reward, per-task table. */
export function tau2MarkdownReport(result: Tau2RunResult): string {
  const m = result.metrics;
  const lines: string[] = [];
  const c = result.config;
  lines.push(`# tau2-bench retail: ${String(c.agent ?? "agent")}`, "");
  lines.push(
    `Tasks ${m.numTasks} (split ${String(c.split ?? "?")}, tasks ${String(c.version ?? "?")}), ${m.numSimulations} simulations, user ${String(c.user ?? "?")}, judge ${String(c.judge ?? "none")}.`,
    "",
  );
  lines.push("| metric | value (%) | SE (%) |", "|---|---|---|");
  for (const p of m.passHatK) lines.push(`| pass^${p.k} | ${pct(p.value)} | ${pct(p.stderr)} |`);
  lines.push(`| avg reward | ${pct(m.avgReward)} | ${pct(m.avgRewardStderr)} |`, "");
  for (const w of m.warnings) lines.push(`> ${w}`, "");
  const byTask = new Map<string, Tau2EpisodeResult[]>();
  for (const e of result.episodes) byTask.set(e.taskId, [...(byTask.get(e.taskId) ?? []), e]);
  lines.push(`| task | successes | avg reward | ${m.passHatK.map((p) => `pass^${p.k}`).join(" | ")} | terminations |`);
  lines.push(`|---|---|---|${m.passHatK.map(() => "---").join("|")}|---|`);
  for (const r of m.perTask) {
    const terms = (byTask.get(r.taskId) ?? []).map((e) => e.terminationReason).join(", ");
    lines.push(
      `| ${r.taskId} | ${r.successes}/${r.trials} | ${r.avgReward.toFixed(2)} | ${r.passHatK.map((v) => v.toFixed(2)).join(" | ")} | ${terms} |`,
    );
  }
  return `${lines.join("\n")}\n`;
}

/** Write results.json, trajectories.jsonl and results.md under `dir`; returns their paths. */
export function writeTau2Results(
  dir: string,
  result: Tau2RunResult,
): { json: string; markdown: string; trajectories: string } {
  const json = join(dir, "results.json");
  const markdown = join(dir, "results.md");
  const trajectories = join(dir, "trajectories.jsonl");
  const { episodes, ...rest } = result;
  const slim = { ...rest, episodes: episodes.map(({ messages: _m, ...e }) => e) };
  writeFileAtomic(json, `${JSON.stringify(slim, null, 2)}\n`);
  writeFileAtomic(trajectories, episodes.map((e) => JSON.stringify(e)).join("\n") + (episodes.length ? "\n" : ""));
  writeFileAtomic(markdown, tau2MarkdownReport(result));
  return { json, markdown, trajectories };
}
