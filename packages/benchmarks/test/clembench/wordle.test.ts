import { describe, expect, it } from "vitest";
import {
  agreeingCritic,
  parseWordleResponse,
  pyJsonDumps,
  replay,
  turnsStrategy,
  validateGuess,
  type WordleWords,
  wordle,
  wordleFeedback,
  WordleResponseError,
  wordleSolver,
  wordleWithClue,
  wordleWithCritic,
} from "../../src/clembench/index.js";
import { ep, gmEvents, play, sentTo, spec } from "./helpers.js";

const s0 = spec("wordle");
const words = s0.experiment.lang_keywords as WordleWords;
const known = new Set(words.official_words_list);
const target = s0.instance.target_word as string; // "party"

const g = (w: string) => `explanation: trying\nguess: ${w}`;

describe("wordle feedback", () => {
  it("marks greens first, then yellows from the remaining letters left to right", () => {
    expect(wordleFeedback("apple", "party")).toBe("a<yellow> p<yellow> p<red> l<red> e<red>");
    expect(wordleFeedback("spree", "strap")).toBe("s<green> p<yellow> r<green> e<red> e<red>");
    expect(wordleFeedback("eerie", "there")).toBe("e<yellow> e<red> r<yellow> i<red> e<green>");
    expect(wordleFeedback("error", "strap")).toBe("e<red> r<red> r<green> o<red> r<red>");
    expect(wordleFeedback("party", "party")).toBe("p<green> a<green> r<green> t<green> y<green>");
  });
  it("strategy: −20 per reused red, +20 per kept green, +10 per kept yellow", () => {
    expect(
      turnsStrategy(["a<green> b<red> c<yellow> d<red> e<red>", "a<green> b<red> c<red> x<red> y<red>"], false),
    ).toEqual([0, 10]);
    expect(turnsStrategy(["a<green> b<green> c<green> d<green> e<green>"], false)).toEqual([100]);
    expect(turnsStrategy(["a<red> b<green> c<green> d<green> e<green>"], true)).toEqual([0]);
  });
});

describe("wordle parse and validation rules", () => {
  it("requires the raw reply to start with the case-sensitive 'explanation:'", () => {
    expect(() => parseWordleResponse(" explanation: x\nguess: party", words)).toThrow(/start with the keyword/);
    expect(() => parseWordleResponse("Explanation: x\nguess: party", words)).toThrow(WordleResponseError);
    expect(parseWordleResponse("explanation: x\nGUESS:  Party ", words)).toEqual(["party", "x"]);
  });
  it("allows at most two lines after strip and exactly one guess tag (any case)", () => {
    expect(() => parseWordleResponse("explanation: a\nb\nguess: party", words)).toThrow(/only the 'guess:'/);
    expect(() => parseWordleResponse("explanation: my guess: apple\nguess: party", words)).toThrow(/exactly once/);
    expect(() => parseWordleResponse("explanation: nothing", words)).toThrow(/exactly once/);
    expect(parseWordleResponse("explanation: a\nguess: party\n\n", words)[0]).toBe("party");
  });
  it("checks letters, then length, then the word list", () => {
    const key = (w: string) => {
      try {
        validateGuess(w, words, known);
        return "ok";
      } catch (e) {
        return (e as WordleResponseError).key;
      }
    };
    expect(key("par ty")).toBe("INVALID_FORMAT");
    expect(key("part1")).toBe("INVALID_FORMAT");
    expect(key("")).toBe("INVALID_FORMAT");
    expect(key("parties")).toBe("INVALID_WORD_LENGTH");
    expect(key("abcde")).toBe("NOT_VALID_WORD_FOR_GAME");
    expect(key("party")).toBe("ok");
    expect(words.official_words_list.length).toBe(12953);
  });
});

describe("wordle episodes", () => {
  it("first message is the prompt; success in round 1 scores 100", async () => {
    const r = await play(wordle, [replay([g(target)])]);
    expect(sentTo(r, "Player 1")[0]).toBe(s0.experiment.guesser_prompt);
    expect(ep(r)).toMatchObject({
      Aborted: 0,
      Lose: 0,
      Success: 1,
      "Main Score": 100,
      "Request Count": 1,
      "Guess Repetitions": 0,
    });
    expect(r.interactions?.meta.round_count).toBe(1);
    expect(gmEvents(r, "correct guess")).toEqual(["game_result = WIN"]);
  });

  it("speed scores by rounds (4 → 50) and feedback message format", async () => {
    const r = await play(wordle, [replay([g("crane"), g("crane"), g("apple"), g(target)])]);
    expect(ep(r)["Main Score"]).toBe(50);
    expect(ep(r)["Guess Repetitions"]).toBe(1);
    expect(sentTo(r, "Player 1")[1]).toBe(
      `guess_feedback: ${wordleFeedback("crane", target)}\n\nProvide your response only in this format.\nexplanation: details\nguess: word`,
    );
  });

  it("six wrong valid guesses are a loss with Main Score 0", async () => {
    const r = await play(wordle, [replay(Array(6).fill(g("crane")))]);
    expect(ep(r)).toMatchObject({ Aborted: 0, Lose: 1, Success: 0, "Main Score": 0, "Request Count": 6 });
    expect(r.interactions?.turns.length).toBe(6);
  });

  it("unknown words are reprompted up to 5 times (counted as parsed), the 6th aborts", async () => {
    const r = await play(wordle, [replay(Array(6).fill(g("abcde")))]);
    const s = ep(r);
    expect(s).toMatchObject({
      Aborted: 1,
      Lose: 0,
      Success: 0,
      "Request Count": 6,
      "Parsed Request Count": 6,
      "Violated Request Count": 0,
    });
    expect(Number.isNaN(s["Main Score"])).toBe(true);
    expect(sentTo(r, "Player 1")[1]).toBe(
      "Your guess is not a valid word for this game. Please try again.\n\nProvide your response only in this format.\nexplanation: details\nguess: word",
    );
    // a reprompt stays in the same round
    expect(r.interactions?.turns.length).toBe(1);
  });

  it("five reprompts then a correct guess still wins in round 1", async () => {
    const r = await play(wordle, [replay([...Array(5).fill(g("abcde")), g(target)])]);
    expect(ep(r)).toMatchObject({ Success: 1, "Main Score": 100, "Request Count": 6 });
  });

  it.each([
    ["format (no explanation first)", "guess: party"],
    ["length", g("parties")],
    ["letters", g("p4rty")],
    ["too many lines", "explanation: a\nb\nguess: party"],
  ])("aborts at once on a %s violation", async (_label, reply) => {
    const r = await play(wordle, [replay([reply])]);
    expect(ep(r)).toMatchObject({ Aborted: 1, "Violated Request Count": 1, "Request Success Ratio": 0 });
    expect(gmEvents(r, "invalid format")).toEqual(["game_result = ABORT"]);
  });

  it("the solver wins every instance of an experiment", async () => {
    const solver = wordleSolver(words.official_words_list);
    for (let i = 0; i < 3; i++) {
      const r = await play(wordle, [solver], 0, i);
      expect(ep(r).Success).toBe(1);
    }
  });

  it("scores.json layout: NaN token, float repr, key order", async () => {
    const r = await play(wordle, [replay([g("abc")])]);
    const text = pyJsonDumps(r.scores);
    expect(text).toContain('"Main Score": NaN');
    expect(text).toContain('"Request Success Ratio": 0.0');
    expect(Object.keys(r.scores!)).toEqual(["meta", "players", "turn scores", "episode scores", "player_models"]);
    expect(Object.keys(ep(r))).toEqual([
      "Aborted",
      "Lose",
      "Success",
      "Request Count",
      "Parsed Request Count",
      "Violated Request Count",
      "Request Success Ratio",
      "Main Score",
      "Guess Repetitions",
    ]);
  });
});

describe("wordle_withclue", () => {
  it("prompt as initial prompt + 'clue: <clue>'; Main Score round(100/rounds, 2)", async () => {
    const sc = spec("wordle_withclue");
    const t = sc.instance.target_word as string;
    const r = await play(wordleWithClue, [replay([g("crane"), g("apple"), g(t)])]);
    expect(sentTo(r, "Player 1")[0]).toBe(`${sc.experiment.guesser_prompt}\n\nclue: ${sc.instance.target_word_clue}`);
    expect(ep(r)["Main Score"]).toBe(33.33);
    expect(pyJsonDumps(ep(r))).toContain('"Main Score": 33.33');
  });
  it("a 1-round win writes 100.0 (a float, unlike wordle's 100)", async () => {
    const t = spec("wordle_withclue").instance.target_word as string;
    const r = await play(wordleWithClue, [replay([g(t)])]);
    expect(pyJsonDumps(r.scores)).toContain('"Main Score": 100.0');
    const plain = await play(wordle, [replay([g(target)])]);
    expect(pyJsonDumps(plain.scores)).toContain('"Main Score": 100,');
  });
});

describe("wordle_withcritic", () => {
  const crit = (a: string) => `explanation: looks fine\nagreement: ${a}`;
  it("guesser → critic → guesser per round; only the committed guess gets feedback", async () => {
    const sc = spec("wordle_withcritic");
    const t = sc.instance.target_word as string;
    const guesser = replay([g("crane"), g("apple"), g("apple"), g(t)]);
    const critic = replay([crit("no"), crit("yes")]);
    const r = await play(wordleWithCritic, [guesser, critic]);
    const s = ep(r);
    expect(s).toMatchObject({ Success: 1, "Main Score": 50, "Request Count": 6 });
    expect(s["Non-Repetition-Guesser-On-Critic-Disagreement"]).toBe(1);
    expect(s["Repetition-Guesser-On-Critic-Disagreement"]).toBe(0);
    expect(s["Repetition-Guesser-On-Critic-Agreement"]).toBe(0);
    const toCritic = sentTo(r, "Player 2");
    expect(toCritic[0]).toBe(
      `${sc.experiment.guesser_critic_prompt}\n\nclue: ${sc.instance.target_word_clue}\nexplanation: trying\nguess: crane`,
    );
    expect(toCritic[1]).toContain(
      "\n\nProvide your response only in this format.\nexplanation: details\nagreement: yes or no",
    );
    expect(sentTo(r, "Player 1")[1]).toBe(
      `clue: ${sc.instance.target_word_clue}\nguess_agreement: no\nagreement_explanation: looks fine\n\nProvide your response only in this format.\nexplanation: details\nguess: word`,
    );
    expect(r.interactions?.["Guesser Guesses"]).toEqual(["crane", "apple"]);
    expect(r.interactions?.["Guesser Guesses Committed"]).toEqual(["apple", t]);
  });
  it("a717f238 variant: the critic gets no initial prompt", async () => {
    const { wordleWithCriticNoCriticPrompt } = await import("../../src/clembench/index.js");
    const sc = spec("wordle_withcritic");
    const r = await play(wordleWithCriticNoCriticPrompt, [replay([g("crane"), g("crane")]), replay([crit("yes")])]);
    expect(sentTo(r, "Player 2")[0]).toBe(`clue: ${sc.instance.target_word_clue}\nexplanation: trying\nguess: crane`);
  });
  it("an invalid critic reply aborts immediately", async () => {
    const r = await play(wordleWithCritic, [replay([g("crane")]), replay(["explanation: hmm\nagreement: maybe"])]);
    expect(ep(r)).toMatchObject({ Aborted: 1, "Violated Request Count": 1 });
  });
  it("solver and an agreeing critic win", async () => {
    const w = spec("wordle_withcritic").experiment.lang_keywords as WordleWords;
    const r = await play(wordleWithCritic, [wordleSolver(w.official_words_list), agreeingCritic()]);
    expect(ep(r).Success).toBe(1);
  });
});
