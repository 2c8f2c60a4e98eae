import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  addSpaceAfterComma,
  ClueGiver,
  CodenamesRuleViolation,
  codenames,
  codenamesCluegiver,
  codenamesGuesser,
  createCodenames,
  type EpisodeResult,
  type EpisodeSpec,
  EpisodeSequencer,
  episodeOutcome,
  GAMES,
  Guesser,
  getGame,
  InstanceError,
  listEpisodes,
  loadCodenamesInstances,
  loadWordNetLemmatizer,
  parseFlags,
  parsePyJson,
  type PlayerBackend,
  playEpisode,
  PyFloat,
  pyJsonDumps,
  pyMean,
  pySample,
  rationalToDouble,
  ResourceError,
  replay,
  runBenchmark,
  templateSubstitute,
} from "../../src/clembench/index.js";
import { PythonRandom } from "../../src/tau2/python-random.js";
import { dataDir, ep, gmEvents, sentTo } from "./helpers.js";

const here = dirname(fileURLToPath(import.meta.url));
const fixture = (name: string) => readFileSync(join(here, "fixtures", "codenames", name), "utf8");

interface GoldenEpisode {
  label: string;
  file: "instances" | "generous";
  experiment: string;
  experiment_index: number;
  instance_index: number;
  game_id: number;
  mode: "team" | "opponent" | "assassin";
  cluegiver_overrides: Record<string, string>;
  guesser_overrides: Record<string, string>;
  replies: { "Player 1": string[]; "Player 2": string[] };
  players: Record<string, unknown>;
  turns_json: string;
  keys_json: string;
  scores_json: string;
}

const golden = parsePyJson(fixture("episodes.json")) as GoldenEpisode[];

function loadFile(file: "instances" | "generous") {
  return loadCodenamesInstances(file === "instances" ? "instances" : "generous_instances", dataDir);
}
const FILES = { instances: loadFile("instances"), generous: loadFile("generous") };

function specOf(file: "instances" | "generous", e: number, i: number): EpisodeSpec {
  const exp = FILES[file].experiments[e];
  return listEpisodes("codenames", FILES[file], { experiments: [exp.name] })[i];
}

const keyed = (o: Record<string, string>) => Object.fromEntries(Object.entries(o).map(([k, v]) => [Number(k), v]));

/** Turns as clemcore stores them, without the timestamps. */
function turnsJson(r: EpisodeResult): string {
  const turns = (r.interactions?.turns ?? []).map((t) => t.map(({ timestamp: _t, ...rest }) => rest));
  return pyJsonDumps(turns);
}

function keysJson(r: EpisodeResult): string {
  const { meta: _m, player_models: _pm, players: _p, turns: _t, ...keys } = r.interactions ?? ({} as never);
  return pyJsonDumps(keys);
}

function scoresJson(r: EpisodeResult): string {
  if (!r.scores) throw new Error(`no scores: ${r.error}`);
  return pyJsonDumps({ "turn scores": r.scores["turn scores"], "episode scores": r.scores["episode scores"] });
}

/** Play the golden episodes in order on one fresh definition (one `random.seed(42)`), as one benchmark run. */
async function playGolden(makePlayers: (g: GoldenEpisode) => PlayerBackend[]): Promise<EpisodeResult[]> {
  const def = createCodenames();
  const out: EpisodeResult[] = [];
  for (const g of golden)
    out.push(await playEpisode(def, specOf(g.file, g.experiment_index, g.instance_index), makePlayers(g), { dataDir }));
  return out;
}

describe("codenames against the reference implementation", () => {
  it("ships the v2.0 instance set (13 experiments × 10, strict) and the generous variant", () => {
    expect(FILES.instances.experiments.map((e) => e.game_instances?.length)).toEqual(new Array(13).fill(10));
    for (const e of FILES.instances.experiments)
      expect(Object.entries(e.flags as Record<string, boolean>).filter(([, on]) => on)).toEqual([
        ["STRIP WORDS", true],
      ]);
    expect(Object.values(FILES.generous.experiments[0].flags as Record<string, boolean>).every(Boolean)).toBe(true);
  });

  it("covers every outcome and abort cause in the golden run", () => {
    expect(golden.map((g) => g.label)).toContain("win");
    const outcomes = golden.map((g) => {
      const s = parsePyJson(g.scores_json) as { "episode scores": Record<string, number> };
      return s["episode scores"].Aborted ? "aborted" : s["episode scores"].Success ? "success" : "lose";
    });
    expect(outcomes.filter((o) => o === "aborted").length).toBe(17);
    expect(outcomes.filter((o) => o === "lose").length).toBe(2);
    expect(outcomes.filter((o) => o === "success").length).toBe(5);
  });

  it("replays the recorded replies to byte-identical turns, end keys and scores.json (seeded opponent included)", async () => {
    const results = await playGolden((g) => [replay(g.replies["Player 1"]), replay(g.replies["Player 2"])]);
    results.forEach((r, i) => {
      const g = golden[i];
      expect(r.error, g.label).toBeUndefined();
      expect(turnsJson(r), g.label).toBe(g.turns_json);
      expect(keysJson(r), g.label).toBe(g.keys_json);
      expect(scoresJson(r), g.label).toBe(g.scores_json);
      expect(r.interactions?.players["Player 1"].game_role).toBe("ClueGiver");
      expect(r.interactions?.players["Player 2"].game_role).toBe("Guesser");
    });
  });

  it("the scripted players make exactly the recorded replies", async () => {
    const results = await playGolden((g) => [
      codenamesCluegiver(g.mode, { overrides: keyed(g.cluegiver_overrides) }),
      codenamesGuesser({ overrides: keyed(g.guesser_overrides) }),
    ]);
    results.forEach((r, i) => {
      const replies = (r.interactions?.turns ?? [])
        .flat()
        .filter((e) => e.to === "GM" && e.from !== "GM")
        .map((e) => [e.from, e.action.content]);
      const expected = [...golden[i].replies["Player 1"].map((c) => ["Player 1", c])];
      expect(
        replies.filter(([p]) => p === "Player 1"),
        golden[i].label,
      ).toEqual(expected);
      expect(
        replies.filter(([p]) => p === "Player 2").map(([, c]) => c),
        golden[i].label,
      ).toEqual(golden[i].replies["Player 2"]);
    });
  });

  it("reproduces a whole reference benchmark run (130 instances in order, one seed) through the runner", async () => {
    const ref = JSON.parse(fixture("benchmark-run.json")) as {
      experiment: string;
      game_id: number;
      opponent_revealed: string[];
      episode_scores_json: string;
    }[];
    const check = (results: EpisodeResult[]) => {
      expect(results).toHaveLength(130);
      expect(ref).toHaveLength(130);
      results.forEach((r, i) => {
        expect([r.experiment, r.gameId]).toEqual([ref[i].experiment, ref[i].game_id]);
        expect(gmEvents(r, "opponent revealed").map((c) => (c as { word: string }).word)).toEqual(
          ref[i].opponent_revealed,
        );
        expect(pyJsonDumps(r.scores?.["episode scores"])).toBe(ref[i].episode_scores_json);
      });
    };
    codenames.resetRandom();
    check(
      (await runBenchmark({ games: [codenames], players: [codenamesCluegiver(), codenamesGuesser()], dataDir }))
        .results,
    );

    // concurrent episodes whose players answer after varying delays still draw in benchmark order
    let calls = 0;
    const slow = (inner: PlayerBackend): PlayerBackend => ({
      modelName: inner.modelName,
      async respond(messages, context) {
        const ticks = (calls++ * 7) % 5;
        for (let t = 0; t < ticks; t++) await new Promise((r) => setImmediate(r));
        return inner.respond(messages, context);
      },
    });
    // the previous run left the shared state elsewhere; runBenchmark's startRun reseeds it
    for (let i = 0; i < 5; i++) codenames.rng.getrandbits(32);
    const concurrent = await runBenchmark({
      games: [codenames],
      // without overrides the scripted players only read the prompt, so one pair serves all episodes
      players: [slow(codenamesCluegiver()), slow(codenamesGuesser())],
      dataDir,
      concurrency: 4,
    });
    check(concurrent.results);
  });

  it("depends on the episode order through the shared random state, and resetRandom restarts it", async () => {
    const s = specOf("instances", 5, 0); // opponent_easy: one opponent word per round
    const play = (def: ReturnType<typeof createCodenames>) =>
      playEpisode(def, s, [codenamesCluegiver(), codenamesGuesser()], { dataDir });
    const def = createCodenames();
    const first = gmEvents(await play(def), "opponent revealed");
    const second = gmEvents(await play(def), "opponent revealed");
    expect(first.length).toBe(4);
    expect(second).not.toEqual(first); // same board, later in the run: other draws
    def.resetRandom();
    expect(gmEvents(await play(def), "opponent revealed")).toEqual(first);
    expect(gmEvents(await play(createCodenames()), "opponent revealed")).toEqual(first);
  });
});

describe("codenames outcomes with the scripted players", () => {
  const run = (mode: "team" | "opponent" | "assassin", e: number, i = 0) =>
    playEpisode(createCodenames(), specOf("instances", e, i), [codenamesCluegiver(mode), codenamesGuesser()], {
      dataDir,
    });

  it("wins: every team word revealed, Main Score 100", async () => {
    const r = await run("team", 4); // opponent_none: the opponent never moves
    expect(episodeOutcome(r.scores)).toBe("success");
    const s = ep(r);
    expect(s["Main Score"]).toBe(100);
    expect(s["Episode Recall"]).toBe(1);
    expect(s["Number of turns"]).toBe(6); // 5 rounds; the reference logs current_round + 1 after the increment
    expect(s.Efficiency).toBe(0.75); // 9 guesses / 6 turns / 2
    expect(s["Request Success Ratio"]).toBe(1);
    expect(gmEvents(r, "game end")).toEqual(["team has won", "team has won"]);
  });

  it("loses by assassin: Lose 1, Game ended through assassin 1, Main Score 0", async () => {
    const r = await run("assassin", 1); // risk_high: 5 kill words
    expect(episodeOutcome(r.scores)).toBe("lose");
    const s = ep(r);
    expect([s.Lose, s["Game ended through assassin"], s["Main Score"]]).toEqual([1, 1, 0]);
    expect(sentTo(r, "Player 1")).toHaveLength(1);
  });

  it("loses to the opponent when its words run out", async () => {
    const r = await run("opponent", 6); // opponent_difficult: two opponent words per round
    expect(episodeOutcome(r.scores)).toBe("lose");
    expect(ep(r)["Game ended through assassin"]).toBe(0);
    expect(gmEvents(r, "game end")).toEqual(["opponent has won"]);
  });

  it("aborts on the first violation in the strict v2.0 experiments: Main Score NaN", async () => {
    const r = await playEpisode(
      createCodenames(),
      specOf("instances", 0, 0),
      [codenamesCluegiver("team", { overrides: { 0: "CLUE: rocket\nTARGETS: rocket, moon" } }), codenamesGuesser()],
      { dataDir },
    );
    expect(episodeOutcome(r.scores)).toBe("aborted");
    const s = ep(r);
    expect(Number.isNaN(s["Main Score"])).toBe(true);
    expect([s["Violated Request Count"], s["Request Count"], s["Parsed Request Count"]]).toEqual([1, 1, 0]);
    expect((gmEvents(r, "validation error")[0] as { type: string }).type).toBe("target is hallucination");
  });

  it("writes scores.json with the game's metrics in the reference order", async () => {
    const r = await run("team", 5);
    expect(Object.keys(r.scores?.["episode scores"] ?? {})).toEqual([
      "experiment variable",
      "experiment name",
      "Cluegiver strip words",
      "Guesser strip words",
      "Average Cluegiver Number of Targets",
      "Average Cluegiver Team Precision",
      "Average Cluegiver Team Recall",
      "Average Cluegiver Team F1",
      "Average Guesser Number of Guesses",
      "Average Guesser Number of Revealed Words",
      "Average Guesser Number of Unrevealed Guesses",
      "Average Guesser Target Precision",
      "Average Guesser Target Recall",
      "Average Guesser Target F1",
      "Average Guesser Team Precision",
      "Average Guesser Team Recall",
      "Average Guesser Team F1",
      "Aborted",
      "Lose",
      "Success",
      "Game ended through assassin",
      "Episode Recall",
      "Episode Negative Recall",
      "Number of turns",
      "Efficiency",
      "Request Count",
      "Parsed Request Count",
      "Violated Request Count",
      "Request Success Ratio",
      "Main Score",
    ]);
    expect(r.scores?.["episode scores"]["Average Cluegiver Team Precision"]).toBeInstanceOf(PyFloat);
    expect(r.scores?.["episode scores"].Played).toBeUndefined();
  });

  it("is registered and runs through the runner, writing interactions.json and scores.json", async () => {
    expect(getGame("codenames")).toBe(codenames);
    expect(GAMES.codenames.roles).toEqual(["Cluegiver", "Guesser"]);
    const dir = mkdtempSync(join(tmpdir(), "codenames-"));
    try {
      codenames.resetRandom();
      const summary = await runBenchmark({
        games: ["codenames"],
        players: [codenamesCluegiver(), codenamesGuesser()],
        resultsDir: dir,
        modelDir: "scripted",
        filter: { experiments: ["opponent_none"], limitPerExperiment: 1 },
      });
      expect(summary.results).toHaveLength(1);
      const ep0 = join(dir, "scripted", "codenames", "opponent_none", "instance_00000");
      expect(existsSync(join(ep0, "interactions.json"))).toBe(true);
      const scores = parsePyJson(readFileSync(join(ep0, "scores.json"), "utf8")) as {
        "episode scores": Record<string, number>;
      };
      expect(scores["episode scores"]["Main Score"]).toBe(100);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("codenames reply rules", () => {
  const flags = parseFlags(FILES.instances.experiments[0].flags, "risk_low");
  const lem = loadWordNetLemmatizer(dataDir);
  const remaining = ["witch", "board", "glass", "mouse", "bed", "moon"];
  const violation = (f: () => void) => {
    try {
      f();
    } catch (e) {
      if (e instanceof CodenamesRuleViolation) return e.attributes;
      throw e;
    }
    return null;
  };
  const cg = () => new ClueGiver(replay([]), flags, lem);
  const clue = (reply: string, previous: string[] = []) =>
    violation(() => cg().validateResponse(reply, previous, remaining));

  it("inserts a space after commas not followed by whitespace", () => {
    expect(addSpaceAfterComma("a,b, c,\nd,")).toBe("a, b, c,\nd,");
  });

  it("accepts a well-formed clue; strips quotes and dots (STRIP WORDS) and lowercases", () => {
    expect(clue("CLUE: broom\nTARGETS: witch, board")).toBeNull();
    const p = cg();
    p.parseResponse("CLUE: 'Broom.'\nTARGETS: <Witch>,board.", remaining);
    expect([p.clue, p.targets, p.numberOfTargets]).toEqual(["broom", ["witch", "board"], 2]);
    expect(p.recoverUtterance()).toBe("CLUE: broom\nTARGETS: witch, board");
  });

  it("rejects clues sharing a WordNet noun lemma with a hidden word (morphy: plurals and irregular forms)", () => {
    expect(clue("CLUE: witches\nTARGETS: witch")?.similar_board_word).toBe("witch");
    expect(clue("CLUE: mice\nTARGETS: witch")?.similar_board_word).toBe("mouse");
    expect(clue("CLUE: glasses\nTARGETS: witch")?.type).toBe("clue is morphologically related to word on the board");
    // a board word itself is caught by the lemma check first (ClueOnBoardError is unreachable, as upstream)
    expect(clue("CLUE: Moon\nTARGETS: witch")?.type).toBe("clue is morphologically related to word on the board");
    // derivations are not noun inflections: allowed
    expect(clue("CLUE: witchcraft\nTARGETS: witch")).toBeNull();
  });

  it("reports each format violation with the reference's type and message", () => {
    expect(clue("CLUE: a\nTARGETS: witch\nthanks")?.type).toBe("rambling error");
    expect(clue("Clue: a\nTARGETS: witch")?.message).toBe("Your clue did not start with the correct prefix (CLUE: ).");
    expect(clue("CLUE: a\nTARGET: witch")?.message).toBe(
      "Your targets did not start with the correct prefix (TARGETS: ).",
    );
    expect(clue("CLUE: two words\nTARGETS: witch")?.type).toBe("clue contains spaces");
    const n = clue("CLUE: magic, 2\nTARGETS: witch");
    expect([n?.type, n?.player]).toEqual(["clue line contains the number of targets", "Guesser"]);
    expect(clue("CLUE: a\nTARGETS: witch, witch")?.type).toBe("target appears more than once in utterance");
    expect(clue("CLUE: a\nTARGETS: wizard")?.type).toBe("target is hallucination");
    expect(clue("CLUE: a\nTARGETS: sun", ["sun"])?.type).toBe("target was already guessed");
  });

  it("without STRIP WORDS a clue with punctuation is refused", () => {
    const strict = { ...flags, "STRIP WORDS": false };
    const p = new ClueGiver(replay([]), strict, lem);
    expect(violation(() => p.validateResponse("CLUE: broom.\nTARGETS: witch", [], remaining))?.type).toBe(
      "clue contains non-alphabetical characters",
    );
  });

  it("checks guesses: count, clue, hidden, duplicates, prefix, one line", () => {
    const g = (reply: string, allowed = 2, previous: string[] = []) =>
      violation(() => new Guesser(replay([]), flags).validateResponse(reply, previous, remaining, allowed, "broom"));
    expect(g("GUESS: witch, board")).toBeNull();
    expect(g("GUESS: Witch., 'board'")).toBeNull();
    expect(g("GUESS: witch, board, bed")?.message).toBe(
      "You made too many guesses (3). You are only allowed to make 2 guesses!",
    );
    expect(g("GUESS: broom")?.type).toBe("guess is clue word");
    expect(g("GUESS: sun", 2, ["sun"])?.type).toBe("guess was already guessed");
    expect(g("GUESS: wizard")?.type).toBe("guess word is hallucination");
    expect(g("GUESS: witch,witch")?.type).toBe("guess appears more than once in utterance");
    expect(g("guess: witch")?.type).toBe("prefix error");
    expect(g("GUESS: witch\nGUESS: bed")?.type).toBe("rambling error");
  });

  it("validates experiment flags and templates with typed errors", () => {
    expect(() => parseFlags({ "STRIP WORDS": true }, "x")).toThrow(InstanceError);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a Python string.Template placeholder
    expect(templateSubstitute("$a and ${b} cost $$1.", { a: "x", b: "y" })).toBe("x and y cost $1.");
    expect(() => templateSubstitute("$missing", {})).toThrow(ResourceError);
    expect(() => templateSubstitute("a $ b", {})).toThrow(ResourceError);
  });

  it("refuses a board word the shipped WordNet table does not cover", async () => {
    const s = specOf("instances", 0, 0);
    const board = [...(s.instance.board as string[])];
    board[0] = "zzzunknownword";
    const bad = { ...s, instance: { ...s.instance, board } };
    const r = await playEpisode(createCodenames(), bad, [codenamesCluegiver(), codenamesGuesser()], { dataDir });
    expect(r.scores).toBeNull();
    expect(r.error).toMatch(/board word "zzzunknownword" is not covered/);
  });
});

describe("codenames episode order", () => {
  it("lets an episode play only after every earlier one finished; reset releases waiters", async () => {
    const seq = new EpisodeSequencer();
    const [a, b, c] = [seq.take(), seq.take(), seq.take()];
    const order: number[] = [];
    const pc = seq.waitTurn(c).then(() => order.push(c));
    const pb = seq.waitTurn(b).then(() => order.push(b));
    await seq.waitTurn(a);
    seq.finish(c); // c is done early (e.g. its setup failed): it does not open b's turn
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual([]);
    seq.finish(a);
    await pb;
    expect(order).toEqual([b]);
    seq.finish(b); // b done: c's waiter runs, and the next ticket may start at once
    await pc;
    expect(order).toEqual([b, c]);
    await seq.waitTurn(seq.take());
    const e = seq.take();
    const waiting = seq.waitTurn(e + 5);
    seq.reset();
    await waiting;
    expect(seq.take()).toBe(0);
  });
});

describe("codenames Python compatibility helpers", () => {
  it("lemmatizes like NLTK 3.8 WordNetLemmatizer on WordNet 3.0 wherever the clue check can tell", () => {
    const nltk = JSON.parse(fixture("lemmas.json")) as Record<string, string>;
    const lem = loadWordNetLemmatizer(dataDir);
    const boardLemmas = new Set([...lem.boardWords].map((w) => nltk[w]));
    let compared = 0;
    const wrong: string[] = [];
    for (const [word, expected] of Object.entries(nltk)) {
      const got = lem.lemmatize(word);
      if (lem.boardWords.has(word) || boardLemmas.has(expected) || boardLemmas.has(got)) {
        compared++;
        if (got !== expected) wrong.push(`${word}: ${got} != ${expected}`);
      }
    }
    expect(compared).toBeGreaterThan(3000);
    expect(wrong).toEqual([]);
    expect(lem.lemmatize("mice")).toBe("mouse"); // noun.exc
    expect(lem.lemmatize("witchsss")).toBe("witch"); // morphy keeps rewriting until a lemma is found
  });

  it("draws random.sample exactly as CPython after random.seed(42)", () => {
    const draws = JSON.parse(fixture("random.json")) as { n: number; k: number; sample: string[] }[];
    const rng = new PythonRandom(42);
    for (const d of draws)
      expect(
        pySample(
          rng,
          Array.from({ length: d.n }, (_, j) => `w${j}`),
          d.k,
        ),
      ).toEqual(d.sample);
    expect(() => pySample(rng, ["a"], 2)).toThrow(RangeError);
  });

  it("computes statistics.mean exactly, keeping Python's int/float distinction", () => {
    expect(pyMean([1, 2, 3])).toBe(2);
    expect(pyMean([1, 2])).toEqual(new PyFloat(1.5));
    expect(pyMean([new PyFloat(1), 1])).toEqual(new PyFloat(1));
    // exact: statistics.mean([0.1, 0.1, 0.1]) == 0.1, while (0.1 + 0.1 + 0.1) / 3 == 0.10000000000000002
    expect((0.1 + 0.1 + 0.1) / 3).not.toBe(0.1);
    expect((pyMean([new PyFloat(0.1), new PyFloat(0.1), new PyFloat(0.1)]) as PyFloat).value).toBe(0.1);
    expect((pyMean([new PyFloat(0.1), new PyFloat(0.2)]) as PyFloat).value).toBe(0.15000000000000002);
    expect(rationalToDouble(1n, 3n)).toBe(1 / 3);
    expect(rationalToDouble(-2n, 4n)).toBe(-0.5);
  });
});
