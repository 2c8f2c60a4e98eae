// adventuregame scores: clembench a717f238 `adventuregame/master.py` (`AdventureGameScorer.compute_scores`).
// Main Score = 100 · achieved goals / goals; an invalid format or the turn limit aborts (Main Score NaN).
import { ScoringError } from "../../errors.js";
import type { Interactions } from "../../interactions.js";
import * as M from "../../metrics.js";
import { pyFloat } from "../../py.js";
import { GameScorer } from "../../scorer.js";

/** Failure phases (first two) and types, in the order the reference writes them. */
export const ADVENTURE_FAIL_TYPES = [
  "parsing",
  "resolution",
  "lark_exception",
  "malformed_command",
  "undefined_action_verb",
  "undefined_action",
  "undefined_repr_str",
  "manipulating_room",
  "undefined_argument_type",
  "taking_from_inventory",
  "other_room_argument",
  "domain_trait_type_mismatch",
  "domain_type_discrepancy",
  "world_state_discrepancy",
  "entity_not_accessible",
  "entity_state_mismatch",
  "entity_trait_mismatch",
  "entity_already_inventory",
  "going_to_current_room",
  "no_exit_to",
  "inventory_limit_exceeded",
] as const;

const PLAN_TYPES = ["plan_followed", "plan_command_success_ratio", "bad_plan_followed"] as const;

type Rec = Record<string, unknown>;

function num(x: unknown): number {
  return typeof x === "number" ? x : Number(x);
}

export class AdventureGameScorer extends GameScorer {
  /** The reference overrides `compute_scores` whole, so scores.json keeps empty meta/players. */
  override computeScores(interactions: Interactions): void {
    const info = interactions.adventure_info as Rec | undefined;
    if (!info) throw new ScoringError(`${this.gameName}: the record has no adventure_info`);
    const turnScores: { request: number; goal: number; violated: number; parsed: number }[] = [];
    const turnFails: Record<string, number>[] = [];
    const hallucinations: number[] = [];
    let invalidFormat = "";
    let turnLimitLoss = false;
    let finished = false;
    let finalGoals: unknown[] = [];
    const planRecords: Record<string, unknown>[] = [];
    for (const [turnIdx, turn] of interactions.turns.entries()) {
      const score = { request: 1, goal: 0, violated: 0, parsed: 0 };
      const fail: Record<string, number> = Object.fromEntries(ADVENTURE_FAIL_TYPES.map((t) => [t, 0]));
      const plan: Record<string, unknown> = Object.fromEntries(PLAN_TYPES.map((t) => [t, 0]));
      let hallucination = 0;
      let exploration: Rec | null = null;
      for (const event of turn) {
        const { type, content } = event.action;
        const c = content as Rec;
        if (type === "invalid_format") invalidFormat = String(content);
        if (type === "adventure_finished") finished = true;
        if (type === "hallucinated_finish") hallucination = 1;
        if (type === "action_info" && c.action_type === "done" && !finished) hallucination = 1;
        if (type === "action_fail") {
          fail[c.phase as string] = 1;
          fail[c.fail_type as string] = 1;
        }
        if (type === "action_info" || type === "action_fail") {
          const e = c.exploration_info as Rec;
          exploration = {
            epistemic_action: e.action_epistemic ? 1 : 0,
            pragmatic_action: e.action_pragmatic ? 1 : 0,
            effective_epistemic_gain_amount: e.effective_epistemic_gain_amount,
            known_entities_ratio: pyFloat(num(e.known_entities_ratio)),
            visited_rooms_ratio: pyFloat(num(e.visited_rooms_ratio)),
            known_goal_entities_ratio: pyFloat(num(e.known_goal_entities_ratio)),
          };
        }
        if ((PLAN_TYPES as readonly string[]).includes(type))
          plan[type] = type === "plan_command_success_ratio" ? pyFloat(num(content)) : content;
        if (type === "turn_limit_reached") {
          // DONE is mandatory: reaching the limit loses even with every goal met
          turnLimitLoss = true;
          finished = false;
        }
        if (type === "goal_status") score.goal = num(c.turn_goal_score);
        if (type === "game_result") {
          finished = Boolean(c.game_successfully_finished);
          finalGoals = c.goal_states_achieved as unknown[];
        }
      }
      score.violated = invalidFormat ? 1 : 0;
      score.parsed = invalidFormat ? 0 : 1;
      this.logTurnScore(turnIdx, M.METRIC_REQUEST_COUNT, score.request);
      this.logTurnScore(turnIdx, M.METRIC_REQUEST_COUNT_PARSED, score.parsed);
      this.logTurnScore(turnIdx, M.METRIC_REQUEST_COUNT_VIOLATED, score.violated);
      this.logTurnScore(turnIdx, "command_tag_missing", invalidFormat === "command_tag_missing" ? 1 : 0);
      this.logTurnScore(turnIdx, "next_actions_missing", invalidFormat === "next_actions_missing" ? 1 : 0);
      this.logTurnScore(turnIdx, "hallucination", hallucination);
      this.logTurnScore(turnIdx, "action_parsing_fail", fail.parsing);
      this.logTurnScore(turnIdx, "action_resolution_fail", fail.resolution);
      for (const t of ADVENTURE_FAIL_TYPES.slice(2)) this.logTurnScore(turnIdx, t, fail[t]);
      this.logTurnScore(turnIdx, "goal_score", score.goal);
      if (exploration) for (const [k, v] of Object.entries(exploration)) this.logTurnScore(turnIdx, k, v);
      turnScores.push(score);
      turnFails.push(fail);
      hallucinations.push(hallucination);
      for (const t of PLAN_TYPES) this.logTurnScore(turnIdx, t, plan[t]);
      // the 'bad plan followed' flag is set after the turn's plan scores were logged, so the logged
      // turn value stays 0 while the episode ratio counts it (reference)
      if (turnIdx >= 1) {
        const prior = planRecords[planRecords.length - 1];
        plan.bad_plan_followed = num(prior.plan_command_success_ratio) === 0 && num(plan.plan_followed) ? 1 : 0;
      }
      planRecords.push(plan);
    }
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    const violated = sum(turnScores.map((t) => t.violated));
    const parsed = sum(turnScores.map((t) => t.parsed));
    const requests = sum(turnScores.map((t) => t.request));
    if (requests === 0) throw new ScoringError(`${this.gameName}: no turns (division by zero in the reference)`);
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT_VIOLATED, violated);
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT_PARSED, parsed);
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT, requests);
    this.logEpisodeScore(M.METRIC_REQUEST_SUCCESS_RATIO, pyFloat(parsed / requests));
    this.logEpisodeScore("hallucination_count", sum(hallucinations));
    const parsingFails = sum(turnFails.map((t) => t.parsing));
    const resolutionFails = sum(turnFails.map((t) => t.resolution));
    this.logEpisodeScore("action_parsing_fail", parsingFails);
    this.logEpisodeScore("action_resolution_fail", resolutionFails);
    for (const t of ADVENTURE_FAIL_TYPES.slice(2)) this.logEpisodeScore(t, sum(turnFails.map((f) => f[t])));
    this.logEpisodeScore("successful_actions", parsed - (parsingFails + resolutionFails));
    this.logEpisodeScore("turn_limit_loss", turnLimitLoss ? 1 : 0);
    const turnCount = turnScores.length;
    const optimal = num(info.optimal_turns);
    const overPar = turnCount - optimal;
    this.logEpisodeScore("turns_over_par", finished ? overPar : Number.NaN);
    const range = num(info.max_turns) - optimal;
    if (range === 0)
      throw new ScoringError(`${this.gameName}: max_turns equals optimal_turns (division by zero in the reference)`);
    const turnRatio = 1 - overPar / range;
    this.logEpisodeScore("turn_ratio", finished ? pyFloat(turnRatio) : Number.NaN);
    this.logEpisodeScore("finish_speed", finished ? pyFloat(1 - turnRatio) : Number.NaN);
    const achieved = finalGoals.length / num(info.goal_count);
    this.logEpisodeScore("achieved_goal_ratio", pyFloat(achieved));
    this.logOutcome(invalidFormat !== "" || turnLimitLoss, finished, pyFloat(achieved * 100));
    const followed = sum(planRecords.slice(1).map((p) => num(p.plan_followed)));
    this.logEpisodeScore("plan_followed_ratio", pyFloat(followed / turnCount));
    const viability = sum(planRecords.map((p) => num(p.plan_command_success_ratio)));
    this.logEpisodeScore("plan_average_viability_ratio", pyFloat(viability / turnCount));
    const bad = sum(planRecords.map((p) => num(p.bad_plan_followed))) / turnCount;
    this.logEpisodeScore("bad_plan_follow_ratio", pyFloat(bad));
    this.logEpisodeScore("bad_plan_dismiss_ratio", pyFloat(1 - bad));
  }
}
