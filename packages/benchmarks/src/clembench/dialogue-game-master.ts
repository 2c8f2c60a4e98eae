import { GameProtocolError } from "./errors.js";
import type { Experiment, GameInstance } from "./instances.js";
import { InteractionsRecorder } from "./interactions.js";
import * as M from "./metrics.js";
import type { Context, Player } from "./player.js";

/** How a game with one answering player ended, and its request counters (static benchmarks, wordle). */
export interface RequestOutcome {
  aborted: boolean;
  failure: boolean;
  success: boolean;
  requestCounts: number;
  parsedRequestCounts: number;
  violatedRequestCounts: number;
}

/**
 * clemcore's legacy `DialogueGameMaster` turn loop (clemcore 3.x, `clemgame/legacy/master.py` as of
 * 2025-08, the loop the clembench 2.x games were written against).
 *
 * - Players are called in the order they were added; each call is one turn, rounds group turns.
 * - An initial prompt is glued in front of a player's first context with a blank line.
 * - For each response: validate (invalid → parse and the on-valid hook are skipped), decide whether the
 *   turn passes (no = reprompt the same player), whether a round ends, whether the game goes on.
 * - `currentRound` starts at 0; setup runs `onSetup`, `onBeforeGame`, `onBeforeRound`.
 */
export abstract class DialogueGameMaster {
  recorder!: InteractionsRecorder;
  readonly players: Player[] = [];
  protected readonly contextFor = new Map<string, Context>();
  protected readonly initialPromptFor = new Map<string, Context>();
  currentRound = 0;
  protected currentPlayerIdx = 0;
  currentPlayer!: Player;
  private started = false;

  constructor(
    readonly gameName: string,
    readonly experiment: Experiment,
  ) {}

  /** Add a player; its name becomes "Player N" in the order added (which is also the call order). */
  protected addPlayer(player: Player, opts: { initialPrompt?: string; initialContext?: string } = {}): void {
    player.name = `Player ${this.players.length + 1}`;
    this.players.push(player);
    this.recorder.logPlayer(player.name, player.gameRole, player.modelName);
    if (opts.initialPrompt !== undefined) this.setInitialPromptFor(player, opts.initialPrompt);
    if (opts.initialContext !== undefined) this.setContextFor(player, opts.initialContext);
  }

  protected setInitialPromptFor(player: Player, content: string): void {
    if (this.started) throw new GameProtocolError(`${this.gameName}: the initial prompt can only be set during setup`);
    this.initialPromptFor.set(player.name, { role: "user", content });
  }

  setContextFor(player: Player, content: string): void {
    this.contextFor.set(player.name, { role: "user", content });
  }

  /** The context for a player, with a pending initial prompt prefixed (and consumed). */
  getContextFor(player: Player): Context {
    const context = this.contextFor.get(player.name);
    if (!context) throw new GameProtocolError(`${this.gameName}: no context set for ${player.name}`);
    const initial = this.initialPromptFor.get(player.name);
    if (initial) {
      this.initialPromptFor.delete(player.name);
      return { role: "user", content: `${initial.content}\n\n${context.content}` };
    }
    return context;
  }

  /** Prepare an episode for `instance` (the merged experiment + instance fields). */
  async setup(instance: GameInstance): Promise<void> {
    this.recorder = new InteractionsRecorder(this.gameName, String(this.experiment.name), instance.game_id);
    this.onSetup(instance);
    this.currentPlayer = this.players[this.currentPlayerIdx];
    await this.onBeforeGame();
    this.started = true;
    this.onBeforeRound();
  }

  /** Send a context to a player, log both events (GM→player, player→GM), return the reply. */
  async callPlayer(player: Player, context: Context, memorize = true): Promise<string> {
    this.recorder.logEvent("GM", player.name, {
      type: "send message",
      content: context.content,
      label: memorize ? "context" : "forget",
    });
    const perspective = [...player.messages, { role: "user" as const, content: context.content }];
    const response = await player.backend.respond(perspective, context);
    if (memorize) {
      player.messages.push({ role: "user", content: context.content });
      player.messages.push({ role: "assistant", content: response });
    }
    this.recorder.logEvent(player.name, "GM", {
      type: "get message",
      content: response,
      label: memorize ? "response" : "forget",
    });
    return response;
  }

  /** Play the episode to its end. */
  async play(): Promise<void> {
    for (;;) {
      const player = this.currentPlayer;
      const context = this.getContextFor(player);
      const response = await this.callPlayer(player, context);
      if (await this.step(response)) return;
    }
  }

  /** Apply the current player's response; returns true when the game is over. */
  async step(response: string): Promise<boolean> {
    const player = this.currentPlayer;
    if (this.validatePlayerResponse(player, response)) {
      const parsed = this.parseResponse(player, response);
      await this.onValidPlayerResponse(player, parsed);
    }
    if (this.shouldPassTurn()) this.currentPlayer = this.nextPlayer();
    if (this.startNextRound()) {
      this.onAfterRound();
      this.currentRound += 1; // before doesGameProceed, which may rely on it
    }
    const done = !this.doesGameProceed();
    if (done) {
      this.onAfterGame();
      this.recorder.logGameEnd();
    } else if (this.startNextRound()) {
      this.recorder.logNextRound();
      this.onBeforeRound();
    }
    return done;
  }

  /** Log a GM-to-GM event (not seen by players). */
  logToSelf(type: string, content: unknown): void {
    this.recorder.logEvent("GM", "GM", { type, content });
  }

  logKey(key: string, value: unknown): void {
    this.recorder.logKey(key, value);
  }

  /** The outcome and request-count keys a game with one answering player logs at its end, in clemcore's order. */
  protected logRequestOutcome(o: RequestOutcome): void {
    this.logKey(M.METRIC_ABORTED, o.aborted ? 1 : 0);
    this.logKey(M.METRIC_LOSE, o.failure ? 1 : 0);
    this.logKey(M.METRIC_SUCCESS, o.success ? 1 : 0);
    this.logKey(M.METRIC_REQUEST_COUNT, o.requestCounts);
    this.logKey(M.METRIC_REQUEST_COUNT_PARSED, o.parsedRequestCounts);
    this.logKey(M.METRIC_REQUEST_COUNT_VIOLATED, o.violatedRequestCounts);
  }

  protected abstract onSetup(instance: GameInstance): void;
  protected abstract validatePlayerResponse(player: Player, response: string): boolean;
  /** May call players (privateshared probes the answerer here), hence async-capable. */
  protected abstract onValidPlayerResponse(player: Player, parsed: string | null): void | Promise<void>;
  protected abstract doesGameProceed(): boolean;

  protected parseResponse(_player: Player, response: string): string | null {
    return response;
  }
  protected shouldPassTurn(): boolean {
    return true;
  }
  protected nextPlayer(): Player {
    this.currentPlayerIdx = (this.currentPlayerIdx + 1) % this.players.length;
    return this.players[this.currentPlayerIdx];
  }
  protected startNextRound(): boolean {
    return this.currentPlayerIdx === 0;
  }
  /** May call players (privateshared's preliminary probing), hence async-capable. */
  protected onBeforeGame(): void | Promise<void> {}
  protected onBeforeRound(): void {}
  protected onAfterRound(): void {}
  protected onAfterGame(): void {}
}
