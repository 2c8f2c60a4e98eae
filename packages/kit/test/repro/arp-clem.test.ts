// ARP's clemscore per phase: scripted policies of known quality played through the clembench environments
// give the clemscore computed here by hand from the games' rules; the paired Δ's SE reduces to the familiar
// formulas where it should; the phase table carries the seed card's column; several seeds make one table.
import { clembench } from "@kiln/benchmarks";
import type { Message, Policy } from "@kiln/rollout";
import { pairedDelta } from "@kiln/rollout";
import { attachLora } from "@kiln/lora";
import { Tensor } from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import { type ClemTableRow, arpClemTable, arpGamesTable, arpSeedsTable } from "../../src/repro/arp-clem-table.js";
import {
  type ArpClemConfig,
  type ClemPhase,
  PhaseEvalMemo,
  arpClemEpisodes,
  clemPhaseDelta,
  clemPhaseEval,
  clemPolicy,
  clemTurnCap,
  renameClemPhase,
  spreadIndices,
  weightsDigest,
} from "../../src/repro/arp-clem.js";
import { tinyChat } from "../../src/recipes/tiny-chat.js";
import { clemSplitIndices, isHeldOutInstance } from "../../src/agent-model/clem-split.js";
import { reproConfig } from "../../src/repro/config.js";
import { parseSeeds } from "../../src/repro/cli.js";
import type { StaticScore } from "../../src/repro/static-score.js";

/** The taboo target of a describer prompt (the word the guesser must find). */
function tabooTarget(prompt: string): string {
  return /needs to guess:\n\n(.+)\n/.exec(prompt)?.[1].trim() ?? "";
}

/**
 * A player of known quality per game: Wordle, always a reply without the guess tag (the game aborts);
 * referencegame, the grid-reading expert (the scripted follower then picks the target: Main Score 100);
 * taboo, the reversing describer (guessed in turn 1: Main Score 100) when the target has an even number of
 * letters, else a clue the reversing guesser cannot use (three wrong guesses: lost, Main Score 0).
 */
function knownQualityPolicy(): Policy {
  const giver = clembench.policyFromBackend(clembench.gridReadingGiver());
  const describer = clembench.policyFromBackend(clembench.reversingDescriber());
  const reply = (text: string) => ({
    message: { role: "assistant" as const, content: text },
    text,
    finishReason: "stop" as const,
  });
  return {
    id: "known-quality",
    async generate(messages: Message[], tools, params) {
      const first = messages.find((m) => m.role === "user")?.content ?? "";
      if (first.includes("Wordle")) return reply("I am not sure what to say.");
      if (first.includes("Target grid")) return giver.generate(messages, tools, params);
      if (tabooTarget(first).length % 2 === 0) return describer.generate(messages, tools, params);
      return reply("CLUE: qzxv");
    },
  };
}

/** A policy that answers every game with text no game accepts (every episode aborted). */
const aborter: Policy = {
  id: "aborter",
  async generate() {
    const text = "hmm";
    return { message: { role: "assistant", content: text }, text, finishReason: "stop" };
  },
};

const config: ArpClemConfig = {
  games: ["wordle", "referencegame", "taboo"],
  instancesPerGame: 6,
  staticGames: [],
  staticInstances: 0,
  maxTokens: 32,
  maxTurns: 10,
};

/** The held-out taboo targets the suite plays, from the instance file (not from the games' results). */
function playedTabooTargets(): string[] {
  const all = clembench.listEpisodes("taboo", clembench.loadInstances("taboo"));
  const heldout = all.filter((_, i) => isHeldOutInstance(i));
  return spreadIndices(heldout.length, config.instancesPerGame).map((i) =>
    String(heldout[i].instance.target_word ?? ""),
  );
}

describe("ARP's clemscore per phase", () => {
  it("scripted policies of known quality give the clemscore computed by hand", async () => {
    const episodes = arpClemEpisodes(config);
    expect(episodes.interactive).toHaveLength(18);
    const good = await clemPhaseEval({ phase: "good", policy: knownQualityPolicy(), config, episodes });
    // By the rules: Wordle 0 % played (no quality); referencegame 100 % played, quality 100; taboo 100 % played,
    // quality = 100 × the share of even-length targets.
    const targets = playedTabooTargets();
    expect(targets.every((t) => t.length > 0)).toBe(true);
    const even = targets.filter((t) => t.length % 2 === 0).length;
    const tabooQuality = (100 * even) / targets.length;
    expect(even).toBeGreaterThan(0);
    expect(even).toBeLessThan(targets.length);
    const r2 = (x: number) => Math.round(x * 100) / 100;
    const played = r2((0 + 100 + 100) / 3);
    const quality = r2((100 + r2(tabooQuality)) / 2);
    expect(good.clem?.games.wordle).toMatchObject({ played: 0, n: 6, nQuality: 0 });
    expect(good.clem?.games.referencegame).toMatchObject({ played: 100, quality: 100 });
    expect(good.clem?.games.taboo).toMatchObject({ played: 100, quality: r2(tabooQuality) });
    expect(good.clem?.averagePlayed).toBeCloseTo(played, 10);
    expect(good.clem?.averageQuality).toBeCloseTo(quality, 10);
    expect(good.clem?.clemscore).toBeCloseTo(r2((played / 100) * quality), 10);
    expect(good.episodes.every((e) => e.error === undefined)).toBe(true);

    // Against a phase that aborts everything: Δ = −clemscore (the aborting phase has none: NaN quality,
    // so its clemscore is NaN as clemeval's is), and the other way round the paired rows still line up.
    const bad = await clemPhaseEval({ phase: "bad", policy: aborter, config, episodes });
    expect(bad.clem?.averagePlayed).toBe(0);
    expect(Number.isNaN(bad.clem?.clemscore)).toBe(true);
    const d = clemPhaseDelta(good, bad);
    expect(d?.n).toBe(18);
    expect(Number.isNaN(d?.mean)).toBe(true);
    const same = clemPhaseDelta(good, good);
    expect(same).toMatchObject({ mean: 0, se: 0, n: 18 });
  });
});

describe("the repro's ARP evaluation set", () => {
  it("plays every held-out instance of each game by default: the agent model's own benchmark's set", () => {
    const defaults = reproConfig(42).arpClem;
    expect(defaults.instancesPerGame).toBe(0);
    const { interactive } = arpClemEpisodes(defaults);
    for (const game of defaults.games) {
      const played = interactive.filter((e) => e.game === game).map((e) => e.index);
      const heldout = clemSplitIndices(game, "heldout");
      expect(played).toEqual(heldout.map((_, position) => position));
    }
    // and what instancesPerGame > 0 keeps: that many per game, spread over the list
    const three = arpClemEpisodes({ ...defaults, instancesPerGame: 3 }).interactive;
    expect(three).toHaveLength(3 * defaults.games.length);
  });
});

describe("a game's turn cap (arpClem.turnCaps)", () => {
  const imagegame: ArpClemConfig = {
    games: ["imagegame"],
    instancesPerGame: 1,
    staticGames: [],
    staticInstances: 0,
    maxTokens: 16,
    maxTurns: 80,
    turnCaps: { imagegame: 3 },
  };

  it("is the game's own cap below maxTurns, else maxTurns", () => {
    expect(clemTurnCap(imagegame, "imagegame")).toBe(3);
    expect(clemTurnCap(imagegame, "taboo")).toBe(80);
    expect(clemTurnCap({ maxTurns: 2, turnCaps: { imagegame: 3 } }, "imagegame")).toBe(2);
  });

  it("ends a giver that never says DONE at the cap, counted as aborted", async () => {
    let calls = 0;
    const neverDone: Policy = {
      id: "never-done",
      async generate() {
        calls++;
        const text = "command: put an X in the first row first column";
        return { message: { role: "assistant", content: text }, text, finishReason: "stop" };
      },
    };
    const episodes = arpClemEpisodes(imagegame);
    const r = await clemPhaseEval({ phase: "capped", policy: neverDone, config: imagegame, episodes });
    expect(calls).toBe(3);
    expect(r.episodes[0]).toMatchObject({ played: 0, stopped: "turn_limit after 3 turns" });
  });

  it("refuses a cap on a game the evaluation does not play, or one that is not a positive integer", () => {
    expect(() => arpClemEpisodes({ ...imagegame, turnCaps: { taboo: 3 } })).toThrow(/turnCaps\.taboo: not a game/);
    expect(() => arpClemEpisodes({ ...imagegame, turnCaps: { imagegame: 0 } })).toThrow(/positive integer, got 0/);
  });
});

describe("a phase's evaluation, batched or one generate at a time, and reused for identical weights", () => {
  const small: ArpClemConfig = { ...config, instancesPerGame: 1, maxTokens: 8, maxTurns: 3 };
  const chat = () => {
    const t = tinyChat({ seed: 7, std: 0.2 });
    return { model: t.model, codec: { tokenizer: t.tokenizer, template: t.chatTemplate } };
  };

  it("the scheduler and plain generate play the same greedy episodes", async () => {
    const { model, codec } = chat();
    const episodes = arpClemEpisodes(small);
    const play = (batching: boolean) =>
      clemPhaseEval({ phase: "p", policy: clemPolicy("p", model, codec, batching), config: small, episodes });
    const batched = await play(true);
    const plain = await play(false);
    expect(clemPolicy("p", model, codec, false).scheduler).toBeNull();
    expect(clemPolicy("p", model, codec).scheduler).not.toBeNull();
    expect(plain.episodes).toEqual(batched.episodes);
    expect(plain.rows).toEqual(batched.rows);
  });

  it("weightsDigest: equal for equal weights, changed by one weight's bits or its dtype, none under an enabled adapter", () => {
    const a = chat().model;
    const b = chat().model;
    const digest = weightsDigest(a);
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    expect(weightsDigest(b)).toBe(digest);
    const [, lin] = b.namedLinears()[0];
    const w = lin.weight.toFloat32Array();
    w[3] = Math.fround(w[3] + 1e-3);
    lin.weight = new Tensor(w, lin.weight.shape);
    expect(weightsDigest(b)).not.toBe(digest);
    const c = chat().model;
    const [, cl] = c.namedLinears()[0];
    cl.weight = cl.weight.to("bf16");
    expect(weightsDigest(c)).not.toBe(digest);
    const d = chat().model;
    const adapter = attachLora(d, { r: 2, alpha: 4, targetModules: ["q_proj"], seed: 1 });
    expect(weightsDigest(d)).toBeUndefined();
    adapter.detach();
    expect(weightsDigest(d)).toBe(digest);
  });

  it("PhaseEvalMemo: identical weights reuse the evaluation under the new phase's name; other weights evaluate", async () => {
    const { model } = chat();
    const memo = new PhaseEvalMemo<{ phase: string; runs: number }>();
    let runs = 0;
    const evaluate = (phase: string) => async () => ({ phase, runs: ++runs });
    const rename = (phase: string) => (v: { phase: string; runs: number }) => ({ ...v, phase });
    expect(await memo.get("b2", model, evaluate("b2"), rename("b2"))).toEqual({ phase: "b2", runs: 1 });
    expect(await memo.get("c", model, evaluate("c"), rename("c"))).toEqual({ phase: "c", runs: 1 });
    expect(memo.reused).toEqual({ c: "b2" });
    const [, lin] = model.namedLinears()[0];
    lin.weight = lin.weight.to("bf16");
    expect(await memo.get("bf16", model, evaluate("bf16"), rename("bf16"))).toEqual({ phase: "bf16", runs: 2 });
    expect(memo.reused).toEqual({ c: "b2" });
  });

  it("renameClemPhase: the same episodes as another phase, its rows under the new name, paired Δ 0", async () => {
    const episodes = arpClemEpisodes(config);
    const good = await clemPhaseEval({ phase: "good", policy: knownQualityPolicy(), config, episodes });
    const copy = renameClemPhase(good, "copy");
    expect(copy.phase).toBe("copy");
    expect(copy.episodes).toEqual(good.episodes);
    expect(new Set(copy.rows.map((r) => r.model))).toEqual(new Set(["copy"]));
    expect(copy.clem?.clemscore).toBe(good.clem?.clemscore);
    expect(clemPhaseDelta(copy, good)).toMatchObject({ mean: 0, se: 0, n: 18 });
  });
});

/** Rows of one model: per game, episode qualities (NaN = aborted). */
function rows(model: string, games: Record<string, number[]>): clembench.ScoreRow[] {
  const out: clembench.ScoreRow[] = [];
  for (const [game, qualities] of Object.entries(games))
    qualities.forEach((q, i) => {
      const ep = { game, model, experiment: "e", episode: `instance_${i}` };
      out.push({ ...ep, metric: "Aborted", value: Number.isNaN(q) ? 1 : 0 });
      out.push({ ...ep, metric: "Main Score", value: q });
    });
  return clembench.addPlayedRows(out);
}

describe("clemscoreDelta", () => {
  it("one game, every episode played: the paired Δ of the qualities and its SE", () => {
    const a = [80, 40, 60, 100, 20];
    const b = [50, 40, 20, 90, 0];
    const d = clembench.clemscoreDelta([...rows("a", { g: a }), ...rows("b", { g: b })], "a", "b");
    const want = pairedDelta(Object.fromEntries(a.map((v, i) => [i, v])), Object.fromEntries(b.map((v, i) => [i, v])));
    expect(d.mean).toBeCloseTo(want.mean, 10);
    expect(d.se).toBeCloseTo(want.se, 10);
    expect(d.n).toBe(5);
  });

  it("two games, every episode played: clemscore is the mean of the qualities, SE² = (SE₁² + SE₂²)/4", () => {
    const g1a = [80, 40, 60, 100];
    const g1b = [50, 40, 20, 90];
    const g2a = [10, 30, 20];
    const g2b = [0, 30, 50];
    const d = clembench.clemscoreDelta(
      [...rows("a", { g1: g1a, g2: g2a }), ...rows("b", { g1: g1b, g2: g2b })],
      "a",
      "b",
    );
    const pd = (x: number[], y: number[]) =>
      pairedDelta(Object.fromEntries(x.map((v, i) => [i, v])), Object.fromEntries(y.map((v, i) => [i, v])));
    const d1 = pd(g1a, g1b);
    const d2 = pd(g2a, g2b);
    expect(d.se).toBeCloseTo(Math.sqrt((d1.se ** 2 + d2.se ** 2) / 4), 10);
    // the Δ is of the two rounded clemscores (2 decimals each)
    expect(Math.abs(d.mean - (d1.mean + d2.mean) / 2)).toBeLessThanOrEqual(0.01);
  });

  it("an aborted episode moves % played: the played term enters the SE", () => {
    const d = clembench.clemscoreDelta(
      [...rows("a", { g: [50, 50, 50, 50] }), ...rows("b", { g: [50, Number.NaN, 50, Number.NaN] })],
      "a",
      "b",
    );
    // a: 100 % × 50 = 50; b: 50 % × 50 = 25. Quality is 50 throughout, so only Played varies: each episode's
    // contribution is 50 × (played − p)/n, paired differences (0, 12.5, 0, 12.5) − mean, var × n.
    expect(d.mean).toBe(25);
    const diffs = [-6.25, 6.25, -6.25, 6.25];
    const variance = diffs.reduce((s, x) => s + x * x, 0) / 3;
    expect(d.se).toBeCloseTo(Math.sqrt(4 * variance), 10);
  });
});

function fakePhase(phase: string, qualities: Record<string, number[]>): ClemPhase {
  const r = rows(phase, qualities);
  const episodes = Object.entries(qualities).flatMap(([game, qs]) =>
    qs.map((q, i) => ({
      game,
      experiment: "e",
      episode: `instance_${i}`,
      index: i,
      played: (Number.isNaN(q) ? 0 : 1) as 0 | 1,
      quality: q,
    })),
  );
  return {
    phase,
    episodes,
    staticEpisodes: [],
    clem: clembench.clemTable(r).rows[0],
    rows: r,
    staticRows: [],
  };
}

const staticScore = (nll: number[]): StaticScore => ({
  perText: Object.fromEntries(nll.map((v, i) => [`text-${i}`, v])),
  tokens: 100,
  nll: nll.reduce((a, b) => a + b, 0) / nll.length,
  perplexity: 1,
});

function fakeRow(label: string, phase: string, qualities: Record<string, number[]>, nll = [2, 2.5, 3]): ClemTableRow {
  return { label, eval: { phase }, static: staticScore(nll), clem: fakePhase(phase, qualities) };
}

describe("the ARP clemscore tables", () => {
  const base = fakeRow("base", "base", { wordle: [Number.NaN, 10, Number.NaN, 20], taboo: [0, 0, 100, Number.NaN] });
  const sft = fakeRow("A  SFT", "sft", { wordle: [60, 70, 80, 90], taboo: [100, 100, 100, 50] }, [2.1, 2.6, 3.1]);
  const b1 = fakeRow("B1", "turn-dpo-1", { wordle: [60, 70, Number.NaN, 90], taboo: [100, 100, 0, 50] });
  const bf16 = fakeRow("bf16 merge", "s = 0.85 · ΣΔ, bf16 merge", { wordle: [60, 70, 80, 90], taboo: [0, 0, 100, 0] });

  it("prints the seed card's clemscore beside kiln's, Δ ± SE and the 2-SE verdict where the seed claims an effect", () => {
    const t = arpClemTable("ARP", [base, sft, b1, bf16]);
    expect(t.header.slice(0, 5)).toEqual([
      "phase",
      "seed card clemscore",
      "clemscore ± SE",
      "Δ clemscore vs base ± SE",
      "seed's effect: Δ > 2 SE here?",
    ]);
    expect(t.rows.map((r) => r[1])).toEqual(["13.05", "43.85", "45.52", "—"]);
    // base: wordle 50 % played, quality 15; taboo 75 %, quality 33.33 → 62.5 % × 24.17 (each rounded as clemeval)
    expect(t.rows[0][2]).toMatch(/^15\.10 ± \d+\.\d\d$/);
    expect(t.rows[0][3]).toBe("—");
    expect(t.rows[1][3]).toMatch(/^\+\d+\.\d\d ± \d+\.\d\d$/);
    expect(t.rows[1][4]).toMatch(/^yes \(\+/);
    expect(t.rows[2][4]).toBe("—");
    expect(t.rows[1][10]).toMatch(/^\+0\.100 ± 0\.000$/);
    const games = arpGamesTable("per game", [base, sft]);
    expect(games.header).toEqual(["phase", "wordle (n 4)", "taboo (n 4)"]);
    expect(games.rows[0]).toEqual(["base", "15.00 / 50.00", "33.33 / 75.00"]);
  });

  it("over two seeds: each seed's clemscore and Δ per phase, and whether the claimed effects hold in both", () => {
    const weak = fakeRow("A  SFT", "sft", { wordle: [Number.NaN, 10, 30, 20], taboo: [0, 100, 0, Number.NaN] });
    const t = arpSeedsTable([
      { seed: 42, rows: [base, sft] },
      { seed: 43, rows: [base, weak] },
    ]);
    expect(t.header).toContain("seed 42: clemscore ± SE");
    expect(t.header).toContain("seed 43: Δ vs base ± SE");
    expect(t.rows.map((r) => r[0])).toEqual(["base", "A  SFT"]);
    expect(t.rows[1][1]).toBe("43.85");
    expect(t.rows[1].at(-1)).toBe("no");
    const both = arpSeedsTable([
      { seed: 42, rows: [base, sft] },
      { seed: 43, rows: [base, sft] },
    ]);
    expect(both.rows[1].at(-1)).toBe("yes");
    expect(both.rows[0].at(-1)).toBe("—");
  });

  it("--seeds: integers, each once", () => {
    expect(parseSeeds("42,43")).toEqual([42, 43]);
    expect(() => parseSeeds("42,x")).toThrow(/"x" is not an integer/);
    expect(() => parseSeeds("42,42")).toThrow(/appears twice/);
  });
});
