import { clembench } from "@kiln/benchmarks";
import { chatmlTemplate } from "@kiln/models";
import type { Message, Policy } from "@kiln/rollout";
import { runEpisodes } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { documentRow, documentText } from "../../src/agent-model/build.js";
import { trainBpeTokenizer } from "../../src/agent-model/bpe.js";
import {
  AGENT_CLEM_GAMES,
  CLEM_SKILLS,
  clemCorpus,
  clemEnvironment,
  clemEpisodeDocuments,
  clemViewPolicy,
} from "../../src/agent-model/clem-players.js";
import { clemSplitIndices, isHeldOutInstance, isTrainingInstance } from "../../src/agent-model/clem-split.js";
import { EVAL_MAX_TURNS, clemExpertPlayers, evaluateClemHeldout } from "../../src/agent-model/clem-eval.js";
import { WORDLE_OPENER, wordleVocabulary } from "../../src/agent-model/wordle-players.js";

const firstPrompt = (messages: readonly Message[]) => messages.find((m) => m.role === "user")?.content ?? "";

describe("the agent model's clembench corpus", () => {
  it("covers every game with both skills, on training instances only, through the chat template", async () => {
    const docs = await clemCorpus({ seed: 3, episodes: Object.fromEntries(AGENT_CLEM_GAMES.map((g) => [g, 4])) });
    for (const game of AGENT_CLEM_GAMES)
      for (const skill of CLEM_SKILLS) expect(docs.some((d) => d.game === game && d.skill === skill)).toBe(true);
    expect(docs.every((d) => isTrainingInstance(d.instance))).toBe(true);
    for (const d of docs) {
      const text = documentText(d);
      expect(text.startsWith("<|im_start|>user\n")).toBe(true);
      expect(text.split("<|im_start|>assistant\n").length - 1).toBe(
        d.messages?.filter((m) => m.role === "assistant").length,
      );
    }
    // The prompts name their instance (Wordle's do not: its clue-less prompt is the same for every target):
    // no document opens with a held-out instance's prompt.
    for (const game of AGENT_CLEM_GAMES.filter((g) => g !== "wordle")) {
      const env = clemEnvironment(game, isHeldOutInstance);
      const heldoutPrompts = new Set<string>();
      for (let i = 0; i < env.instances; i++) heldoutPrompts.add(firstPrompt((await env.reset({ seed: i })).messages));
      for (const d of docs.filter((x) => x.game === game))
        expect(heldoutPrompts.has(firstPrompt(d.messages!))).toBe(false);
    }
  }, 120_000);

  it("weak players make their game's failure modes (unformatted replies) where the experts never do", async () => {
    const docs = await clemCorpus({ seed: 1, episodes: { taboo: 16, guesswhat: 16, imagegame: 8 } });
    const replies = (skill: string) =>
      docs.filter((d) => d.skill === skill).flatMap((d) => d.messages!.filter((m) => m.role === "assistant"));
    const prefixed = (m: Message) => /^(CLUE|QUESTION|GUESS|Command): /.test(m.content ?? "");
    expect(replies("expert").every(prefixed)).toBe(true);
    expect(replies("weak").some((m) => !prefixed(m))).toBe(true);
  }, 120_000);

  it("a document is the conversation exactly as the policy sees it: every reply's prefix is the rendered prompt", async () => {
    // One held-out episode per game, played once to record what a policy renders at each turn.
    const template = chatmlTemplate();
    for (const game of ["imagegame", "taboo", "wordle", "wordle_withclue", "privateshared"] as const) {
      const seen: string[] = [];
      const all = clembench.listEpisodes(game, clembench.loadInstances(game));
      const index = clemSplitIndices(game, "heldout")[1];
      const expert = clemExpertPlayers(0)(game, all[index].instance);
      const recording: Policy = {
        id: "recording",
        async generate(messages, tools, params) {
          seen.push(template.render(messages, { addGenerationPrompt: true }));
          return expert.generate(messages, tools, params);
        },
      };
      await runEpisodes({
        makeEnv: () => clemEnvironment(game, isHeldOutInstance),
        policy: clemViewPolicy(recording, game),
        episodes: [{ id: "one", seed: 1 }],
        limits: { maxTurns: 80 },
        concurrency: 1,
      });
      const docs = await clemEpisodeDocuments({
        game,
        skill: "expert",
        pickInstance: isHeldOutInstance,
        position: 1,
        seed: 1,
        wordleVocabulary: wordleVocabulary(400, 0), // clemExpertPlayers(0)'s
        turnRate: 1,
      });
      expect(docs.every((d) => d.instance === index)).toBe(true);
      if (game !== "privateshared") {
        expect(docs.length).toBe(1);
        const text = documentText(docs[0]);
        expect(seen.length).toBe(docs[0].messages!.filter((m) => m.role === "assistant").length);
        for (const prompt of seen) expect(text.startsWith(prompt)).toBe(true);
      } else {
        // One document per reply, each the player's view: the probes it is not answering are not in it.
        expect(docs.length).toBe(seen.length);
        for (const [k, d] of docs.entries()) expect(documentText(d).startsWith(seen[k])).toBe(true);
        expect(seen[0]).toContain("Here is a description"); // the pseudo turn carries the private information
        expect(seen[seen.length - 1].split("<|im_start|>user\nME:").length).toBe(2); // the last probe only
        expect(seen.every((p) => p.length < 4000)).toBe(true);
      }
    }
  }, 120_000);

  it("puts the loss on the replies only", async () => {
    const [doc] = await clemCorpus({ seed: 0, episodes: { guesswhat: 1 } });
    const tok = trainBpeTokenizer([documentText(doc)], 300);
    const row = documentRow(doc, tok, 100_000);
    const lossText = tok.decode(Array.from(row.ids).filter((_, i) => row.mask[i] === 1));
    const replies = doc.messages!.filter((m) => m.role === "assistant").map((m) => `${m.content}<|im_end|>\n`);
    expect(lossText).toBe(replies.join(""));
  }, 60_000);

  it("Wordle players open with one word (a learnable first reply) unless the careless one misspells it", async () => {
    const docs = await clemCorpus({ seed: 2, episodes: { wordle: 12, wordle_withclue: 4 } });
    const firstGuess = (d: (typeof docs)[number]) =>
      /guess: (\S+)/.exec(d.messages!.find((m) => m.role === "assistant")?.content ?? "")?.[1];
    for (const d of docs.filter((x) => x.skill === "expert")) expect(firstGuess(d)).toBe(WORDLE_OPENER);
    const weak = docs.filter((x) => x.skill === "weak").map(firstGuess);
    expect(weak.filter((w) => w === WORDLE_OPENER).length).toBeGreaterThan(weak.length / 2);
  }, 120_000);

  it("Wordle players keep their guess once wordle_withcritic's critic has judged it", async () => {
    const docs = await clemCorpus({ seed: 5, episodes: { wordle_withcritic: 12 } });
    const guessOf = (m: Message) => /guess: (\S+)/.exec(m.content ?? "")?.[1] ?? "";
    let verdicts = 0;
    for (const d of docs) {
      const messages = d.messages ?? [];
      for (let i = 2; i < messages.length; i++) {
        if (messages[i].role !== "assistant" || !/guess_agreement:/.test(messages[i - 1].content ?? "")) continue;
        verdicts++;
        const before = guessOf(messages[i - 2]);
        const after = guessOf(messages[i]);
        if (d.skill === "expert") expect(after).toBe(before);
        // a careless player may still write it one letter short or long
        else expect([before, before.slice(0, -1), `${before}s`]).toContain(after);
        expect(messages[i].content).toContain("I keep my guess");
      }
    }
    expect(verdicts).toBeGreaterThan(12);
  }, 120_000);

  it("the Wordle solver sometimes lacks the target: a wrong single fit, then a new word from the dictionary", async () => {
    const docs = await clemCorpus({ seed: 3, episodes: { wordle: 24, wordle_withclue: 24 } });
    const guessOf = (m: Message) => /guess: (\S+)/.exec(m.content ?? "")?.[1] ?? "";
    const targetOf = (d: (typeof docs)[number]) =>
      String(
        clembench.listEpisodes(d.game, clembench.loadGameInstances(d.game))[d.instance].instance.target_word,
      ).toLowerCase();
    const experts = docs.filter((d) => d.skill === "expert");
    let recoveries = 0;
    let wins = 0;
    for (const d of experts) {
      const replies = (d.messages ?? []).filter((m) => m.role === "assistant");
      const guesses = replies.map(guessOf);
      expect(new Set(guesses).size).toBe(guesses.length); // never the same word twice
      if (guesses[guesses.length - 1] === targetOf(d)) wins++;
      for (let i = 1; i < replies.length; i++) {
        if (!/^explanation: 1 words fit/.test(replies[i - 1].content ?? "")) continue;
        if (guesses[i - 1] === targetOf(d)) continue;
        expect(replies[i].content).toMatch(/^explanation: none of my words fits the feedback, \d+ other words do/);
        recoveries++;
      }
    }
    expect(recoveries).toBeGreaterThan(0);
    expect(wins).toBeGreaterThan(experts.length / 2); // most of the time the target is among its words
  }, 120_000);

  it("careless Wordle guesses of the wrong length are the meant word one letter short or long, not a fixed list", async () => {
    const docs = await clemCorpus({ seed: 6, episodes: { wordle: 40 } });
    const vocabulary = new Set([...wordleVocabulary(400, 6), WORDLE_OPENER]);
    const wrong = docs
      .filter((d) => d.skill === "weak")
      .flatMap((d) => (d.messages ?? []).filter((m) => m.role === "assistant"))
      .map((m) => /guess: (\S+)/.exec(m.content ?? "")?.[1] ?? "")
      .filter((g) => g.length !== 5);
    expect(wrong.length).toBeGreaterThan(3);
    for (const g of wrong)
      expect(g.length === 4 ? [...vocabulary].some((w) => w.startsWith(g)) : vocabulary.has(g.slice(0, -1))).toBe(true);
    // no one wrong-length word stands out (the 2026-12-06 model's eight fixed ones did, and greedy decoding wrote them)
    const counts = new Map<string, number>();
    for (const g of wrong) counts.set(g, (counts.get(g) ?? 0) + 1);
    expect(counts.size).toBeGreaterThan(wrong.length / 3);
  }, 120_000);

  it("weak taboo describers' misspelt clues keep the game going, so the corpus shows later turns", async () => {
    const docs = await clemCorpus({ seed: 4, episodes: { taboo: 40 } });
    const later = docs.filter((d) => d.messages!.filter((m) => m.role === "assistant").length >= 2);
    expect(later.length).toBeGreaterThan(0);
    for (const d of later)
      expect(d.messages!.filter((m) => m.role === "assistant").some((m) => m.content!.startsWith("CLUE: "))).toBe(true);
  }, 120_000);

  it("an imagegame player that never says DONE is scored at the game's own round limit, not cut as aborted", async () => {
    expect(EVAL_MAX_TURNS.imagegame).toBeGreaterThan(50); // the game stops itself after 2 × 5 × 5 rounds
    const stubborn: Policy = {
      id: "stubborn",
      async generate() {
        const text = "Command: put X in row 1 column 1";
        return { message: { role: "assistant", content: text }, text, finishReason: "stop" };
      },
    };
    const { table } = await evaluateClemHeldout({ games: ["imagegame"], policy: stubborn, model: "stubborn" });
    expect(table.rows[0].games.imagegame.played).toBe(100);
  }, 120_000);

  it("the scripted experts score high on held-out instances, through clemeval's table", async () => {
    const { table } = await evaluateClemHeldout({
      games: ["referencegame", "guesswhat"],
      policy: clemExpertPlayers(0),
      model: "experts",
    });
    const row = table.rows[0];
    expect(row.games.referencegame.n).toBe(clemSplitIndices("referencegame", "heldout").length);
    expect(row.games.referencegame.played).toBe(100);
    expect(row.games.referencegame.quality).toBe(100);
    expect(row.clemscore).toBeGreaterThan(50);
    expect(wordleVocabulary(10, 0).length).toBeGreaterThanOrEqual(10);
  }, 120_000);
});
