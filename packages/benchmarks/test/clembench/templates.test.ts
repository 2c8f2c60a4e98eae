// The instance files embed the prompts; the shipped templates must say the same (exact prompts from the templates).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { dataDir, spec } from "./helpers.js";

const tpl = (...p: string[]) => readFileSync(join(dataDir, ...p), "utf8");

describe("prompt templates equal the prompts embedded in the instances", () => {
  it("wordle family", () => {
    expect(spec("wordle").experiment.guesser_prompt).toBe(
      tpl("wordle/resources/initial_prompts/en/guesser_prompt.template"),
    );
    expect(spec("wordle_withclue").experiment.guesser_prompt).toBe(
      tpl("wordle/resources/initial_prompts/en/guesser_withclue_prompt.template"),
    );
    const critic = spec("wordle_withcritic").experiment;
    expect(critic.guesser_prompt).toBe(tpl("wordle/resources/initial_prompts/en/guesser_withcritic_prompt.template"));
    expect(critic.guesser_critic_prompt).toBe(tpl("wordle/resources/initial_prompts/en/critic_prompt.template"));
  });
  it("taboo and guesswhat", () => {
    const t = spec("taboo").experiment;
    expect(t.describer_initial_prompt).toBe(tpl("taboo/resources/initial_prompts/initial_describer.template"));
    expect(t.guesser_initial_prompt).toBe(tpl("taboo/resources/initial_prompts/initial_guesser.template"));
    const g = spec("guesswhat").experiment;
    expect(g.guesser_initial_prompt).toBe(tpl("guesswhat/resources/initial_prompts/guesser_prompt.template"));
    expect(g.answerer_initial_prompt).toBe(tpl("guesswhat/resources/initial_prompts/answerer_prompt.template"));
  });
  it("imagegame question", () => {
    expect(spec("imagegame").instance.player_1_question).toBe(
      tpl("imagegame/resources/initial_prompts/prompt_question.template"),
    );
  });
});
