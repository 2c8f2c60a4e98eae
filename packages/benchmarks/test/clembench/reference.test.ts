// Cross-check against the reference Python game masters: the same scripted replies were played through
// clembench a717f238 on clemcore 2c46b1cd (fixtures/reference/run_reference.py); every event the GM logged
// and the scores it computed must come out identical here.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { getGame, pyJsonDumps, replay } from "../../src/clembench/index.js";
import { play } from "./helpers.js";

const DIR = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "reference");
interface Case {
  name: string;
  game: string;
  experiment: number;
  instance: number;
  replies: Record<string, string[]>;
}
interface RefResult {
  name: string;
  events: [string, string, string, unknown][];
  rounds: number[];
  scores_json: string;
}
const cases = JSON.parse(readFileSync(join(DIR, "cases.json"), "utf8")) as Case[];
const results = new Map(
  (JSON.parse(readFileSync(join(DIR, "reference-results.json"), "utf8")) as RefResult[]).map((r) => [r.name, r]),
);

/** Python's json.dumps(x) of a NaN-free-or-"NaN"-marked structure, as the fixture stores events. */
function normalise(v: unknown): unknown {
  if (typeof v === "number" && Number.isNaN(v)) return "NaN";
  if (Array.isArray(v)) return v.map(normalise);
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, normalise(x)]));
  return v;
}

describe("game masters replay the reference episodes event for event and score for score", () => {
  it("has a reference result for every case", () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
    for (const c of cases) expect(results.has(c.name)).toBe(true);
  });
  for (const c of cases) {
    it(c.name, async () => {
      const ref = results.get(c.name)!;
      const def = getGame(c.game);
      const backends = Array.from({ length: def.players }, (_, i) => replay(c.replies[`Player ${i + 1}`] ?? []));
      const r = await play(def, backends, c.experiment, c.instance);
      expect(r.error ?? "").not.toMatch(/episode failed/);
      const events = (r.interactions?.turns ?? []).flat().map((e) => [e.from, e.to, e.action.type, e.action.content]);
      expect(normalise(events)).toEqual(ref.events);
      expect(r.interactions?.turns.map((t) => t.length)).toEqual(ref.rounds);
      if (ref.scores_json.startsWith("error")) {
        expect(r.scores).toBeNull();
      } else {
        const ours = pyJsonDumps({
          "turn scores": r.scores?.["turn scores"],
          "episode scores": r.scores?.["episode scores"],
        });
        expect(ours).toBe(ref.scores_json);
      }
    });
  }
});
