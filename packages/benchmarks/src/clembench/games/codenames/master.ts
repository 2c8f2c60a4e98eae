// clembench `codenames/master.py` (a717f238), `CodenamesGame`: a cluegiver and a guesser against a mock
// opponent that reveals `opponent difficulty` of its own words after every round.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { PythonRandom } from "../../../tau2/python-random.js";
import { DialogueGameMaster } from "../../dialogue-game-master.js";
import { InstanceError, ResourceError } from "../../errors.js";
import type { GameContext } from "../../game.js";
import { type Experiment, field, type GameInstance } from "../../instances.js";
import * as M from "../../metrics.js";
import type { Player, PlayerBackend } from "../../player.js";
import { ASSASSIN, CodenamesBoard, INNOCENT, OPPONENT, TEAM } from "./board.js";
import type { EpisodeSequencer } from "./episode-sequencer.js";
import { type CodenamesFlags, parseFlags } from "./flags.js";
import { ClueGiver, Guesser } from "./players.js";
import { pySample } from "./python-sample.js";
import { templateSubstitute } from "./template.js";
import { CodenamesRuleViolation } from "./validation-errors.js";
import { loadWordNetLemmatizer } from "./wordnet-lemmatizer.js";

/** `constants.MAX_RETRIES` (reprompts per round, only with REPROMPT ON ERROR). */
export const MAX_RETRIES = 2;

/** `constants.Turn_logs` values: the GM event types the scorer reads. */
export const TurnLogs = {
  VALIDATION_ERROR: "validation error",
  CLUE: "clue",
  TARGETS: "targets",
  GUESSES: "guesses",
  TEAM_REVEALED: "team revealed",
  OPPONENT_REVEALED: "opponent revealed",
  TARGET_REVEALED: "target revealed",
  WORD_TARGETED: "word targeted",
  TURN_END_AFTER: "turn end after",
  BOARD_STATUS: "board status",
} as const;

export const BOARD_END_STATUS = "board end status";
export const NUMBER_OF_TURNS = "Number of turns";
export const GAME_ENDED_THROUGH_ASSASSIN = "Game ended through assassin";

const templateCache = new Map<string, string>();

function loadTemplate(dataDir: string, folder: string, name: string): string {
  const path = join(dataDir, "codenames", "resources", folder, `${name}.template`);
  let text = templateCache.get(path);
  if (text === undefined) {
    if (!existsSync(path)) throw new ResourceError(`clembench resource missing: ${path}`);
    text = readFileSync(path, "utf8");
    templateCache.set(path, text);
  }
  return text;
}

export class CodenamesMaster extends DialogueGameMaster {
  cluegiver!: ClueGiver;
  guesser!: Guesser;
  board!: CodenamesBoard;
  readonly opponentDifficulty: number;
  readonly flags: CodenamesFlags;
  aborted = false;
  lost = false;
  assassinWon = false;
  invalidResponse = false;
  requestCount = 0;
  parsedRequestCount = 0;
  violatedRequestCount = 0;
  lastErrorMessage = "";
  /** This episode's place in the run order (-1 without a sequencer). */
  private readonly ticket: number;

  constructor(
    gameName: string,
    experiment: Experiment,
    private readonly backends: PlayerBackend[],
    private readonly ctx: GameContext,
    /** The benchmark run's `random` (seeded once with 42 at benchmark start). */
    private readonly rng: PythonRandom,
    /** Orders the episodes that share `rng` (see EpisodeSequencer); none = no ordering. */
    private readonly sequencer?: EpisodeSequencer,
  ) {
    super(gameName, experiment);
    const where = `${gameName}/${experiment.name}`;
    const difficulty = field<unknown>(experiment, "opponent difficulty", where);
    if (!Number.isInteger(difficulty) || (difficulty as number) < 0)
      throw new InstanceError(`${where}: "opponent difficulty" must be a non-negative integer`);
    this.opponentDifficulty = difficulty as number;
    this.flags = parseFlags(field(experiment, "flags", where), where);
    this.ticket = sequencer ? sequencer.take() : -1;
  }

  private finishTicket(): void {
    if (this.sequencer) this.sequencer.finish(this.ticket);
  }

  /** A failed setup frees the episode's place in the run order. */
  override async setup(instance: GameInstance): Promise<void> {
    try {
      await super.setup(instance);
    } catch (e) {
      this.finishTicket();
      throw e;
    }
  }

  /** Waits until the codenames episodes created before this one have finished (their draws come first). */
  override async play(): Promise<void> {
    if (this.sequencer) await this.sequencer.waitTurn(this.ticket);
    try {
      await super.play();
    } finally {
      this.finishTicket();
    }
  }

  protected onSetup(instance: GameInstance): void {
    const where = `${this.gameName}/${this.experiment.name}/${instance.game_id}`;
    const a = field<Record<string, unknown>>(instance, "assignments", where);
    const board = field<unknown>(instance, "board", where);
    const words = (key: string): string[] => {
      const v = a?.[key];
      if (!Array.isArray(v) || v.some((w) => typeof w !== "string"))
        throw new InstanceError(`${where}: assignments.${key} must be a list of words`);
      return v as string[];
    };
    if (!Array.isArray(board) || board.some((w) => typeof w !== "string"))
      throw new InstanceError(`${where}: "board" must be a list of words`);
    const lemmatizer = loadWordNetLemmatizer(this.ctx.dataDir);
    for (const w of board as string[])
      if (!lemmatizer.boardWords.has(w))
        throw new ResourceError(
          `${where}: board word "${w}" is not covered by codenames/wordnet-nouns.json (regenerate it with make_wordnet_table.py)`,
        );
    this.board = new CodenamesBoard(
      words(TEAM),
      words(OPPONENT),
      words(INNOCENT),
      words(ASSASSIN),
      board as string[],
      this.flags,
    );
    this.cluegiver = new ClueGiver(this.backends[0], this.flags, lemmatizer);
    this.guesser = new Guesser(this.backends[1] ?? this.backends[0], this.flags);
    this.addPlayer(this.cluegiver);
    this.addPlayer(this.guesser);
  }

  private wasTarget(word: string): boolean {
    return this.cluegiver.targets.includes(word);
  }

  private cluegiverPrompt(initial: boolean): string {
    const folder = initial ? "initial_prompts" : "intermittent_prompts";
    return templateSubstitute(loadTemplate(this.ctx.dataDir, folder, "prompt_cluegiver"), {
      team_words: this.board.getHiddenWords(TEAM).join(", "),
      opponent_words: this.board.getHiddenWords(OPPONENT).join(", "),
      innocent_words: this.board.getHiddenWords(INNOCENT).join(", "),
      assassin_words: this.board.getHiddenWords(ASSASSIN).join(", "),
    });
  }

  private guesserPrompt(folder: "initial_prompts" | "intermittent_prompts"): string {
    return templateSubstitute(loadTemplate(this.ctx.dataDir, folder, "prompt_guesser"), {
      board: this.board.getAllHiddenWords().join(", "),
      clue: this.cluegiver.clue,
      number: String(this.cluegiver.numberOfTargets),
    });
  }

  protected override onBeforeGame(): void {
    this.setContextFor(this.cluegiver, this.cluegiverPrompt(true));
  }

  protected override onBeforeRound(): void {
    this.logToSelf(TurnLogs.BOARD_STATUS, this.board.getCurrentBoard());
    this.cluegiver.retries = 0;
    this.guesser.retries = 0;
  }

  /** Has side effects, as in the reference: sets aborted/lost, logs "game end" and the end keys every time it finds the game over. */
  protected doesGameProceed(): boolean {
    let go = true;
    if (this.invalidResponse) {
      this.aborted = true;
      go = false;
    }
    if (this.board.hasTeamWon()) {
      this.lost = false;
      this.assassinWon = false;
      go = false;
      this.logToSelf("game end", "team has won");
    } else if (this.board.hasOpponentWon()) {
      this.lost = true;
      this.assassinWon = false;
      go = false;
      this.logToSelf("game end", "opponent has won");
    } else if (this.board.hasTeamWonThroughAssassin()) {
      this.lost = false;
      this.assassinWon = true;
      go = false;
      this.logToSelf("game end", "team has won through assassin");
    } else if (this.board.hasOpponentWonThroughAssassin()) {
      this.lost = true;
      this.assassinWon = true;
      go = false;
      this.logToSelf("game end", "opponent has won through assassin");
    }
    if (!go) {
      this.logGameEndKeys();
      return false;
    }
    return true;
  }

  protected validatePlayerResponse(player: Player, utterance: string): boolean {
    this.requestCount += 1;
    this.invalidResponse = false;
    try {
      if (player === this.cluegiver)
        this.cluegiver.validateResponse(utterance, this.board.getRevealedWords(TEAM), this.board.getAllHiddenWords());
      else
        this.guesser.validateResponse(
          utterance,
          this.board.getRevealedWords(TEAM),
          this.board.getAllHiddenWords(),
          this.cluegiver.numberOfTargets,
          this.cluegiver.clue,
        );
    } catch (e) {
      if (!(e instanceof CodenamesRuleViolation)) throw e;
      this.logToSelf(TurnLogs.VALIDATION_ERROR, e.attributes);
      this.invalidResponse = true;
      this.violatedRequestCount += 1;
      this.lastErrorMessage = e.message;
    }
    return !this.invalidResponse;
  }

  protected override parseResponse(player: Player, utterance: string): string {
    this.parsedRequestCount += 1;
    if (player === this.cluegiver) {
      const parsed = this.cluegiver.parseResponse(utterance, this.board.getAllHiddenWords());
      this.logToSelf(TurnLogs.CLUE, this.cluegiver.clue);
      this.logToSelf(TurnLogs.TARGETS, this.cluegiver.targets);
      return parsed;
    }
    const parsed = this.guesser.parseResponse(utterance, this.board.getAllHiddenWords());
    this.logToSelf(TurnLogs.GUESSES, this.guesser.guesses);
    return parsed;
  }

  /**
   * REPROMPT ON ERROR keeps the turn with the player, but `_does_game_proceed` still ends the game as aborted
   * right after (the reference's reprompt never gets answered; kept).
   */
  protected override shouldPassTurn(): boolean {
    const player = this.currentPlayer as ClueGiver | Guesser;
    if (player.flags["REPROMPT ON ERROR"] && player.retries < MAX_RETRIES && this.invalidResponse) {
      player.retries += 1;
      player.flagsEngaged["REPROMPT ON ERROR"] += 1;
      this.setContextFor(player, `Your answer did not follow the requested format: ${this.lastErrorMessage}`);
      return false;
    }
    return true;
  }

  protected onValidPlayerResponse(player: Player): void {
    if (player === this.cluegiver) {
      for (const target of this.cluegiver.targets)
        this.logToSelf(TurnLogs.WORD_TARGETED, { word: target, assignment: this.board.getWordAssignment(target) });
      if (this.currentRound === 0) this.setContextFor(this.guesser, this.guesserPrompt("initial_prompts"));
      else {
        // the reference appends to the guesser's pending context (its last feedback) in place
        const context = this.getContextFor(this.guesser);
        this.setContextFor(this.guesser, `${context.content}\n${this.guesserPrompt("intermittent_prompts")}`);
      }
      return;
    }
    const evaluated: [string, string][] = [];
    for (const guess of this.guesser.guesses) {
      const assignment = this.board.revealWord(guess);
      if (!assignment) continue;
      evaluated.push([guess, assignment]);
      this.logToSelf(TurnLogs.TEAM_REVEALED, { word: guess, assignment });
      if (this.wasTarget(guess)) this.logToSelf(TurnLogs.TARGET_REVEALED, { word: guess, assignment });
      if (!this.board.shouldContinueAfterRevealing(guess)) {
        this.logToSelf(TurnLogs.TURN_END_AFTER, guess);
        break;
      }
    }
    let feedback = "";
    const last = evaluated[evaluated.length - 1];
    if (last[1] === TEAM) {
      if (evaluated.length >= 2)
        feedback = `The words ${evaluated.map(([g]) => g).join(", ")} were guessed correctly. `;
      else feedback = `The word ${evaluated[0][0]} was guessed correctly. `;
    } else {
      const correct = evaluated.slice(0, -1);
      if (correct.length >= 2) feedback += `The words ${correct.map(([g]) => g).join(", ")} were guessed correctly. `;
      else if (correct.length === 1) feedback += `The word ${correct[0][0]} was guessed correctly. `;
      feedback += `The word ${last[0]} was guessed but is an ${last[1]} word. `;
    }
    this.setContextFor(this.guesser, `${feedback}Your turn ended there.`);
    this.setContextFor(this.cluegiver, `${feedback}Your teammate's turn ended there.\n${this.cluegiverPrompt(false)}`);
  }

  protected override onAfterRound(): void {
    if (this.doesGameProceed()) this.opponentTurn();
  }

  /** The mock opponent reveals `opponent difficulty` of its hidden words, drawn with Python's `random.sample`. */
  private opponentTurn(): void {
    const hidden = this.board.getHiddenWords(OPPONENT);
    const words = pySample(this.rng, hidden, Math.min(this.opponentDifficulty, hidden.length));
    for (const word of words) {
      const assignment = this.board.revealWord(word, OPPONENT);
      this.logToSelf(TurnLogs.OPPONENT_REVEALED, { word, assignment });
    }
  }

  private logGameEndKeys(): void {
    this.logKey(BOARD_END_STATUS, this.board.getCurrentBoard());
    this.logKey(NUMBER_OF_TURNS, this.currentRound + 1);
    this.logKey(M.METRIC_ABORTED, this.aborted);
    this.logKey(M.METRIC_LOSE, this.lost);
    this.logKey(GAME_ENDED_THROUGH_ASSASSIN, this.assassinWon);
    this.logKey(M.METRIC_REQUEST_COUNT, this.requestCount);
    this.logKey(M.METRIC_REQUEST_COUNT_PARSED, this.parsedRequestCount);
    this.logKey(M.METRIC_REQUEST_COUNT_VIOLATED, this.violatedRequestCount);
    this.logKey("Cluegiver engaged flags", this.cluegiver.flagsEngaged);
    this.logKey("Guesser engaged flags", this.guesser.flagsEngaged);
  }
}
