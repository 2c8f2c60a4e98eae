import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  checkClue,
  NLTK_ENGLISH_STOPWORDS,
  parseTabooGuess,
  replay,
  reversingDescriber,
  reversingGuesser,
  snowballStem,
  taboo,
} from "../../src/clembench/index.js";
import { dataDir, ep, gmEvents, play, sentTo, spec } from "./helpers.js";

const s0 = spec("taboo"); // high_en/0: winter; cold, snow, season

describe("taboo stemming and stop words", () => {
  it("matches NLTK's SnowballStemmer('english') on every taboo word and a wordle sample", () => {
    const here = dirname(fileURLToPath(import.meta.url));
    const stems = JSON.parse(readFileSync(join(here, "fixtures", "nltk-stems.json"), "utf8")) as Record<string, string>;
    const mismatches = Object.entries(stems).filter(([w, s]) => snowballStem(w) !== s);
    expect(Object.keys(stems).length).toBeGreaterThan(2000);
    expect(mismatches).toEqual([]);
  });
  it("uses NLTK's English stop word list (179 classic entries + 19 later contractions)", () => {
    expect(NLTK_ENGLISH_STOPWORDS.size).toBe(198);
    const noApostrophe = [...NLTK_ENGLISH_STOPWORDS].filter((w) => !w.includes("'"));
    expect(noApostrophe.length).toBe(153);
    expect(NLTK_ENGLISH_STOPWORDS.has("the")).toBe(true);
    expect(NLTK_ENGLISH_STOPWORDS.has("cold")).toBe(false);
  });
});

describe("taboo clue check", () => {
  it("flags a morphological variant of the target or a related word", () => {
    // NLTK stems: winters → winter, seasonal → season, snowing → snow; but wintery → winteri (allowed)
    const r = checkClue("CLUE: Winters, seasonal snowing", "winter", ["cold", "snow", "season"]);
    expect(r.errors.map((e) => e.type)).toEqual([0, 1, 1]);
    expect(checkClue("CLUE: wintery weather", "winter", ["cold", "snow", "season"]).errors).toEqual([]);
    expect(checkClue("CLUE: it snows", "winter", ["cold", "snow", "season"]).errors[0].message).toBe(
      "Related word 'snow' (stem=snow) is similar to clue word 'snows' (stem=snow)",
    );
  });
  it("removes punctuation before matching, so hyphenated spellings are caught", () => {
    expect(checkClue("CLUE: w-i-n-t-e-r!", "winter", ["cold", "snow", "season"]).errors.length).toBe(1);
  });
  it("ignores stop words and accepts other clues", () => {
    // "coldest" keeps its stem "coldest" in Snowball, so it is allowed
    expect(
      checkClue("CLUE: The coldest... no, the chilliest time", "winter", ["cold", "snow", "season"]).errors,
    ).toEqual([]);
    expect(checkClue("CLUE: it is not cold", "winter", ["cold", "snow", "season"]).errors.length).toBe(1);
    expect(checkClue("CLUE: the chilly months of the year", "winter", ["cold", "snow", "season"]).errors).toEqual([]);
  });
  it("reads a guess without the tag, punctuation or case", () => {
    expect(parseTabooGuess("GUESS: Winter.")).toBe("winter");
    expect(parseTabooGuess("GUESS: winter\nsomething")).toBe("winter\nsomething");
  });
});

describe("taboo episodes", () => {
  it("prompts: describer gets the filled template, guesser the initial prompt + clue", async () => {
    const r = await play(taboo, [replay(["CLUE: the chilly months"]), replay(["GUESS: winter"])]);
    const describerPrompt = readFileSync(
      join(dataDir, "taboo", "resources", "initial_prompts", "initial_describer.template"),
      "utf8",
    )
      .replace("$TARGET_WORD$", "winter")
      .replace("$REL_WORD$", "- cold\n- snow\n- season")
      .replace("$N$", "3");
    expect(sentTo(r, "Player 1")[0]).toBe(describerPrompt);
    const guesserPrompt = (s0.experiment.guesser_initial_prompt as string).replace("$N$", "3");
    expect(sentTo(r, "Player 2")[0]).toBe(`${guesserPrompt}\n\nCLUE: the chilly months`);
    expect(ep(r)).toMatchObject({ Aborted: 0, Success: 1, Lose: 0, "Main Score": 100, "Request Count": 1 });
  });

  it("a guess in round 2 scores 50; the describer sees the guesser's raw reply", async () => {
    const r = await play(taboo, [
      replay(["CLUE: chilly months", "CLUE: after autumn"]),
      replay(["GUESS: fall", "GUESS: Winter!"]),
    ]);
    expect(sentTo(r, "Player 1")[1]).toBe("GUESS: fall");
    expect(ep(r)).toMatchObject({ Success: 1, "Main Score": 50, "Request Count": 2, "Repetition-Guesser": 0 });
  });

  it("three rounds without the word are a loss", async () => {
    const r = await play(taboo, [replay(Array(3).fill("CLUE: chilly")), replay(Array(3).fill("GUESS: fall"))]);
    expect(ep(r)).toMatchObject({ Aborted: 0, Lose: 1, Success: 0, "Main Score": 0, "Request Count": 3 });
    expect(gmEvents(r, "max rounds reached")).toEqual(["3"]);
  });

  it("a taboo word in the clue ends the game as a LOSS, not an abort", async () => {
    const r = await play(taboo, [replay(["CLUE: lots of snow"]), replay([])]);
    expect(ep(r)).toMatchObject({ Aborted: 0, Lose: 1, Success: 0, "Main Score": 0 });
    expect(gmEvents(r, "invalid clue")).toEqual([
      "Related word 'snow' (stem=snow) is similar to clue word 'snow' (stem=snow)",
    ]);
  });

  it("a describer reply without 'CLUE:' at the very start aborts", async () => {
    const r = await play(taboo, [replay([" CLUE: chilly"]), replay([])]);
    expect(ep(r).Aborted).toBe(1);
    expect(Number.isNaN(ep(r)["Main Score"])).toBe(true);
  });

  it("a guesser reply without 'GUESS:' aborts", async () => {
    const r = await play(taboo, [replay(["CLUE: chilly"]), replay(["guess: winter"])]);
    expect(ep(r)).toMatchObject({ Aborted: 1, "Violated Request Count": 1, "Parsed Request Count": 0 });
  });

  it("scripted reversing describer and guesser win every high_en instance", async () => {
    for (let i = 0; i < 5; i++) {
      const r = await play(taboo, [reversingDescriber(), reversingGuesser()], 0, i);
      expect(ep(r).Success).toBe(1);
    }
  });
});
