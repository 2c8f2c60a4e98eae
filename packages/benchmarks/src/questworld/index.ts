// questworld: a deterministic quest-chain game with typed tools, three archetypes and
// the Core-3 score (docs: ./README.md).

export { ARCHETYPES, ARCHETYPE_INFO, type ArchetypeId, type ArchetypeInfo } from "./archetypes.js";
export {
  type AgentScore,
  type Core3Options,
  type Core3Progress,
  type Core3Result,
  type MeanSE,
  type WallRow,
  evaluateCore3,
  meanSE,
  scoreCore3,
} from "./core3.js";
export {
  type CallResult,
  QUESTWORLD_ENV_ID,
  QUESTWORLD_VERSION,
  type QuestStages,
  QuestworldEnvironment,
  type QuestworldEnvOptions,
  type QuestworldResetOptions,
  questStages,
} from "./environment.js";
export {
  type EpisodeContext,
  type PolicyFactory,
  type QuestworldEpisode,
  type QuestworldEpisodeOptions,
  parseMessageToolCalls,
  runQuestworldEpisode,
} from "./episode.js";
export { QuestworldConfigError, QuestworldEpisodeError, QuestworldError, QuestworldStateError } from "./errors.js";
export { type ExpertCall, nextExpertCall } from "./expert.js";
export { type ExpertPolicyOptions, expertPolicy } from "./expert-policy.js";
export { ITEMS, ITEM_INFO, type ItemId } from "./items.js";
export { type PrngState, seedPrng } from "./prng.js";
export { QUESTS, QUEST_INFO, type QuestId, STAGES_PER_AGENT } from "./quests.js";
export { type RandomPolicyOptions, randomPolicy } from "./random-policy.js";
export { formatCore3Json, formatCore3Markdown } from "./report.js";
export { applyTool, type ToolOutcome, totalStages } from "./rules.js";
export {
  BUILTIN_POLICIES,
  type BuiltinPolicyName,
  expertFactory,
  type QuestworldEvalOptions,
  type QuestworldEvalOutput,
  randomFactory,
  runQuestworldEval,
} from "./runner.js";
export { type StartOverrides, seededStart, wallState } from "./seeded-starts.js";
export { SKILLS, type SkillId, levelForXp, xpForLevel } from "./skills.js";
export {
  type Counters,
  DEFAULT_LIMITS,
  type EpisodeStatus,
  INVENTORY_SLOTS,
  type Limits,
  type QuestProgress,
  type QuestworldState,
  SPEC_LIMITS,
  cloneState,
  initialState,
  validateState,
} from "./state.js";
export { TOOL_NAMES, TOOL_SCHEMAS, type ToolName } from "./tools.js";
export { NPCS, type NpcId, PLACES, type PlaceId, RESOURCES, type ResourceId } from "./world.js";
