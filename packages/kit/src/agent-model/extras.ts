// The corpus beyond guess-number and stories: questworld windows (the OPD game) and the clembench
// games (Wordle's three variants, taboo, referencegame, imagegame, privateshared, guesswhat) and tau2
// retail (train-split tasks), at the
// sizes the shipped model was built with.
import { type AgentClemGame, clemCorpus } from "./clem-players.js";
import type { SyntheticClemGame } from "./clem-synthetic.js";
import type { CorpusDocument } from "./corpus.js";
import { copyDrills, spellingDrills } from "./drills.js";
import { questworldCorpus } from "./questworld-corpus.js";
import { tau2Corpus } from "./tau2-corpus.js";

/**
 * Episodes per clembench game in the shipped model's corpus (half expert, half weak). Weighted toward the
 * games the previous model (300/300/300/400/500/400/120/400) could not play: Wordle ×3, taboo, guesswhat.
 */
export const AGENT_MODEL_CLEM_EPISODES: Readonly<Record<AgentClemGame, number>> = {
  wordle: 700,
  wordle_withclue: 700,
  wordle_withcritic: 450,
  taboo: 1600,
  referencegame: 250,
  imagegame: 300,
  privateshared: 200,
  guesswhat: 700,
};

export const AGENT_MODEL_CORPUS = {
  questworldEpisodes: 160,
  // 0.12 made questworld windows a third of the corpus's tokens for 2% of its loss tokens.
  questworldTurnRate: 0.05,
  clemEpisodes: AGENT_MODEL_CLEM_EPISODES as Partial<Record<AgentClemGame, number>>,
  /** Share of taboo's and guesswhat's episodes played on generated instances (clem-synthetic.ts). */
  clemGenerated: { taboo: 0.75, guesswhat: 0.75 } as Partial<Record<SyntheticClemGame, number>>,
  /**
   * Share of the Wordle players' replies whose explanation spells out what the feedback says (`s is 1st; a and e
   * are out; …`) before the count. 0 in the shipped model's corpus: a build with it has not been measured yet.
   */
  wordleConstraintRate: 0,
  /** Spelling-drill documents (drills.ts). */
  spellingDrills: 300,
  /** Copy-drill documents (drills.ts). */
  copyDrills: 800,
  /** tau2 retail episodes on train-split tasks (tau2-corpus.ts), and the share of their replies kept. */
  tau2Episodes: 74,
  tau2TurnRate: 0.5,
};

export async function agentModelCorpusExtras(
  seed: number,
  sizes: Partial<typeof AGENT_MODEL_CORPUS> = {},
): Promise<CorpusDocument[]> {
  const s = { ...AGENT_MODEL_CORPUS, ...sizes };
  const quest = await questworldCorpus({ seed, episodes: s.questworldEpisodes, turnRate: s.questworldTurnRate });
  const clem = await clemCorpus({
    seed,
    episodes: s.clemEpisodes,
    generated: s.clemGenerated,
    wordleConstraintRate: s.wordleConstraintRate,
  });
  const drills = [
    ...(s.spellingDrills > 0 ? spellingDrills({ seed, documents: s.spellingDrills }) : []),
    ...(s.copyDrills > 0 ? copyDrills({ seed, documents: s.copyDrills }) : []),
  ];
  const tau2 = s.tau2Episodes > 0 ? await tau2Corpus({ seed, episodes: s.tau2Episodes, turnRate: s.tau2TurnRate }) : [];
  return [
    ...quest.map((d) => ({ game: d.game, skill: d.skill, messages: d.messages, lossOn: "last" as const })),
    ...clem,
    ...tau2,
    ...drills,
  ];
}
