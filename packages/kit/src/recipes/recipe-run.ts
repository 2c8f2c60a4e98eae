// What every recipe shares: its run directory, progress bars, trajectory files, adapter
// checkpoints and a default evaluation (episodes of the training environment).
import { join } from "node:path";
import { writeSafetensorsFile } from "@kiln/hub-io";
import { type LoraAdapter, saveAdapter } from "@kiln/lora";
import type { Optimizer } from "@kiln/tensor";
import {
  type EpisodeLimits,
  type Environment,
  type GenerateParams,
  type Policy,
  ProgressBar,
  type Trajectory,
  TrajectoryWriter,
  runEpisodes,
} from "@kiln/rollout";
import type { RunDir } from "../run-dir.js";
import { isSuccessful } from "./sft-set.js";

export interface RecipeIo {
  /** Root of run directories (default "runs"). */
  out?: string;
  name?: string;
  /** Progress bars on stderr (default true). */
  progress?: boolean;
  log?: (line: string) => void;
}

export function progressBar(io: RecipeIo, label: string, total: number): ProgressBar {
  return new ProgressBar({ total, label, stream: io.progress === false ? null : undefined });
}

export async function writeRollouts(run: RunDir, file: string, trajectories: readonly Trajectory[]): Promise<string> {
  const path = run.file("rollouts", file);
  const writer = await TrajectoryWriter.open(path, { mode: "overwrite", sync: false });
  for (const t of trajectories) await writer.append(t);
  await writer.close();
  await run.recordDataset(`rollouts/${file}`, path);
  return path;
}

/**
 * optimizer.safetensors: each moment buffer under `<buffer>.<parameter name>` (f32), with the
 * optimizer kind, step, lr and hyper-parameters in the header metadata (strings, as safetensors wants).
 */
export async function saveOptimizerState(path: string, optimizer: Optimizer, names: readonly string[]): Promise<void> {
  const state = optimizer.stateDict();
  const tensors: Record<string, { dtype: "F32"; shape: number[]; data: Uint8Array }> = {};
  for (const [buffer, arrays] of Object.entries(state.buffers)) {
    arrays.forEach((a, i) => {
      const name = names[i] ?? `param.${i}`;
      tensors[`${buffer}.${name}`] = {
        dtype: "F32",
        shape: [a.length],
        data: new Uint8Array(a.buffer, a.byteOffset, a.byteLength),
      };
    });
  }
  await writeSafetensorsFile(path, tensors, {
    kind: state.kind,
    step: String(state.step),
    lr: String(state.lr),
    hyper: JSON.stringify(state.hyper),
  });
}

/**
 * checkpoints/step-N/ (or a named folder): PEFT adapter files, trainer_state.json and, when
 * given, the optimizer's state (optimizer.safetensors) keyed by the adapter's parameter names.
 */
export async function saveCheckpoint(
  run: RunDir,
  label: number | string,
  adapter: LoraAdapter,
  state: Record<string, unknown>,
  optimizer?: Optimizer,
): Promise<string> {
  const dir = typeof label === "number" ? run.checkpointDir(label) : run.file("checkpoints", label);
  await saveAdapter(adapter, dir);
  if (optimizer)
    await saveOptimizerState(
      join(dir, "optimizer.safetensors"),
      optimizer,
      adapter.namedParameters().map(([n]) => n),
    );
  const rel = typeof label === "number" ? join("checkpoints", `step-${label}`) : join("checkpoints", label);
  await run.writeJson(join(rel, "trainer_state.json"), state);
  return dir;
}

export interface EpisodeEval {
  episodes: number;
  success_rate: number;
  success_se: number;
  mean_score: number;
  score_se: number;
}

function meanSe(xs: number[]): [number, number] {
  const n = xs.length;
  if (n === 0) return [Number.NaN, Number.NaN];
  const m = xs.reduce((a, b) => a + b, 0) / n;
  if (n < 2) return [m, 0];
  const v = xs.reduce((a, b) => a + (b - m) ** 2, 0) / (n - 1);
  return [m, Math.sqrt(v / n)];
}

export function summarizeEpisodes(trajectories: readonly Trajectory[]): EpisodeEval {
  const [success, successSe] = meanSe(trajectories.map((t) => (isSuccessful(t) ? 1 : 0)));
  const [score, scoreSe] = meanSe(trajectories.map((t) => t.outcome.score));
  return {
    episodes: trajectories.length,
    success_rate: success,
    success_se: successSe,
    mean_score: score,
    score_se: scoreSe,
  };
}

/** Play `episodes` episodes of the environment and summarise success and score (mean ± SE). */
export async function evaluateEpisodes(options: {
  makeEnv: () => Environment;
  policy: Policy;
  episodes: number;
  baseSeed?: number;
  params?: GenerateParams;
  limits?: EpisodeLimits;
}): Promise<{ summary: EpisodeEval; trajectories: Trajectory[] }> {
  const r = await runEpisodes({
    makeEnv: options.makeEnv,
    policy: options.policy,
    episodes: options.episodes,
    baseSeed: options.baseSeed ?? 1000,
    params: options.params,
    limits: options.limits,
    concurrency: 1,
  });
  return { summary: summarizeEpisodes(r.trajectories), trajectories: r.trajectories };
}
