// Trainer checkpoints: checkpoints/<stage>/step-N/ holds the PEFT adapter files, the
// optimizer's moments (optimizer.safetensors) and trainer_state.json (step, data cursor, RNG
// position, schedule, log history). A checkpoint is written into step-N.partial/ and renamed
// when complete, so a process killed mid-write leaves the previous checkpoint as the latest.
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { SafetensorsFile, readPeftAdapter, toFloat32, writeFileAtomic, writeSafetensorsFile } from "@kiln/hub-io";
import { type LoraAdapter, saveAdapter } from "@kiln/lora";
import type { Optimizer, OptimizerState, Tensor } from "@kiln/tensor";
import { TrainerError } from "./errors.js";

export interface TrainerState {
  stage: string;
  /** Optimizer steps done. */
  global_step: number;
  /** Steps this stage runs in total. */
  max_steps: number;
  /** Examples consumed from the shuffled stream (epoch = floor(cursor / dataset size)). */
  cursor: number;
  epoch: number;
  /** Position of @kiln/tensor's shared RNG sequence (LoRA dropout draws). */
  rng_sequence: number;
  seed: number;
  lr: number;
  log_history: Record<string, number | string>[];
  /** Set on the last checkpoint of a stage. */
  complete?: boolean;
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

/** Read what saveOptimizerState wrote back into an OptimizerState (buffers in `names` order). */
export async function readOptimizerState(path: string, names: readonly string[]): Promise<OptimizerState> {
  const file = await SafetensorsFile.open(path);
  try {
    const meta = file.metadata ?? {};
    const buffers: Record<string, Float32Array[]> = {};
    const kinds = new Set(file.keys().map((k) => k.slice(0, k.indexOf("."))));
    for (const buffer of kinds) {
      buffers[buffer] = await Promise.all(
        names.map(async (n) => {
          const key = `${buffer}.${n}`;
          if (!file.has(key)) throw new TrainerError(`${path}: optimizer state lacks ${key}`);
          return Float32Array.from(await file.readFloat32(key));
        }),
      );
    }
    return {
      kind: meta.kind ?? "adamw",
      step: Number(meta.step ?? 0),
      lr: Number(meta.lr ?? 0),
      hyper: JSON.parse(meta.hyper ?? "{}"),
      buffers,
    };
  } finally {
    await file.close();
  }
}

/** Overwrite a parameter's values in place (its storage stays the one the optimizer updates). */
export function assignValues(t: Tensor, values: Float32Array): void {
  if (values.length !== t.size)
    throw new TrainerError(`checkpoint: ${t.name ?? "parameter"} has ${t.size} values, file has ${values.length}`);
  t.f32Sync().set(values);
}

export function stageCheckpointRoot(runPath: string, stage: string): string {
  return join(runPath, "checkpoints", stage);
}

/** The highest complete step-N directory of a stage, or null. */
export function latestCheckpoint(runPath: string, stage: string): { dir: string; state: TrainerState } | null {
  const root = stageCheckpointRoot(runPath, stage);
  if (!existsSync(root)) return null;
  const steps = readdirSync(root)
    .map((n) => /^step-(\d+)$/.exec(n))
    .filter((m): m is RegExpExecArray => m !== null && existsSync(join(root, m[0], "trainer_state.json")))
    .map((m) => Number(m[1]))
    .sort((a, b) => b - a);
  if (steps.length === 0) return null;
  const dir = join(root, `step-${steps[0]}`);
  return { dir, state: JSON.parse(readFileSync(join(dir, "trainer_state.json"), "utf8")) as TrainerState };
}

export async function saveTrainerCheckpoint(
  runPath: string,
  adapter: LoraAdapter,
  optimizer: Optimizer,
  state: TrainerState,
): Promise<string> {
  const root = stageCheckpointRoot(runPath, state.stage);
  const final = join(root, `step-${state.global_step}`);
  const partial = `${final}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  await saveAdapter(adapter, partial);
  await saveOptimizerState(
    join(partial, "optimizer.safetensors"),
    optimizer,
    adapter.namedParameters().map(([n]) => n),
  );
  await writeFileAtomic(join(partial, "trainer_state.json"), `${JSON.stringify(state, null, 2)}\n`);
  rmSync(final, { recursive: true, force: true });
  renameSync(partial, final);
  return final;
}

/** Put a checkpoint's adapter weights and optimizer moments back into the live objects. */
export async function restoreTrainerCheckpoint(dir: string, adapter: LoraAdapter, optimizer: Optimizer): Promise<void> {
  const peft = await readPeftAdapter(dir);
  for (const [module, layer] of adapter.layers) {
    const saved = peft.layers.get(module);
    if (!saved) throw new TrainerError(`${dir}: checkpoint has no LoRA weights for ${module}`);
    // saveAdapter bakes a runtime scale multiplier into B; training runs at multiplier 1.
    if (layer.scaleMultiplier !== 1) throw new TrainerError("resume: the adapter must be at scale 1 while training");
    assignValues(layer.A, toFloat32(saved.A));
    assignValues(layer.B, toFloat32(saved.B));
  }
  const names = adapter.namedParameters().map(([n]) => n);
  optimizer.loadStateDict(await readOptimizerState(join(dir, "optimizer.safetensors"), names));
}
