// OPD's questworld table: Core-3 from the quest-2 wall (questworldOpdSetup: every agent starts
// with quest 1 done and the skill to pass the wall, the score is the stage reached), the model
// playing from the questworld window, the teacher scaffolded with the expert note the agent
// model's corpus carries (QUESTWORLD_SCAFFOLD_NOTE).
import { QUESTWORLD_SCAFFOLD_NOTE } from "../agent-model/questworld-corpus.js";
import { atQuestworldWall, questworldOpdSetup } from "../agent-model/questworld-opd.js";
import {
  privilegedQuestworldEnv,
  privilegedTeacherFactory,
  questworldTeacherPrompt,
} from "../agent-model/questworld-privileged.js";
import type { ReproConfig } from "./config.js";
import type { OpdReproSetup } from "./opd-setup.js";

/**
 * Seed 000's wall row: base and r1 pass the quest-2 wall 0/3, r2 3/3, and r3 goes on past it —
 * the effect kiln's table tests (Δ over 2 SE against the base, or the table says it does not hold).
 */
export const QUESTWORLD_SEED_WALL = {
  source: "seed 000",
  byPhase: { base: "0/3", r1: "0/3", r2: "3/3", r3: "3/3, goes on" } as Record<string, string>,
  claims: ["r2", "r3"],
};

export function questworldReproSetup(config: ReproConfig): OpdReproSetup {
  const s = questworldOpdSetup({
    seeds: config.heldout.questworldSeeds,
    maxTurns: config.opdQuestworld.evalTurns,
    maxTokens: config.opd.rollout.maxTokens,
    seed: config.seed,
    startsPerArchetype: config.heldout.questworldStartsPerArchetype,
    samplesPerStart: config.heldout.questworldSamplesPerStart,
    pathStartsPerArchetype: config.opdQuestworld.pathStartsPerArchetype,
  });
  return {
    name: `questworld Core-3 from the quest-2 wall (seeds ${s.seeds.join(", ")})`,
    // Rollouts record the expert's next call per state (info.expertNext) for the privileged teacher.
    makeEnv: privilegedQuestworldEnv,
    view: s.view,
    evaluate: (policy) => s.evaluate(policy),
    starts: s.starts,
    // Rollouts take opd.rollout.maxTurns; evaluations opdQuestworld.evalTurns (questworldOpdSetup).
    limits: { maxTurns: config.opd.rollout.maxTurns },
    turnsPerRound: config.opdQuestworld.turnsPerRound,
    note: QUESTWORLD_SCAFFOLD_NOTE,
    // The score is the stage reached from the wall start; every agent starts past stage 4.
    reportsSuccess: false,
    focusTurn: atQuestworldWall,
    focusLabel: "wall turns",
    seedWall: QUESTWORLD_SEED_WALL,
    privileged: {
      teacherPrompt: questworldTeacherPrompt,
      evaluateTeacher: (teacher) => s.evaluate(privilegedTeacherFactory(teacher)),
    },
  };
}
