// Seeded starts: saved environment states that new episodes begin from (the seeds' "wall-state"
// collection: the states where the policy got stuck, replayed so training sees them again).
// States come from trajectories run with `recordStates` (turn.stateAfter) or from anywhere an
// environment's getState() was saved. Pure apart from the file helpers in jsonl-file.ts.

import { z } from "zod";
import { SeededStartError } from "./errors.js";
import type { EpisodeSpec } from "./runner.js";
import type { Trajectory, TurnRecord } from "./trajectory.js";

export interface SeededStart {
  id: string;
  /** Seed for whatever randomness remains after the state (e.g. a user simulator). */
  seed: number;
  environment: { id: string; version: string };
  state: unknown;
  /** Where the state was captured. */
  source?: { episodeId: string; turn: number };
  note?: string;
}

export const seededStartSchema = z.object({
  id: z.string().min(1),
  seed: z.number().int(),
  environment: z.object({ id: z.string(), version: z.string() }),
  state: z.unknown().refine((v) => v !== undefined, "state is required"),
  source: z.object({ episodeId: z.string(), turn: z.number().int() }).optional(),
  note: z.string().optional(),
});

/**
 * Collects the states after the turns `select` picks. Needs trajectories recorded with
 * `recordStates: true`; a selected turn without a state throws.
 */
export function collectSeededStarts(
  trajectories: readonly Trajectory[],
  select: (trajectory: Trajectory, turn: TurnRecord) => boolean,
): SeededStart[] {
  const out: SeededStart[] = [];
  for (const traj of trajectories) {
    for (const turn of traj.turns) {
      if (!select(traj, turn)) continue;
      if (turn.stateAfter === undefined) {
        throw new SeededStartError(
          `episode ${traj.episodeId} turn ${turn.index}: no stateAfter recorded (run episodes with recordStates: true)`,
        );
      }
      out.push({
        id: `${traj.episodeId}@${turn.index}`,
        seed: traj.seed,
        environment: { ...traj.environment },
        state: structuredClone(turn.stateAfter),
        source: { episodeId: traj.episodeId, turn: turn.index },
      });
    }
  }
  return out;
}

/** Validates records read from a file as seeded starts. */
export function parseSeededStarts(records: readonly unknown[]): SeededStart[] {
  return records.map((r, i) => {
    const parsed = seededStartSchema.safeParse(r);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new SeededStartError(`seeded start ${i + 1}: ${issue.path.join(".") || "(root)"}: ${issue.message}`);
    }
    return parsed.data as SeededStart;
  });
}

/**
 * Episode specs for `runEpisodes`, `repeats` episodes per start with distinct seeds.
 * Starts captured in another environment (id or version) are refused.
 */
export function seededStartSpecs(
  starts: readonly SeededStart[],
  env: { id: string; version: string },
  repeats = 1,
): EpisodeSpec[] {
  const specs: EpisodeSpec[] = [];
  for (const s of starts) {
    if (s.environment.id !== env.id || s.environment.version !== env.version) {
      throw new SeededStartError(
        `seeded start ${s.id} was captured in ${s.environment.id}@${s.environment.version}, not ${env.id}@${env.version}`,
      );
    }
    for (let r = 0; r < repeats; r++) {
      specs.push({
        id: repeats === 1 ? `start:${s.id}` : `start:${s.id}#${r}`,
        seed: r === 0 ? s.seed : (s.seed + r * 0x9e3779b1) >>> 0,
        state: structuredClone(s.state),
        metadata: { seededStart: s.id },
      });
    }
  }
  return specs;
}
