// Shared fixtures: the tiny chat model (character tokenizer, ChatML template, random Qwen3) and
// guess-number episodes from rollout's bisecting scripted player.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GuessNumberEnv, ScriptedPolicy, type Trajectory, guessNumberScript, runEpisodes } from "@kiln/rollout";
import { tinyChat } from "../../src/recipes/tiny-chat.js";

export function tmpRoot(): string {
  return mkdtempSync(join(tmpdir(), "kiln-recipes-"));
}

export const makeEnv = () => new GuessNumberEnv();

export async function expertEpisodes(count: number, baseSeed = 0, malformedRate = 0): Promise<Trajectory[]> {
  const policy = new ScriptedPolicy({ id: "bisect", script: guessNumberScript({ malformedRate }) });
  const r = await runEpisodes({ makeEnv, policy, episodes: count, baseSeed, concurrency: 1, limits: { maxTurns: 8 } });
  return r.trajectories;
}

export function setup(seed = 0, std?: number) {
  const chat = tinyChat({ seed, std });
  return { ...chat, codec: { tokenizer: chat.tokenizer, template: chat.template } };
}
