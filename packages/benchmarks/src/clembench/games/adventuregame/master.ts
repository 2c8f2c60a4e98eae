// adventuregame game master: clembench a717f238 `adventuregame/master.py` (`AdventureGameMaster`).
// One LLM player (the Adventurer) sends `> command` lines to the interactive-fiction interpreter; in the
// planning variant every reply also carries a `Next actions:` plan, which is tried out and rolled back.
import { DialogueGameMaster } from "../../dialogue-game-master.js";
import { GameProtocolError, InstanceError } from "../../errors.js";
import type { GameContext, GameDefinition } from "../../game.js";
import { type Experiment, field, type GameInstance } from "../../instances.js";
import { Player, type PlayerBackend } from "../../player.js";
import { pyListRepr, pyStrip } from "../../py.js";
import { loadAdventureDefinitions } from "./definitions.js";
import type { Fact } from "./fact-set.js";
import { AdventureInterpreter, type GoalsAchieved } from "./interpreter.js";
import { AdventureGameScorer } from "./scorer.js";

/** The strings the reference counts as a hallucinated finish in a reply without ">" (case-sensitive). */
const HALLUCINATED_FINISH = ["complete", "finish", "done", "successfully"];

function goalKey(g: string | Fact): string {
  return typeof g === "string" ? g : JSON.stringify(g);
}

export class AdventureGameMaster extends DialogueGameMaster {
  player!: Player;
  interpreter!: AdventureInterpreter;
  variant!: "basic" | "plan";
  maxTurns = 50;
  success = true;
  /** "command_tag_missing" | "next_actions_missing" once a reply breaks the format */
  invalidFormat = "";
  /** all goals were met at some point */
  finished = false;
  /** the player used the DONE action */
  modelDone = false;
  goalsRequired = new Set<string>();
  goalsAchieved: GoalsAchieved = [];
  planHistory: string[][] = [];
  planSuccessRatioHistory: number[] = [];
  private inst!: GameInstance;

  constructor(
    gameName: string,
    experiment: Experiment,
    private readonly backends: PlayerBackend[],
    private readonly dataDir: string,
  ) {
    super(gameName, experiment);
  }

  protected onSetup(instance: GameInstance): void {
    const where = `${this.gameName}/${instance.game_id}`;
    this.inst = instance;
    const variant = field<string>(instance, "variant", where);
    if (variant !== "basic" && variant !== "plan")
      throw new InstanceError(`${where}: variant must be "basic" or "plan", got ${JSON.stringify(variant)}`);
    this.variant = variant;
    const maxTurns = field<number>(instance, "max_turns", where);
    if (!Number.isInteger(maxTurns) || maxTurns < 1)
      throw new InstanceError(`${where}: max_turns must be a positive integer`);
    this.maxTurns = maxTurns;
    for (const k of ["prompt", "optimal_turns", "goal_state", "initial_state"]) field(instance, k, where);
    this.interpreter = new AdventureInterpreter(instance, loadAdventureDefinitions(this.dataDir, instance));
    this.player = new Player(this.backends[0], "Adventurer");
    this.addPlayer(this.player);
    this.goalsRequired = new Set(instance.goal_state as string[]);
    this.logKey("adventure_info", {
      variant,
      max_turns: maxTurns,
      optimal_turns: instance.optimal_turns,
      goal_count: this.goalsRequired.size,
    });
  }

  protected override onBeforeGame(): void {
    this.setContextFor(this.player, `${this.inst.prompt as string}${this.interpreter.fullRoomDesc()}`);
  }

  protected validatePlayerResponse(player: Player, utterance: string): boolean {
    this.logToSelf("metadata", `Round: ${this.currentRound}`);
    if (player !== this.player) return true;
    if (!utterance.startsWith(">")) {
      this.success = false;
      for (const s of HALLUCINATED_FINISH)
        if (utterance.includes(s)) {
          this.logToSelf("hallucinated_finish", utterance);
          break;
        }
      this.invalidFormat = "command_tag_missing";
      return false;
    }
    // a reply that mentions "done" anywhere passes without a plan (reference)
    if (this.variant === "plan" && !utterance.includes("\nNext actions:") && !utterance.includes("done")) {
      this.success = false;
      this.invalidFormat = "next_actions_missing";
      return false;
    }
    return true;
  }

  protected override parseResponse(_player: Player, utterance: string): string {
    if (this.variant === "plan") {
      if (utterance === "> done") return utterance;
      const parts = utterance.split("\nNext actions:");
      if (parts.length >= 2) {
        const plan = parts[1].split(",").map((c) => pyStrip(c));
        this.planHistory.push(plan);
        this.logToSelf("turn_plan", plan);
      }
    }
    return utterance;
  }

  protected doesGameProceed(): boolean {
    if (this.invalidFormat) {
      this.logToSelf("invalid_format", this.invalidFormat);
      return false;
    }
    // after a failed action the goals are fact tuples, never equal to the required strings (reference)
    const achieved = new Set(this.goalsAchieved.map(goalKey));
    if (achieved.size === this.goalsRequired.size && [...this.goalsRequired].every((g) => achieved.has(g))) {
      this.finished = true;
      this.logToSelf("adventure_finished", [...this.goalsAchieved]);
    }
    if (this.currentRound >= this.maxTurns) {
      this.logToSelf("turn_limit_reached", `Turn limit ${this.maxTurns} reached, end episode.`);
      return false;
    }
    if (this.modelDone) {
      this.logToSelf("model_done", `Model produced DONE action at turn ${this.currentRound}, end episode.`);
      return false;
    }
    return true;
  }

  protected onValidPlayerResponse(_player: Player, parsed: string | null): void {
    const response = parsed ?? "";
    const ifInput = pyStrip(response.slice(1).split("\n")[0]);
    const prior = this.goalsAchieved.length;
    const result = this.interpreter.processAction(ifInput);
    this.logToSelf("fail_type" in result.info ? "action_fail" : "action_info", result.info);
    if ("done_action" in result.info) this.modelDone = true;
    this.goalsAchieved = result.goals;
    this.logToSelf("goal_status", {
      goal_states_achieved: [...this.goalsAchieved],
      turn_goal_score: this.goalsAchieved.length - prior,
    });
    if (this.variant === "plan") {
      const plan = this.planHistory[this.planHistory.length - 1];
      // a first reply that passes only by mentioning "done" leaves no plan: the reference raises IndexError
      if (!plan) throw new GameProtocolError(`${this.gameName}: no plan recorded before the first planned turn`);
      this.logToSelf("current_plan", pyListRepr(plan));
      this.logToSelf("plan_length", plan.length);
      const results = this.interpreter.executePlanSequence(plan);
      this.logToSelf("plan_results", results);
      const successes = results.filter((r) => !("fail_type" in r[2])).length;
      const ratio = successes / plan.length;
      this.logToSelf("plan_command_success_ratio", ratio);
      this.planSuccessRatioHistory.push(ratio);
      if (this.planHistory.length >= 2) {
        const priorPlan = this.planHistory[this.planHistory.length - 2];
        this.logToSelf("plan_followed", priorPlan[0] === ifInput ? 1 : 0);
      }
    }
    this.setContextFor(this.player, result.feedback);
  }

  protected override onAfterGame(): void {
    this.logToSelf("game_result", {
      goal_states_achieved: [...this.goalsAchieved],
      game_successfully_finished: this.finished,
    });
  }
}

export const adventuregame: GameDefinition = {
  name: "adventuregame",
  players: 1,
  roles: ["Adventurer"],
  createMaster: (experiment: Experiment, backends: PlayerBackend[], ctx: GameContext) =>
    new AdventureGameMaster("adventuregame", experiment, backends, ctx.dataDir),
  createScorer: (experiment, instance) => new AdventureGameScorer("adventuregame", experiment, instance),
};
