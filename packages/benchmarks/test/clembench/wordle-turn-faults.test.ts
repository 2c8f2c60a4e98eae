import { messagesBeforeTurn, mulberry32, runEpisodes } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import {
  ClemGameEnvironment,
  type ClemEnvironmentState,
  WORDLE_FAULTS,
  type WordleWords,
  corruptWordleReply,
  judgeWordleReply,
  policyFromBackend,
  wordleEarlierGuesses,
  wordleRules,
  wordleSolver,
} from "../../src/clembench/index.js";
import { dataDir, spec } from "./helpers.js";

const words = spec("wordle").experiment.lang_keywords as WordleWords;
const rules = wordleRules(words);
const makeEnv = () => new ClemGameEnvironment({ game: "wordle", dataDir, filter: { limitPerExperiment: 3 } });

describe("Wordle's turn faults", () => {
  it("the game's verdict names each fault", () => {
    const say = (guess: string) => `explanation: a try\nguess: ${guess}`;
    expect(judgeWordleReply(say("crane"), rules, [])).toEqual({ ok: true, guess: "crane" });
    expect(judgeWordleReply(say("crane"), rules, ["slate", "crane"])).toMatchObject({ ok: false, fault: "repeat" });
    expect(judgeWordleReply(say("cran"), rules, [])).toMatchObject({ fault: "length", key: "INVALID_WORD_LENGTH" });
    expect(judgeWordleReply(say("qxzvj"), rules, [])).toMatchObject({
      fault: "invalid",
      key: "NOT_VALID_WORD_FOR_GAME",
    });
    expect(judgeWordleReply(`${say("crane")}\nguess: slate`, rules, [])).toMatchObject({ fault: "duplicate_field" });
    expect(judgeWordleReply("guess: crane", rules, [])).toMatchObject({ fault: "format", key: "INVALID_START_WORD" });
  });

  it("each corruption of the solver's replies differs only by its fault, and the game master treats it as one", async () => {
    const solver = policyFromBackend(wordleSolver(words.official_words_list), "solver");
    const { trajectories } = await runEpisodes({ makeEnv, policy: solver, episodes: 3, concurrency: 1 });
    const rng = mulberry32(7);
    const seen: Record<string, number> = {};
    for (const t of trajectories) {
      expect(t.outcome.scores.success).toBe(1);
      for (let turn = 0; turn < t.turns.length; turn++) {
        const prompt = messagesBeforeTurn(t, turn);
        const chosen = t.turns[turn].message.content ?? "";
        const earlier = wordleEarlierGuesses(prompt, rules);
        expect(earlier.length).toBe(turn);
        expect(judgeWordleReply(chosen, rules, earlier).ok).toBe(true);
        for (const fault of WORDLE_FAULTS) {
          const rejected = corruptWordleReply(chosen, fault, { rules, earlier, rng });
          if (fault === "repeat" && turn === 0) {
            expect(rejected).toBeNull();
            continue;
          }
          expect(rejected).not.toBeNull();
          const bad = rejected as string;
          seen[fault] = (seen[fault] ?? 0) + 1;
          expect(judgeWordleReply(bad, rules, earlier)).toMatchObject({ ok: false, fault });
          const [chosenLines, badLines] = [chosen.split("\n"), bad.split("\n")];
          if (fault === "duplicate_field") {
            // The chosen reply, then one more guess line naming another list word.
            expect(badLines.slice(0, chosenLines.length)).toEqual(chosenLines);
            expect(badLines.length).toBe(chosenLines.length + 1);
            expect(badLines[badLines.length - 1]).toMatch(/^guess: [a-z]{5}$/);
          } else {
            // Only the guess word changed.
            expect(badLines.length).toBe(chosenLines.length);
            const changed = badLines.filter((l, i) => l !== chosenLines[i]);
            expect(changed.length).toBe(1);
            expect(changed[0]).toMatch(/^guess: \S+$/);
          }
          // The game master itself, replayed to this state and handed the faulty reply.
          const env = makeEnv();
          await env.reset({ seed: t.seed });
          const state: ClemEnvironmentState = {
            instance: env.getState().instance,
            replies: t.turns.slice(0, turn).map((x) => x.message.content ?? ""),
          };
          const reset = await env.reset({ seed: t.seed, state });
          expect(reset.messages[reset.messages.length - 1]?.content).toBe(prompt[prompt.length - 1].content);
          const step = await env.step({ message: { role: "assistant", content: bad }, toolCalls: [] });
          if (fault === "length" || fault === "duplicate_field") {
            expect(step.done).toBe(true);
            expect(step.info?.scores).toMatchObject({ aborted: 1, success: 0 });
          } else if (fault === "invalid") {
            expect(step.done).toBe(false);
            expect(step.observations[0].content).toMatch(/not a valid word for this game/);
          } else {
            // A repeat is accepted and wastes the round: the same feedback as when it was first guessed
            // (or, on the last round, a loss).
            if (step.done) {
              expect(step.info?.scores).toMatchObject({ success: 0, lose: 1 });
              continue;
            }
            const guessed = judgeWordleReply(bad, rules, []) as { guess: string };
            const first = earlier.indexOf(guessed.guess);
            const feedbackThen = /guess_feedback: (.*)/.exec(
              prompt.filter((m) => m.role === "user")[first + 1].content ?? "",
            );
            expect(step.observations[0].content).toContain(`guess_feedback: ${feedbackThen?.[1]}`);
          }
        }
      }
    }
    for (const fault of WORDLE_FAULTS) expect(seen[fault]).toBeGreaterThan(0);
  });
});
