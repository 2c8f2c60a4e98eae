// Checkpoints of `kiln agent-model`: a build runs 70–140 minutes on two cores, so every
// AGENT_MODEL_CHECKPOINT_EVERY steps it leaves <out>.checkpoint/ (the weights, AdamW's moments, the steps
// done and the running loss) and `--resume` continues from there to the same bytes an uninterrupted build
// writes. A checkpoint is written into <out>.checkpoint.partial/ and renamed, so a process killed while
// writing leaves the previous one. What the build trains on must be what the checkpoint was made from: the
// settings and a digest of the tokenized corpus are compared, and a mismatch is an error naming what differs.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { SafetensorsFile, writeFileAtomic, writeSafetensorsFile } from "@kiln/hub-io";
import type { Model } from "@kiln/models";
import type { Optimizer } from "@kiln/tensor";
import { assignValues, readOptimizerState, saveOptimizerState } from "../trainer/checkpoints.js";

/** Steps between checkpoints: about three minutes of the default build on two cores. */
export const AGENT_MODEL_CHECKPOINT_EVERY = 200;

const FORMAT = "kiln-agent-model-checkpoint/1";

export class AgentModelCheckpointError extends Error {
  override name = "AgentModelCheckpointError";
}

/** Where a build of `outDir` keeps its checkpoint until it finishes. */
export function agentModelCheckpointDir(outDir: string): string {
  return `${outDir}.checkpoint`;
}

/** What a resumed build must share with the checkpoint, besides the corpus (same values ⇒ same training). */
export type BuildSettings = Record<string, number | string | Record<string, number>>;

export interface BuildCheckpointState {
  format: typeof FORMAT;
  /** Steps done. */
  step: number;
  settings: BuildSettings;
  /** SHA-256 of every training row's token ids and loss mask, in corpus order. */
  corpusSha256: string;
  /**
   * The BLAS kernel the steps ran on (native backend; null elsewhere). Another kernel rounds differently, so a resume
   * on it is allowed but equals no uninterrupted build bit for bit.
   */
  blas: string | null;
  lossFirst: number;
  lossLast: number;
  lossEma: number;
}

/** SHA-256 over the rows the build trains on: equal digests mean the same tokens, masks and order. */
export function corpusDigest(rows: readonly { ids: Int32Array; mask: Uint8Array }[]): string {
  const hash = createHash("sha256");
  const length = new Int32Array(1);
  for (const r of rows) {
    length[0] = r.ids.length;
    hash.update(new Uint8Array(length.buffer));
    hash.update(new Uint8Array(r.ids.buffer, r.ids.byteOffset, r.ids.byteLength));
    hash.update(r.mask);
  }
  return hash.digest("hex");
}

/** The checkpoint's state, or null where none is complete. */
export function readBuildCheckpoint(dir: string): BuildCheckpointState | null {
  const path = join(dir, "state.json");
  if (!existsSync(path)) return null;
  let state: BuildCheckpointState;
  try {
    state = JSON.parse(readFileSync(path, "utf8")) as BuildCheckpointState;
  } catch (err) {
    throw new AgentModelCheckpointError(`${path} is not valid JSON (${(err as Error).message})`);
  }
  if (state.format !== FORMAT)
    throw new AgentModelCheckpointError(`${path}: format "${String(state.format)}" is not ${FORMAT}`);
  return state;
}

/**
 * The checkpoint a build of `outDir` continues from (null: it starts from step 0). An unfinished build's
 * checkpoint is never replaced unasked, and `--resume` with nothing to resume is an error: both are reported
 * before anything is built.
 */
export function checkpointToResume(outDir: string, resume: boolean): BuildCheckpointState | null {
  const dir = agentModelCheckpointDir(outDir);
  const found = readBuildCheckpoint(dir);
  if (found && !resume)
    throw new AgentModelCheckpointError(
      `${dir} holds an unfinished build (step ${found.step} of ${found.settings.steps}): --resume continues it; delete that directory to start over`,
    );
  if (!found && resume) throw new AgentModelCheckpointError(`cannot resume: there is no checkpoint at ${dir}`);
  return found;
}

/** Why the checkpoint cannot continue this build (each differing setting, or the corpus), or null. */
export function checkpointMismatch(
  state: BuildCheckpointState,
  settings: BuildSettings,
  corpusSha256: string,
): string | null {
  const keys = [...new Set([...Object.keys(state.settings), ...Object.keys(settings)])].sort();
  const differ = keys
    .filter((k) => JSON.stringify(state.settings[k]) !== JSON.stringify(settings[k]))
    .map((k) => `${k} ${JSON.stringify(state.settings[k])} there, ${JSON.stringify(settings[k])} here`);
  if (differ.length > 0) return `its settings differ: ${differ.join("; ")}`;
  if (state.corpusSha256 !== corpusSha256)
    return "its corpus differs (the code that generates the corpus changed since it was written)";
  return null;
}

/** Writes the weights, the optimizer's moments and `state` as the build's checkpoint (replacing the last). */
export async function writeBuildCheckpoint(
  dir: string,
  model: Model,
  optimizer: Optimizer,
  state: BuildCheckpointState,
): Promise<void> {
  const partial = `${dir}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  const named = trainedParameters(model);
  const tensors: Record<string, { dtype: "F32"; shape: number[]; data: Uint8Array }> = {};
  for (const [name, t] of named) {
    const values = t.f32Sync();
    tensors[name] = {
      dtype: "F32",
      shape: [...t.shape],
      data: new Uint8Array(values.buffer, values.byteOffset, values.byteLength),
    };
  }
  await writeSafetensorsFile(join(partial, "model.safetensors"), tensors);
  await saveOptimizerState(
    join(partial, "optimizer.safetensors"),
    optimizer,
    named.map(([n]) => n),
  );
  await writeFileAtomic(join(partial, "state.json"), `${JSON.stringify(state, null, 2)}\n`);
  rmSync(dir, { recursive: true, force: true });
  renameSync(partial, dir);
}

/** Puts a checkpoint's weights and moments back into the live model and optimizer. */
export async function restoreBuildCheckpoint(dir: string, model: Model, optimizer: Optimizer): Promise<void> {
  const named = trainedParameters(model);
  const file = await SafetensorsFile.open(join(dir, "model.safetensors"));
  try {
    for (const [name, t] of named) {
      if (!file.has(name)) throw new AgentModelCheckpointError(`${dir}/model.safetensors lacks ${name}`);
      assignValues(t, await file.readFloat32(name));
    }
  } finally {
    await file.close();
  }
  optimizer.loadStateDict(
    await readOptimizerState(
      join(dir, "optimizer.safetensors"),
      named.map(([n]) => n),
    ),
  );
}

/** The model's trained (f32) parameters by name, in the order `requireGrad` hands them to the optimizer. */
function trainedParameters(model: Model) {
  return [...model.namedParameters()].filter(([, t]) => t.dtype === "f32");
}
