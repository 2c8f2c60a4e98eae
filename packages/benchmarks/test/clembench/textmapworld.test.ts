import { describe, expect, it } from "vitest";
import {
  depthFirstExplorer,
  loopIdentification,
  pyLiteralEval,
  textmapworld,
  textmapworldSpecificRoom,
} from "../../src/clembench/index.js";
import { ep, play, sentTo, spec } from "./helpers.js";

describe("textmapworld helpers", () => {
  it("parses the instances' Python literals (tuples, single quotes, None)", () => {
    expect(pyLiteralEval("[('Bedroom', ['east', 'north']), ('Balcony', ['west'])]")).toEqual([
      ["Bedroom", ["east", "north"]],
      ["Balcony", ["west"]],
    ]);
    expect(pyLiteralEval("{'node': 'A', 'x': (1, 2), 'y': None, 'z': True}")).toEqual({
      node: "A",
      x: [1, 2],
      y: null,
      z: true,
    });
    expect(pyLiteralEval('["it\'s", "a"]')).toEqual(["it's", "a"]);
    expect(() => pyLiteralEval("[1, 2")).toThrow();
  });
  it("a loop is fewer than 3 distinct rooms among the last 4", () => {
    expect(loopIdentification(["a", "b", "a", "b"])).toBe(true);
    expect(loopIdentification(["a", "b", "c", "b"])).toBe(false);
  });
});

describe("textmapworld episodes", () => {
  it("first prompt names the start room and its directions", async () => {
    const s = spec("textmapworld");
    const r = await play(textmapworld, [depthFirstExplorer()]);
    expect(sentTo(r, "Player 1")[0]).toContain(
      "Let us start. You are in the Guest room. Currently available directions: west.",
    );
    expect(s.instance.Current_Position).toBe("Guest room");
  });
  it("the depth-first explorer visits every room of every experiment's first map and says DONE", async () => {
    for (let e = 0; e < 5; e++) {
      const r = await play(textmapworld, [depthFirstExplorer()], e, 0);
      const s = ep(r);
      expect(s).toMatchObject({ Aborted: 0, Success: 1, exploration: 100 });
      expect(s["Main Score"] as number).toBeGreaterThan(0);
    }
  });
  it("specificroom: stops in the target room → 100", async () => {
    for (const e of [0, 1, 2]) {
      const target = spec("textmapworld_specificroom", e, 3).instance.Specific_Room as string;
      const r = await play(textmapworldSpecificRoom, [depthFirstExplorer(target)], e, 3);
      expect(ep(r)).toMatchObject({ Aborted: 0, Success: 1, "Main Score": 100 });
    }
  });
  it("never saying DONE (the 20-round limit) is scored as aborted", async () => {
    const r = await play(
      textmapworld,
      [depthFirstExplorer("nowhere")].map((b) => ({ ...b, modelName: "x", respond: async () => "GO: west" })),
    );
    expect(ep(r).Aborted).toBe(1);
    expect(r.interactions?.turns.length).toBe(20);
  });
});

describe("graph edit distance (textmapworld_graphreasoning)", () => {
  it("equals networkx.graph_edit_distance on 60 random small graphs", async () => {
    const { readFileSync } = await import("node:fs");
    const { join, dirname } = await import("node:path");
    const { fileURLToPath } = await import("node:url");
    const { graphEditDistance, makeGraph } = await import("../../src/clembench/index.js");
    const file = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "reference", "ged.json");
    const cases = JSON.parse(readFileSync(file, "utf8")) as {
      g1: [string[], [string, string][]];
      g2: [string[], [string, string][]];
      ged: number;
    }[];
    for (const c of cases) expect(graphEditDistance(makeGraph(...c.g1), makeGraph(...c.g2))).toBe(c.ged);
  });
});

describe("textmapworld_graphreasoning episodes", () => {
  it("the JSON-answering explorer visits every room and its graphs are scored", async () => {
    const { graphReasoningExplorer, textmapworldGraphReasoning } = await import("../../src/clembench/index.js");
    const r = await play(textmapworldGraphReasoning, [graphReasoningExplorer()]);
    const s = ep(r);
    expect(s).toMatchObject({ Aborted: 0, Success: 1, exploration: 100 });
    expect(s.graph_similarity as number).toBeGreaterThan(0);
    expect(Object.keys(s)).toContain("graph_similarity");
  });
});
