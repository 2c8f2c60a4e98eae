// OPD's questworld table: Core-3 from the quest-2 wall (questworldOpdSetup: every agent starts
// with quest 1 done and the skill to pass the wall, the score is the stage reached), the model
// playing from the questworld window, the teacher scaffolded with the expert note the agent
// model's corpus carries (QUESTWORLD_SCAFFOLD_NOTE).
import { QUESTWORLD_SCAFFOLD_NOTE } from "../agent-model/questworld-corpus.js";
import { questworldOpdSetup } from "../agent-model/questworld-opd.js";
import type { ReproConfig } from "./config.js";
import type { OpdReproSetup } from "./opd-setup.js";

export function questworldReproSetup(config: ReproConfig): OpdReproSetup {
  const s = questworldOpdSetup({
    seeds: config.heldout.questworldSeeds,
    maxTurns: config.opd.rollout.maxTurns,
    maxTokens: config.opd.rollout.maxTokens,
    seed: config.seed,
    startsPerArchetype: config.heldout.questworldStartsPerArchetype,
  });
  return {
    name: `questworld Core-3 from the quest-2 wall (seeds ${s.seeds.join(", ")})`,
    makeEnv: s.makeEnv,
    view: s.view,
    evaluate: (policy) => s.evaluate(policy),
    starts: s.starts,
    limits: { maxTurns: s.limits.maxTurns },
    note: QUESTWORLD_SCAFFOLD_NOTE,
    // The score is the stage reached from the wall start; every agent starts past stage 4.
    reportsSuccess: false,
  };
}
