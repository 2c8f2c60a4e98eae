import { describe, expect, it } from "vitest";
import {
  cellByCellGiver,
  commandFollower,
  evaluateGrid,
  imagegame,
  replay,
  toNumber,
} from "../../src/clembench/index.js";
import { ep, play, sentTo, spec } from "./helpers.js";

const s0 = spec("imagegame"); // compact_grids/0
const target = s0.instance.target_grid as string; // "▢ ▢ ▢ ▢ B\n▢ ▢ ▢ B ▢\n▢ ▢ B ▢ ▢\n▢ B ▢ ▢ ▢\nB B B B B"
const empty = "▢ ▢ ▢ ▢ ▢\n▢ ▢ ▢ ▢ ▢\n▢ ▢ ▢ ▢ ▢\n▢ ▢ ▢ ▢ ▢\n▢ ▢ ▢ ▢ ▢";
const only = (cells: [number, number, string][]) => {
  const g = empty.split("\n").map((r) => r.split(" "));
  for (const [r, c, l] of cells) g[r][c] = l;
  return g.map((r) => r.join(" ")).join("\n");
};

describe("imagegame evaluator", () => {
  it("precision/recall/F1 over filled cells, case-insensitive letters, 0–100 integers", () => {
    expect(evaluateGrid(target, target).map(toNumber)).toEqual([100, 100, 100]);
    // one correct cell out of 9 filled target cells; one filled generated cell
    expect(evaluateGrid(target, only([[0, 4, "b"]])).map(toNumber)).toEqual([100, 11, 20]);
    // two filled, one right: p = 0.5, r = 0.1111, f1 = 0.1818
    expect(
      evaluateGrid(
        target,
        only([
          [0, 4, "B"],
          [0, 0, "X"],
        ]),
      ).map(toNumber),
    ).toEqual([50, 11, 18]);
    expect(evaluateGrid(target, only([[0, 0, "X"]])).map(toNumber)).toEqual([0, 0, 0]);
  });
  it("different shapes give zeros; an all-empty grid raises (division by zero, as the reference)", () => {
    expect(evaluateGrid(target, "A B\nC D").map(toNumber)).toEqual([0, 0, 0]);
    expect(() => evaluateGrid(target, empty)).toThrow();
  });
});

describe("imagegame episodes", () => {
  it("giver's first prompt is header + target grid + question; follower gets its header as initial prompt", async () => {
    const r = await play(imagegame, [
      replay(["Command: put B in row 1 column 5", "Command: DONE"]),
      replay([only([[0, 4, "B"]])]),
    ]);
    expect(sentTo(r, "Player 1")[0]).toBe(
      `${s0.instance.player_1_prompt_header}\n${target}\n${s0.instance.player_1_question}`,
    );
    expect(sentTo(r, "Player 2")[0]).toBe(`${s0.instance.player_2_prompt_header}\n\nCommand: put B in row 1 column 5`);
    expect(sentTo(r, "Player 1")[1]).toBe("What is your next command?");
    expect(ep(r)).toMatchObject({ Aborted: 0, Success: 0, Lose: 1, "Main Score": 20, Precision: 100, Recall: 11 });
    // every logged event of a scored round counts as a request; DONE's round counts its two call events
    expect(ep(r)["Request Count"]).toBe(8);
  });
  it("the scripted pair reproduces the grid: F1 100 → Success", async () => {
    const r = await play(imagegame, [cellByCellGiver(), commandFollower()]);
    expect(ep(r)).toMatchObject({ Success: 1, "Main Score": 100, F1: 100 });
  });
  it("a giver reply that is neither a command nor DONE aborts", async () => {
    const r = await play(imagegame, [replay(["Put B in the corner"]), replay([])]);
    expect(ep(r).Aborted).toBe(1);
    expect(Number.isNaN(ep(r)["Main Score"])).toBe(true);
  });
  it("a follower reply that is not a 5x5 grid aborts (case-sensitive)", async () => {
    const r = await play(imagegame, [replay(["Command: put b in row 1 column 5"]), replay([only([[0, 4, "b"]])])]);
    expect(ep(r).Aborted).toBe(1);
  });
  it("DONE in the very first round: the reference divides by zero, so no scores", async () => {
    const r = await play(imagegame, [replay(["Command: DONE"]), replay([])]);
    expect(r.scores).toBeNull();
    expect(r.error).toMatch(/division by zero/);
  });
  it("ends after 50 rounds without DONE", async () => {
    const g = only([[0, 4, "B"]]);
    const r = await play(imagegame, [
      replay(Array(50).fill("Command: put B in row 1 column 5")),
      replay(Array(50).fill(g)),
    ]);
    expect(r.interactions?.turns.length).toBe(50);
    expect(ep(r)).toMatchObject({ Aborted: 0, Lose: 1, "Main Score": 20 });
  });
});
