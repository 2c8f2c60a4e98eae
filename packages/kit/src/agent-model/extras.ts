// The corpus beyond guess-number and stories: questworld windows (the OPD game) and the clembench
// games (Wordle's three variants, taboo, referencegame, imagegame, privateshared, guesswhat), at the
// sizes the shipped model was built with.
import { type AgentClemGame, clemCorpus } from "./clem-players.js";
import type { CorpusDocument } from "./corpus.js";
import { questworldCorpus } from "./questworld-corpus.js";

/** Episodes per clembench game in the shipped model's corpus (half expert, half weak). */
export const AGENT_MODEL_CLEM_EPISODES: Readonly<Record<AgentClemGame, number>> = {
  wordle: 300,
  wordle_withclue: 300,
  wordle_withcritic: 300,
  taboo: 400,
  referencegame: 500,
  imagegame: 400,
  privateshared: 120,
  guesswhat: 400,
};

export const AGENT_MODEL_CORPUS = {
  questworldEpisodes: 160,
  questworldTurnRate: 0.12,
  clemEpisodes: AGENT_MODEL_CLEM_EPISODES as Partial<Record<AgentClemGame, number>>,
};

export async function agentModelCorpusExtras(
  seed: number,
  sizes: Partial<typeof AGENT_MODEL_CORPUS> = {},
): Promise<CorpusDocument[]> {
  const s = { ...AGENT_MODEL_CORPUS, ...sizes };
  const quest = await questworldCorpus({ seed, episodes: s.questworldEpisodes, turnRate: s.questworldTurnRate });
  const clem = await clemCorpus({ seed, episodes: s.clemEpisodes });
  return [
    ...quest.map((d) => ({ game: d.game, skill: d.skill, messages: d.messages, lossOn: "last" as const })),
    ...clem,
  ];
}
