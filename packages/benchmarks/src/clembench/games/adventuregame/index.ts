// adventuregame (clembench a717f238): the interactive-fiction game and its interpreter.
export { type ActionDict, CommandGrammar } from "./command-grammar.js";
export { loadAdventureDefinitions } from "./definitions.js";
export { type Fact, FactSet, factFromString, factToString } from "./fact-set.js";
export {
  type ActionResult,
  type AdventureDefinitions,
  AdventureInterpreter,
  AdventureInterpreterError,
  type FailInfo,
  type GoalsAchieved,
} from "./interpreter.js";
export { AdventureGameMaster, adventuregame } from "./master.js";
export { adventureExplorer } from "./explorer-player.js";
export { adventureOptimalPlayer } from "./optimal-player.js";
export { parseActionPddl, parseDomainPddl } from "./pddl.js";
export { ADVENTURE_FAIL_TYPES, AdventureGameScorer } from "./scorer.js";
