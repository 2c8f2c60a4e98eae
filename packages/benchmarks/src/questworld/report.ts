// Core-3 reports: a Markdown summary for people and a stable JSON document for programs.

import type { Core3Result, MeanSE } from "./core3.js";
import { QUESTS, QUEST_INFO } from "./quests.js";

const fmt = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : "n/a");
const pm = (m: MeanSE, d = 2) => (m.se === null ? fmt(m.mean, d) : `${fmt(m.mean, d)} ± ${fmt(m.se, d)}`);

/** The result as pretty JSON (keys in a fixed order; NaN written as null). */
export function formatCore3Json(result: Core3Result): string {
  return `${JSON.stringify(result, (_k, v) => (typeof v === "number" && !Number.isFinite(v) ? null : v), 2)}\n`;
}

export function formatCore3Markdown(result: Core3Result): string {
  const n = result.seeds.length;
  const lines: string[] = [];
  lines.push(`# questworld Core-3 — ${result.policyId}`);
  lines.push("");
  lines.push(
    `**Core-3: ${pm(result.score)} / ${result.maxPerSeed}** (mean ± SE over ${n} seed${n === 1 ? "" : "s"}; ` +
      `min ${result.score.min}, max ${result.score.max}; env ${result.envVersion}; ` +
      `budget ${result.limits.toolCalls} calls / ${result.limits.ticks} ticks)`,
  );
  lines.push("");
  lines.push(`| archetype | ${QUESTS.map((q) => QUEST_INFO[q].title).join(" | ")} | total /10 |`);
  lines.push(`|---|${QUESTS.map(() => "---:").join("|")}|---:|`);
  for (const a of result.archetypes) {
    const row = result.byArchetype[a];
    if (!row) continue;
    const cells = QUESTS.map((q) => `${fmt(row.perQuest[q])} / ${QUEST_INFO[q].stages.length}`);
    lines.push(`| ${a} | ${cells.join(" | ")} | ${pm(row.total)} |`);
  }
  lines.push("");
  lines.push("## Wall report (agents that passed each stage)");
  lines.push("");
  lines.push("| # | quest | stage | passed | stopped here |");
  lines.push("|---:|---|---|---:|---:|");
  for (const r of result.wall) {
    const mark = result.wallStage && r.index === result.wallStage.index ? " **← wall**" : "";
    lines.push(
      `| ${r.index} | ${QUEST_INFO[r.quest].title} | ${r.stage}. ${r.label} | ${r.passed}/${r.of} | ${r.stoppedHere}${mark} |`,
    );
  }
  const aborted = result.episodes.filter((e) => e.status === "aborted").length;
  const malformed = result.episodes.reduce((a, e) => a + e.malformed, 0);
  const calls = result.episodes.reduce((a, e) => a + e.toolCalls, 0);
  lines.push("");
  lines.push(
    `Episodes: ${result.episodes.length}; aborted (malformed calls in a row): ${aborted}; ` +
      `malformed calls: ${malformed}/${calls}.`,
  );
  return `${lines.join("\n")}\n`;
}
