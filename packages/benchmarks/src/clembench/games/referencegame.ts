// referencegame: clembench `referencegame/master.py` (clembench a717f238).
import { DialogueGameMaster } from "../dialogue-game-master.js";
import type { GameDefinition } from "../game.js";
import { type Experiment, field, type GameInstance } from "../instances.js";
import type { Interactions } from "../interactions.js";
import * as M from "../metrics.js";
import { Player, type PlayerBackend } from "../player.js";
import { pyFloat, pyMatch, pyReplace, pyRound } from "../py.js";
import { GameScorer } from "../scorer.js";

/**
 * Whether a reply matches an instance pattern (`re.match`, IGNORECASE). In "strict" mode the named group
 * `remainder` must be empty, i.e. nothing may follow on further lines.
 */
export function matchesReferencePattern(pattern: string, mode: string, response: string): RegExpExecArray | null {
  const m = pyMatch(pattern, response, true);
  if (!m) return null;
  if (mode === "liberal") return m;
  if (mode === "strict" && (m.groups?.remainder ?? "") === "") return m;
  return null;
}

export class ReferenceGameMaster extends DialogueGameMaster {
  giver!: Player;
  follower!: Player;
  terminate = false;
  private inst!: GameInstance;

  constructor(
    gameName: string,
    experiment: Experiment,
    private readonly backends: PlayerBackend[],
  ) {
    super(gameName, experiment);
  }

  protected onSetup(instance: GameInstance): void {
    this.inst = instance;
    const where = `${this.gameName}/${this.experiment.name}/${instance.game_id}`;
    for (const k of ["player_1_prompt_header", "player_2_prompt_header", "target_grid_name", "p1_mode", "p2_mode"])
      field(instance, k, where);
    this.giver = new Player(this.backends[0], "InstructionGiver");
    this.follower = new Player(this.backends[1] ?? this.backends[0], "InstructionFollower");
    this.addPlayer(this.giver, { initialContext: instance.player_1_prompt_header as string });
    this.addPlayer(this.follower);
  }

  protected validatePlayerResponse(player: Player, response: string): boolean {
    const i = this.inst;
    if (player === this.giver) {
      if (matchesReferencePattern(i.player_1_response_pattern as string, i.p1_mode as string, response)) return true;
      this.terminate = true;
      this.logToSelf("invalid format", "Invalid generated expression");
      return false;
    }
    // one round only: the game ends after the follower whatever it answers
    this.terminate = true;
    if (matchesReferencePattern(i.player_2_response_pattern as string, i.p2_mode as string, response)) return true;
    this.logToSelf("invalid format", "Invalid generated expression");
    return false;
  }

  protected override parseResponse(player: Player, response: string): string | null {
    if (player === this.giver) return response;
    const m = pyMatch(this.inst.player_2_response_pattern as string, response, true);
    return m ? (m.groups?.response ?? "").toLowerCase() : null;
  }

  protected onValidPlayerResponse(player: Player, parsed: string | null): void {
    if (player === this.giver) {
      this.logToSelf("parse", parsed);
      this.setContextFor(
        this.follower,
        pyReplace(this.inst.player_2_prompt_header as string, "TARGET_EXPRESSION", parsed ?? ""),
      );
    } else if ((this.inst.target_grid_name as string[]).includes(parsed ?? "")) {
      this.logToSelf("parse_correct", parsed);
    } else {
      this.logToSelf("parse_wrong", parsed);
    }
  }

  protected doesGameProceed(): boolean {
    return !this.terminate;
  }
}

/** `ReferenceGameScorer`: reads events 2 (giver parse) and 5 (follower parse) of the single round. */
export class ReferenceGameScorer extends GameScorer {
  override computeScores(interactions: Interactions): void {
    const turn = interactions.turns[0];
    let aborted = false;
    let requests = 0;
    let parsedRequests = 0;
    let success = 0;
    requests += 1;
    if (turn[2]?.action.type === "parse") {
      parsedRequests += 1;
      const expression = String(turn[2].action.content);
      const length = [...expression].length;
      this.logTurnScore(0, "Generated Expression Length", length);
      this.logEpisodeScore("Generated Expression Length", length);
      const tokens = expression.split(" ").length;
      this.logTurnScore(0, "Generated Expression Number of Tokens", tokens);
      this.logEpisodeScore("Generated Expression Number of Tokens", tokens);
      requests += 1;
      if (turn[5]?.action.type.startsWith("parse")) {
        parsedRequests += 1;
        if (turn[5].action.type.includes("correct")) success = 1;
        this.logEpisodeScore("Aborted at Player 1", 0);
        this.logEpisodeScore("Aborted at Player 2", 0);
      } else {
        this.logEpisodeScore("Aborted at Player 1", 0);
        this.logEpisodeScore("Aborted at Player 2", 1);
        aborted = true;
      }
    } else {
      this.logEpisodeScore("Aborted at Player 1", 1);
      this.logEpisodeScore("Aborted at Player 2", 0);
      this.logTurnScore(0, "Generated Expression Length", Number.NaN);
      this.logEpisodeScore("Generated Expression Length", Number.NaN);
      this.logTurnScore(0, "Generated Expression Number of Tokens", Number.NaN);
      this.logEpisodeScore("Generated Expression Number of Tokens", Number.NaN);
      aborted = true;
    }
    this.logTurnScore(0, M.METRIC_REQUEST_COUNT, requests);
    this.logTurnScore(0, M.METRIC_REQUEST_COUNT_PARSED, parsedRequests);
    this.logTurnScore(0, M.METRIC_REQUEST_COUNT_VIOLATED, requests - parsedRequests);
    this.logTurnScore(0, M.METRIC_SUCCESS, success);
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT, requests);
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT_PARSED, parsedRequests);
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT_VIOLATED, requests - parsedRequests);
    this.logEpisodeScore(M.METRIC_ABORTED, aborted ? 1 : 0);
    // referencegame writes NaN into Success and Lose when aborted
    this.logEpisodeScore(M.METRIC_SUCCESS, aborted ? Number.NaN : success);
    this.logEpisodeScore(M.METRIC_LOSE, aborted ? Number.NaN : 1 - success);
    this.logEpisodeScore(M.BENCH_SCORE, aborted ? Number.NaN : success * 100);
    this.logEpisodeScore(M.METRIC_REQUEST_SUCCESS_RATIO, pyFloat(pyRound(parsedRequests / requests, 4)));
  }
}

export const referencegame: GameDefinition = {
  name: "referencegame",
  players: 2,
  roles: ["Instruction Giver", "Instruction Follower"],
  createMaster: (experiment, backends) => new ReferenceGameMaster("referencegame", experiment, backends),
  createScorer: (experiment, instance) => new ReferenceGameScorer("referencegame", experiment, instance),
};
