import { describe, expect, it } from "vitest";
import { gridComparingMatchItPlayer, matchItFirstWord, matchitAscii } from "../../src/clembench/index.js";
import { ep, play, sentTo, spec } from "./helpers.js";

describe("matchit_ascii", () => {
  it("reads the first word of the first non-empty line", () => {
    expect(matchItFirstWord("\n\nANSWER: yes\nmore")).toBe("ANSWER:");
    expect(matchItFirstWord("ANSWER:yes")).toBe("ANSWER:yes");
  });
  it("grid-comparing players decide right on same and different grids (Main Score 100)", async () => {
    for (const e of [0, 3]) {
      const r = await play(matchitAscii, [gridComparingMatchItPlayer(), gridComparingMatchItPlayer()], e, 0);
      expect(ep(r)).toMatchObject({ Aborted: 0, Success: 1, "Main Score": 100, "Player Score": 100 });
      expect(r.interactions?.turns.length).toBe(5);
    }
  });
  it("each player's first prompt holds its own grid", async () => {
    const s = spec("matchit_ascii", 3, 0);
    const r = await play(matchitAscii, [gridComparingMatchItPlayer(), gridComparingMatchItPlayer()], 3, 0);
    expect(sentTo(r, "Player 1")[0]).toBe(
      (s.experiment.initial_prompt as string).replace("$GRID$", s.instance.grid_a as string),
    );
    expect(sentTo(r, "Player 2")[0]).toBe(
      (s.experiment.initial_prompt as string).replace("$GRID$", s.instance.grid_b as string),
    );
  });
});
