// Multi-player games: a game master decides whose turn it is and routes each reply's
// consequences to every player's own conversation (clembench's two-player dialogue games).
// Each player has its own policy (or the same policy twice). The result is one Trajectory
// whose turns are tagged with the acting player; `players` holds each opening. Pure.

import {
  countMalformed,
  type EpisodeLimits,
  type EpisodePlayOptions,
  type EpisodeProgress,
  defaultMalformedFeedback,
  emptyStats,
  errorText,
  finish,
  readReply,
  resolveLimits,
  turnSeed,
  withTimeout,
} from "./episode.js";
import { RolloutConfigError } from "./errors.js";
import { cloneMessage, cloneMessages } from "./messages.js";
import { TRAJECTORY_SCHEMA, TRAJECTORY_SCHEMA_VERSION, type Trajectory, type TurnRecord } from "./trajectory.js";
import type { GameMaster, Generation, Message, Policy } from "./types.js";

export interface GameOptions extends EpisodePlayOptions {
  game: GameMaster;
  /** A policy per player name (every name `game.players()` returns). */
  policies: Record<string, Policy>;
  /** maxTurns counts replies of all players together; the malformed limit is per player. */
  limits?: EpisodeLimits;
}

export async function runGame(options: GameOptions): Promise<Trajectory> {
  const limits = resolveLimits(options.limits);
  const { game } = options;
  const t0 = performance.now();
  const players = game.players();
  for (const p of players) {
    if (!options.policies[p]) throw new RolloutConfigError(`runGame: no policy for player "${p}" of ${game.id}`);
  }
  const traj: Trajectory = {
    schema: TRAJECTORY_SCHEMA,
    version: TRAJECTORY_SCHEMA_VERSION,
    episodeId: options.episodeId ?? `game-${options.seed}`,
    seed: options.seed,
    policyId: players.map((p) => `${p}=${options.policies[p].id}`).join(","),
    environment: { id: game.id, version: game.version },
    ...(options.startState !== undefined ? { startState: options.startState } : {}),
    tools: [],
    prompt: [],
    turns: [],
    players: {},
    outcome: { status: "done", totalReward: 0, score: 0, scores: {} },
    stats: emptyStats(),
    ...(options.params ? { params: { ...options.params } } : {}),
    metadata: { ...(options.metadata ?? {}) },
    timings: { startedAt: Date.now(), durationMs: 0 },
  };
  const progress: EpisodeProgress = { trajectory: traj, messages: [], malformedStreak: 0, seedBase: options.seed };
  const conversations: Record<string, Message[]> = {};
  const streaks: Record<string, number> = {};
  try {
    const reset = await game.reset(
      options.startState !== undefined ? { seed: options.seed, state: options.startState } : { seed: options.seed },
    );
    for (const p of players) {
      conversations[p] = cloneMessages(reset.messages[p] ?? []);
      streaks[p] = 0;
      traj.players![p] = {
        policyId: options.policies[p].id,
        prompt: cloneMessages(conversations[p]),
        tools: game.tools(p),
      };
    }
    if (reset.info) traj.metadata.resetInfo = reset.info;
  } catch (err) {
    return finish(progress, game, "error", { kind: "environment", message: errorText(err), turn: 0 }, t0);
  }
  const feedback = options.malformedFeedback ?? defaultMalformedFeedback;
  while (true) {
    const turn = traj.turns.length;
    let player: string | null;
    try {
      player = game.nextPlayer();
    } catch (err) {
      return finish(progress, game, "error", { kind: "environment", message: errorText(err), turn }, t0);
    }
    if (player === null) return finish(progress, game, "done", undefined, t0);
    if (!(player in conversations)) {
      return finish(
        progress,
        game,
        "error",
        { kind: "environment", message: `nextPlayer() named unknown player "${player}"`, turn },
        t0,
      );
    }
    if (turn >= limits.maxTurns) return finish(progress, game, "turn_limit", undefined, t0);
    if (traj.stats.completionTokens >= limits.maxEpisodeTokens)
      return finish(progress, game, "token_limit", undefined, t0);
    const tools = traj.players![player].tools;
    const seed = turnSeed(options.seed, turn);
    const startedAt = Date.now();
    const g0 = performance.now();
    let gen: Generation;
    try {
      gen = await withTimeout(
        options.policies[player].generate(cloneMessages(conversations[player]), tools, { ...options.params, seed }),
        limits.turnTimeoutMs,
      );
    } catch (err) {
      return finish(progress, game, "error", { kind: "policy", message: `${player}: ${errorText(err)}`, turn }, t0);
    }
    const { message, calls, issues } = readReply(gen, conversations[player], tools);
    const record: TurnRecord = {
      index: turn,
      player,
      seed,
      ...(gen.promptTokenIds ? { promptTokenIds: [...gen.promptTokenIds] } : {}),
      ...(gen.completionTokenIds ? { completionTokenIds: [...gen.completionTokenIds] } : {}),
      ...(gen.logprobs ? { logprobs: gen.logprobs.map((l) => l.logprob) } : {}),
      finishReason: gen.finishReason === "stop" && message.tool_calls?.length ? "tool_calls" : gen.finishReason,
      message,
      action: [],
      toolCallIssues: issues,
      observations: [],
      observationsByPlayer: {},
      reward: 0,
      done: false,
      timings: { startedAt, generateMs: performance.now() - g0, stepMs: 0 },
    };
    traj.stats.completionTokens += record.completionTokenIds?.length ?? record.logprobs?.length ?? 0;
    traj.stats.promptTokens += record.promptTokenIds?.length ?? 0;
    conversations[player].push(cloneMessage(message));
    const push = () => {
      traj.turns.push(record);
      traj.outcome.totalReward += record.reward;
    };
    if (issues.length > 0) {
      const obs: Message[] = message.tool_calls?.length
        ? message.tool_calls.map((tc) => ({
            role: "tool",
            tool_call_id: tc.id,
            content: feedback(
              issues.filter((i) => i.callId === tc.id).length ? issues.filter((i) => i.callId === tc.id) : issues,
            ),
          }))
        : [{ role: "user", content: feedback(issues) }];
      record.observations = obs;
      record.observationsByPlayer = { [player]: cloneMessages(obs) };
      conversations[player].push(...cloneMessages(obs));
      streaks[player]++;
      countMalformed(traj.stats, issues, streaks[player]);
      push();
      if (streaks[player] >= limits.maxConsecutiveMalformed)
        return finish(progress, game, "malformed_limit", undefined, t0);
      continue;
    }
    streaks[player] = 0;
    record.action = calls;
    const s0 = performance.now();
    try {
      const result = await game.step(player, { message: cloneMessage(message), toolCalls: structuredClone(calls) });
      for (const [p, msgs] of Object.entries(result.observations)) {
        if (!(p in conversations)) throw new RolloutConfigError(`step() sent observations to unknown player "${p}"`);
        record.observationsByPlayer![p] = cloneMessages(msgs);
        conversations[p].push(...cloneMessages(msgs));
      }
      record.observations = cloneMessages(result.observations[player] ?? []);
      record.reward = result.reward;
      record.done = result.done;
      if (result.info) record.info = result.info;
      if (options.recordStates) record.stateAfter = structuredClone(game.getState());
    } catch (err) {
      record.timings.stepMs = performance.now() - s0;
      push();
      return finish(progress, game, "error", { kind: "environment", message: errorText(err), turn }, t0);
    }
    record.timings.stepMs = performance.now() - s0;
    push();
    if (record.done) return finish(progress, game, "done", undefined, t0);
  }
}
