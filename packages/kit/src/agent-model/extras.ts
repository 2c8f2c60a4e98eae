// The corpus beyond guess-number and stories: questworld windows (the OPD game) and Wordle games (the
// clembench game), at the sizes the shipped model was built with.
import type { CorpusDocument } from "./corpus.js";
import { questworldCorpus } from "./questworld-corpus.js";
import { wordleCorpus } from "./wordle-players.js";

export const AGENT_MODEL_CORPUS = { questworldEpisodes: 160, questworldTurnRate: 0.25, wordleEpisodes: 200 };

export async function agentModelCorpusExtras(
  seed: number,
  sizes: Partial<typeof AGENT_MODEL_CORPUS> = {},
): Promise<CorpusDocument[]> {
  const s = { ...AGENT_MODEL_CORPUS, ...sizes };
  const quest = await questworldCorpus({ seed, episodes: s.questworldEpisodes, turnRate: s.questworldTurnRate });
  const wordle = await wordleCorpus({ seed, episodes: s.wordleEpisodes });
  return [
    ...quest.map((d) => ({ game: d.game, skill: d.skill, messages: d.messages, lossOn: "last" as const })),
    ...wordle,
  ];
}
