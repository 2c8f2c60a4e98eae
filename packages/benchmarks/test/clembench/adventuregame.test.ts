// adventuregame against the reference (clembench a717f238 master.py + if_wrapper.py, lark 1.1, clemcore
// 2c46b1cd): fixtures/adventuregame/make_fixtures.py recorded a command battery through the reference parser
// and scripted episodes through the reference game master and scorer.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import {
  AdventureInterpreter,
  AdventureInterpreterError,
  adventureExplorer,
  adventureOptimalPlayer,
  getGame,
  InstanceError,
  loadAdventureDefinitions,
  PyFloat,
  pyJsonDumps,
  ResourceError,
  parsePyJson,
  replay,
  runBenchmark,
} from "../../src/clembench/index.js";
import { dataDir, ep, gmEvents, play, spec } from "./helpers.js";

const DIR = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "adventuregame");
const readFixture = (name: string) => JSON.parse(gunzipSync(readFileSync(join(DIR, name))).toString("utf8"));

interface ParseRow {
  command: string;
  raw: Record<string, unknown>;
  raw_other_seeds?: Record<string, unknown>[];
  ok: boolean;
  result: unknown;
  fail: Record<string, unknown>;
}
interface EpisodeRow {
  name: string;
  experiment: number;
  instance: number;
  replies: string[];
  events: [string, string, string, unknown][];
  rounds: number[];
  scores_json: string;
}
const parses = readFixture("parses.json.gz") as ParseRow[];
const optimal = readFixture("optimal.json.gz") as {
  experiment: number;
  instance: number;
  episode_scores: Record<string, number | null>;
}[];
const episodes = readFixture("episodes.json.gz") as EpisodeRow[];

const game = getGame("adventuregame");
type ScoresShape = { "episode scores": Record<string, unknown> };

function interpreter(exp = 0, idx = 0): AdventureInterpreter {
  const s = spec("adventuregame", exp, idx);
  return new AdventureInterpreter(s.instance, loadAdventureDefinitions(dataDir, s.instance));
}

/** lark's error text lists expected terminals in hash order; compare the message with the list as a set. */
function larkMessage(text: string): { head: string; expected: string[] } {
  const [head, list = ""] = text.split("Expected one of: ");
  return {
    head,
    expected: [
      ...new Set(
        list
          .split("\n\t* ")
          .map((s) => s.trim())
          .filter(Boolean),
      ),
    ].sort(),
  };
}

/**
 * A feedback text with its listings in a fixed order: sentences sorted, and the items of "There are a X, a Y
 * and a Z." style lists (contents, passages, inventory, container contents) sorted inside their sentence.
 */
function canonText(text: string): string {
  return text
    .split(/(?<=[.?!])\s+/)
    .map((sentence) =>
      sentence.replace(
        /(a [^,.]+?(?:, a [^,.]+?)* and a [^,.]+?)( here| in the [a-z ]+| on the [a-z ]+)?\.$/,
        (_m, list: string, tail = "") =>
          `${list
            .split(/, | and /)
            .sort()
            .join(" & ")}${tail}.`,
      ),
    )
    .sort()
    .join(" | ");
}

/**
 * The reference keeps the world in a Python set, so listings in texts and list-valued log entries come in
 * hash order. Compare order-insensitively: strings as sorted words, arrays as sorted canonical items.
 */
function canon(v: unknown, key = ""): unknown {
  if (v instanceof PyFloat) return v.value;
  if (typeof v === "string") {
    if (key === "arg" && (v.startsWith("No terminal matches") || v.startsWith("Unexpected end-of-input")))
      return larkMessage(v);
    return canonText(v);
  }
  if (Array.isArray(v))
    return v
      .map((x) => canon(x))
      .map((x) => JSON.stringify(x))
      .sort();
  if (v && typeof v === "object")
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>)
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([k, x]) => [k, canon(x, k)]),
    );
  return v;
}

describe("adventuregame command parser (lark grammar from the definitions)", () => {
  const g = interpreter().grammar;
  it("parses the battery as the reference's lark parser does", () => {
    let ambiguous = 0;
    for (const row of parses) {
      const mine = g.parse(row.command.toLowerCase());
      const ref = "exception" in row.raw ? null : row.raw;
      const candidates = g.candidates(row.command.toLowerCase());
      if (candidates.length > 1) {
        // lark breaks these ties by hash order: every parse the reference produced under the sampled
        // seeds must be one of the tied candidates, and ours is one of them
        ambiguous++;
        for (const r of [ref, ...(row.raw_other_seeds ?? [])]) expect(candidates, row.command).toContainEqual(r);
        expect(candidates).toContainEqual(mine);
      } else {
        // where the grammar decides, the reference never varied and we agree
        expect(row.raw_other_seeds, row.command).toBeUndefined();
        expect(mine, row.command).toEqual(ref);
      }
    }
    expect(parses.length).toBeGreaterThan(1500);
    expect(ambiguous).toBeLessThan(100);
  });

  it("prefers the parse with the most prioritised terminals, and optional parts over longer things", () => {
    expect(g.parse("put the apple on the table")).toEqual({ type: "put", arg1: "apple", prep: "on", arg2: "table" });
    expect(g.parse("take wooden table")).toEqual({ type: "take", arg1_adjs: ["wooden"], arg1: "table" });
    expect(g.parse("go back kitchen")).toEqual({ type: "go", arg1: "kitchen" });
    expect(g.parse("put apple back on table")).toEqual({ type: "put", arg1: "apple", prep: "on", arg2: "table" });
    expect(g.parse("take apple out of fridge")).toEqual({
      type: "take",
      arg1: "apple",
      prep: "out of",
      arg2: "fridge",
    });
    expect(g.parse("go to living room now")).toEqual({ type: "unknown", arg1: "go" });
    expect(g.parse("take pillow, then go")).toBeNull();
    expect(g.parse("")).toBeNull();
  });
});

describe("adventuregame parsing phase (parse_action_input)", () => {
  it("gives the reference's feedback and fail record for every battery command", () => {
    const it0 = interpreter();
    let checked = 0;
    for (const row of parses) {
      if (it0.grammar.candidates(row.command.toLowerCase()).length > 1) continue;
      const r = it0.parseActionInput(row.command);
      expect(r.ok, row.command).toBe(row.ok);
      if (r.ok) expect(r.action, row.command).toEqual(row.result);
      else {
        expect(r.feedback, row.command).toBe(row.result);
        const { arg, ...rest } = r.fail;
        const { arg: refArg, ...refRest } = row.fail;
        expect(rest, row.command).toEqual(refRest);
        if (r.fail.fail_type === "lark_exception")
          expect(larkMessage(arg as string), row.command).toEqual(larkMessage(refArg as string));
        else expect(arg, row.command).toEqual(refArg);
      }
      checked++;
    }
    expect(checked).toBeGreaterThan(1500);
  });

  it("covers each parsing failure type with its feedback", () => {
    const it0 = interpreter();
    const fail = (cmd: string) => {
      const r = it0.parseActionInput(cmd);
      if (r.ok) throw new Error(`${cmd} parsed`);
      return [r.fail.fail_type, r.feedback];
    };
    expect(fail("take pillow, then go")).toEqual(["lark_exception", "I don't know what you mean."]);
    expect(fail("take")).toEqual(["malformed_command", "I don't know what you mean."]);
    expect(fail("eat apple")).toEqual(["undefined_action_verb", "I don't know how to interpret this 'eat' action."]);
    expect(fail("take unicorn")).toEqual(["undefined_repr_str", "I don't know what 'unicorn' means."]);
    expect(fail("take kitchen")).toEqual(["manipulating_room", "You can't take the 'kitchen'."]);
    expect(fail("open kitchen")).toEqual(["manipulating_room", "You don't need to open the 'kitchen'."]);
    expect(fail("take pillow from inventory")).toEqual([
      "taking_from_inventory",
      "You don't need to take things from your inventory.",
    ]);
    expect(fail("take book from kitchen")).toEqual(["other_room_argument", "You are not in a kitchen."]);
  });
});

describe("adventuregame resolution phase", () => {
  it("resolves actions with the reference's feedback and failure types", () => {
    // basic_easy instance 0 starts in the bedroom (bed, closed wardrobe... see the fixture episodes)
    const it0 = interpreter();
    const step = (cmd: string) => {
      const r = it0.processAction(cmd);
      return [r.info.fail_type ?? r.info.action_type, r.feedback];
    };
    expect(step("go bedroom")).toEqual(["going_to_current_room", "You are already in the bedroom."]);
    expect(step("go pantry")).toEqual(["no_exit_to", "You can't go to a pantry from here."]);
    expect(step("open table")).toEqual(["domain_trait_type_mismatch", "Table is not openable."]);
    expect(step("take book")).toEqual(["entity_not_accessible", "You can't see a book here."]);
    expect(step("take pillow")).toEqual(["take", "You take the pillow. In your inventory you have a pillow."]);
    // without the inventory limit, TAKE's precondition is (or (in ?e inventory) (at ?s ?r)): the pillow's
    // receptacle is now the inventory, which is no support (reference)
    expect(step("take pillow")).toEqual(["entity_state_mismatch", "The pillow is not on the inventory."]);
    // the reference lists the entity's facts in Python set order; ours follow insertion order
    expect(step("examine pillow")).toEqual(["examine", "The pillow is takeable. The pillow is in your inventory."]);
    expect(step("put pillow on pillow")).toEqual(["domain_trait_type_mismatch", "Pillow is not a receptacle."]);
    expect(step("done")).toEqual(["done", "You consider yourself done."]);
  });

  it("enforces the inventory limit of the invlimit variant", () => {
    const it2 = interpreter(2, 0);
    const held = ["take pillow", "go hallway", "go kitchen", "take plate", "put pillow on counter", "go hallway"];
    for (const c of [...held, "go broom closet", "take mop"])
      expect(it2.processAction(c).info.fail_type, c).toBeUndefined();
    expect(it2.worldState.has(["itemcount", "inventory", 2])).toBe(true);
    const r = it2.processAction("take broom");
    expect([r.info.fail_type, r.feedback]).toEqual([
      "inventory_limit_exceeded",
      "Your inventory can not hold more than two objects at the same time.",
    ]);
    // without the limit the same sequence takes the broom as a third object
    const it0 = interpreter(0, 0);
    for (const c of [...held, "go broom closet", "take mop"]) it0.processAction(c);
    expect(it0.processAction("take broom").feedback).toMatch(/^You take the broom\. In your inventory you have/);
  });

  it("rolls the world back after a tried plan", () => {
    const it0 = interpreter(1, 0);
    const before = it0.worldState.clone();
    const results = it0.executePlanSequence(["take pillow", "go hallway", "fly away", "go kitchen"]);
    expect(results.map((r) => r[2].fail_type ?? r[2].action_type)).toEqual(["take", "go", "undefined_action_verb"]);
    expect(it0.worldState.equals(before)).toBe(true);
  });

  it("refuses what the reference cannot resolve with a typed error", () => {
    const s = spec("adventuregame", 0, 0);
    const broken = {
      ...s.instance,
      initial_state: (s.instance.initial_state as string[]).filter((f) => !f.includes("apple")),
    };
    const it0 = new AdventureInterpreter(broken, loadAdventureDefinitions(dataDir, broken));
    expect(() => it0.processAction("take apple")).toThrow(AdventureInterpreterError);
    expect(() =>
      loadAdventureDefinitions(dataDir, { ...s.instance, action_definitions: ["witch_actions_core.json"] }),
    ).toThrow(ResourceError);
  });
});

describe("adventuregame episodes replay the reference event for event and score for score", () => {
  it("has the reference episodes (and compares listings order-insensitively, nothing else)", () => {
    expect(episodes.length).toBeGreaterThanOrEqual(20);
    const a =
      "You are in a hallway now. There are a mop, a broom and a potted plant. The mop is on the floor. There are passages to a bedroom and a kitchen here.";
    const b =
      "You are in a hallway now. There are a potted plant, a mop and a broom. The mop is on the floor. There are passages to a kitchen and a bedroom here.";
    expect(canonText(a)).toBe(canonText(b));
    expect(canonText(a)).not.toBe(canonText(a.replace("The mop is on the floor", "The floor is on the mop")));
    expect(canonText(a)).not.toBe(canonText(a.replace("a bedroom and", "a pantry and")));
  });
  for (const e of episodes) {
    it(e.name, async () => {
      const r = await play(game, [replay(e.replies)], e.experiment, e.instance);
      expect(r.error ?? "").toBe("");
      const events = (r.interactions?.turns ?? []).flat().map((x) => [x.from, x.to, x.action.type, x.action.content]);
      expect(events.length).toBe(e.events.length);
      for (const [i, ev] of events.entries()) expect(canon(ev), `${e.name} event ${i}`).toEqual(canon(e.events[i]));
      expect(r.interactions?.turns.map((t) => t.length)).toEqual(e.rounds);
      const ours = pyJsonDumps({
        "turn scores": r.scores?.["turn scores"],
        "episode scores": r.scores?.["episode scores"],
      });
      expect(ours).toBe(e.scores_json);
    });
  }
});

describe("adventuregame game master", () => {
  it("scores every basic-variant instance played with its optimal_commands as the reference does", async () => {
    // (the planning variant re-runs the remaining solution every turn; its first instances are in the episodes)
    const basic = optimal.filter((o) => o.experiment % 2 === 0);
    expect(basic).toHaveLength(64);
    let won = 0;
    for (const o of basic) {
      const s = spec("adventuregame", o.experiment, o.instance);
      const r = await play(game, [adventureOptimalPlayer(s.instance)], o.experiment, o.instance);
      const mine = Object.fromEntries(
        Object.entries(ep(r)).map(([k, v]) => [k, typeof v === "number" && Number.isNaN(v) ? null : v]),
      );
      expect(mine, `${s.experiment.name} ${o.instance}`).toEqual(o.episode_scores);
      won += mine.Success as number;
    }
    // the shipped solutions ignore the inventory limit in some invlimit instances, and miss in one hard one
    expect(won).toBe(58);
  });

  it("solves every experiment's first instance with the optimal-solution player", async () => {
    for (let exp = 0; exp < 8; exp++) {
      const s = spec("adventuregame", exp, 0);
      const r = await play(game, [adventureOptimalPlayer(s.instance)], exp, 0);
      const scores = ep(r);
      expect(scores["Main Score"], s.experiment.name).toBe(100);
      expect(scores.Success).toBe(1);
      expect(scores.Aborted).toBe(0);
      expect(scores.turns_over_par).toBe(1); // the closing "> done" is one turn over the optimal count
    }
  });

  it("aborts at the turn limit even with goals met, and on a missing '>' or plan", async () => {
    const limit = ep(await play(game, [replay(Array(50).fill("> examine bed"))]));
    expect(limit).toMatchObject({ Aborted: 1, turn_limit_loss: 1, "Request Count": 50 });
    expect(Number.isNaN(limit["Main Score"])).toBe(true);
    const noTag = await play(game, [replay(["take pillow"])]);
    expect(gmEvents(noTag, "invalid_format")).toEqual(["command_tag_missing"]);
    expect(ep(noTag)).toMatchObject({ Aborted: 1, "Violated Request Count": 1, "Parsed Request Count": 0 });
    expect(noTag.scores?.["turn scores"]["0"]).toMatchObject({ command_tag_missing: 1, hallucination: 0 });
    const noPlan = await play(game, [replay(["> take pillow"])], 1, 0);
    expect(gmEvents(noPlan, "invalid_format")).toEqual(["next_actions_missing"]);
  });

  it("scores an early DONE as a loss with a hallucinated finish", async () => {
    const r = ep(await play(game, [replay(["> done"])]));
    expect(r).toMatchObject({ Aborted: 0, Lose: 1, Success: 0, "Main Score": 0, hallucination_count: 1 });
  });

  it("is won from the game texts alone by the explorer player, through runBenchmark with results on disk", async () => {
    const dir = mkdtempSync(join(tmpdir(), "adventuregame-"));
    try {
      const run = await runBenchmark({
        games: ["adventuregame"],
        players: [adventureExplorer()],
        filter: { limitPerExperiment: 2 },
        resultsDir: dir,
        concurrency: 2,
      });
      expect(run.table.rows[0].games.adventuregame).toMatchObject({ played: 100, quality: 100, n: 16 });
      const exps = readdirSync(join(dir, "programmatic", "adventuregame")).filter((e) => !e.endsWith(".json"));
      expect(exps).toHaveLength(8);
      const episode = join(dir, "programmatic", "adventuregame", exps[0], "instance_00000");
      const scores = parsePyJson(readFileSync(join(episode, "scores.json"), "utf8")) as ScoresShape;
      expect(scores["episode scores"]["Main Score"]).toBe(100);
      const interactions = JSON.parse(readFileSync(join(episode, "interactions.json"), "utf8"));
      expect(interactions.adventure_info).toMatchObject({ max_turns: 50, goal_count: 3 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("ends without scores where the reference crashes: a first planning reply '> done' leaves no plan", async () => {
    const r = await play(game, [replay(["> done"])], 1, 0);
    expect(r.scores).toBeNull();
    expect(r.error).toMatch(/no plan recorded/);
  });

  it("refuses unsupported instances with a typed error", async () => {
    const s = spec("adventuregame", 0, 0);
    const master = game.createMaster(s.experiment, [replay([])], { dataDir });
    await expect(master.setup({ ...s.instance, variant: "witch" })).rejects.toThrow(InstanceError);
    const other = game.createMaster(s.experiment, [replay([])], { dataDir });
    await expect(other.setup({ ...s.instance, entity_definitions: ["witch_entities.json"] })).rejects.toThrow(
      ResourceError,
    );
  });
});
