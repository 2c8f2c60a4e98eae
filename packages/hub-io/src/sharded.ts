// Sharded safetensors checkpoints: `model-0000k-of-0000n.safetensors` + `model.safetensors.index.json`.
// Splitting follows huggingface_hub `serialization/_base.py` (split_state_dict_into_shards_factory);
// the index is written as transformers' save_pretrained does (docs/NUMERICS.md §1.4).

import { readFileText, writeFileAtomic } from "./atomic-file.js";
import { byteSize } from "./dtypes.js";
import { ShardedCheckpointError } from "./errors.js";
import { pythonJsonDumps } from "./python-json.js";
import type { TensorEntry } from "./safetensors-header.js";
import { SafetensorsFile } from "./safetensors-read.js";
import { type TensorInput, type TensorMap, writeSafetensorsFile } from "./safetensors-write.js";

export interface ShardIndex {
  metadata: { total_size: number; total_parameters?: number; [k: string]: unknown };
  weight_map: Record<string, string>;
}

/** huggingface_hub's default (transformers' save_pretrained passes "50GB"). */
export const DEFAULT_MAX_SHARD_SIZE = 5_000_000_000;

/**
 * Group tensors (in the given order) into shards of at most `maxShardSize` data bytes: a tensor is
 * appended to the current shard unless that would exceed the limit; a tensor larger than the limit
 * gets a shard of its own, emitted at that point (as huggingface_hub does).
 */
export function planShards(
  tensors: { name: string; size: number }[],
  maxShardSize = DEFAULT_MAX_SHARD_SIZE,
): string[][] {
  if (!(maxShardSize > 0)) throw new ShardedCheckpointError(`max shard size must be positive, got ${maxShardSize}`);
  const shards: string[][] = [];
  let current: string[] = [];
  let currentSize = 0;
  for (const t of tensors) {
    if (t.size > maxShardSize) {
      shards.push([t.name]);
      continue;
    }
    if (currentSize + t.size > maxShardSize) {
      shards.push(current);
      current = [];
      currentSize = 0;
    }
    current.push(t.name);
    currentSize += t.size;
  }
  if (current.length > 0) shards.push(current);
  return shards;
}

/** `model.safetensors` for one shard, else `model-00001-of-00003.safetensors` (1-based, 5 digits). */
export function shardFileName(index: number, count: number, prefix = "model"): string {
  if (count === 1) return `${prefix}.safetensors`;
  const pad = (n: number) => String(n).padStart(5, "0");
  return `${prefix}-${pad(index + 1)}-of-${pad(count)}.safetensors`;
}

export function indexFileName(prefix = "model"): string {
  return `${prefix}.safetensors.index.json`;
}

/** transformers: json.dumps(index, indent=2, sort_keys=True) + "\n". */
export function serializeShardIndex(index: ShardIndex): string {
  return `${pythonJsonDumps(index, { indent: 2, sortKeys: true })}\n`;
}

function checkRelative(file: string, tensor: string): void {
  if (file.startsWith("/") || file.includes("\\") || file.split("/").includes("..") || file.length === 0) {
    throw new ShardedCheckpointError(
      `weight_map["${tensor}"] = ${JSON.stringify(file)} must be a relative path inside the repo`,
    );
  }
}

/** Parse and validate an index file; unknown metadata keys are kept (newer files add total_parameters). */
export function parseShardIndex(text: string): ShardIndex {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new ShardedCheckpointError(`index is not JSON: ${(e as Error).message}`);
  }
  const o = v as Record<string, unknown>;
  if (!o || typeof o !== "object" || Array.isArray(o)) throw new ShardedCheckpointError("index must be a JSON object");
  const wm = o.weight_map as Record<string, unknown>;
  if (!wm || typeof wm !== "object" || Array.isArray(wm))
    throw new ShardedCheckpointError('index needs a "weight_map" object');
  for (const [k, f] of Object.entries(wm)) {
    if (typeof f !== "string") throw new ShardedCheckpointError(`weight_map["${k}"] must be a file name string`);
    checkRelative(f, k);
  }
  const meta = (o.metadata ?? {}) as Record<string, unknown>;
  if (typeof meta !== "object" || Array.isArray(meta)) throw new ShardedCheckpointError('"metadata" must be an object');
  if (meta.total_size !== undefined && !Number.isSafeInteger(meta.total_size)) {
    throw new ShardedCheckpointError(`metadata.total_size must be an integer, got ${JSON.stringify(meta.total_size)}`);
  }
  return { metadata: meta as ShardIndex["metadata"], weight_map: wm as Record<string, string> };
}

export interface WriteShardedOptions {
  maxShardSize?: number;
  /** `__metadata__` of every shard; transformers writes {format: "pt"}. */
  metadata?: Record<string, string>;
  /** File prefix, "model" (or "adapter_model", "diffusion_pytorch_model", …). */
  prefix?: string;
  /** Stored as metadata.total_parameters when given (transformers ≥ v4.5x writes it). */
  totalParameters?: number;
}

/**
 * Write tensors as one file or as shards + index, atomically per file, streaming one tensor at a time.
 * Returns the index (also for a single shard, where no index file is written).
 */
export async function writeShardedSafetensors(
  dir: string,
  tensors: TensorMap,
  opts: WriteShardedOptions = {},
): Promise<ShardIndex> {
  const { join } = await import("node:path");
  const prefix = opts.prefix ?? "model";
  const list: [string, TensorInput][] = tensors instanceof Map ? [...tensors] : Object.entries(tensors);
  const byName = new Map(list);
  const sized = list.map(([name, t]) => ({ name, size: byteSize(t.dtype, t.shape, name) }));
  const shards = planShards(sized, opts.maxShardSize);
  const index: ShardIndex = {
    metadata: { total_size: sized.reduce((a, t) => a + t.size, 0) },
    weight_map: {},
  };
  if (opts.totalParameters !== undefined) index.metadata.total_parameters = opts.totalParameters;
  for (const [i, names] of shards.entries()) {
    const file = shardFileName(i, shards.length, prefix);
    await writeSafetensorsFile(
      join(dir, file),
      new Map(names.map((n) => [n, byName.get(n)!])),
      opts.metadata ?? { format: "pt" },
    );
    for (const n of names) index.weight_map[n] = file;
  }
  if (shards.length > 1) await writeFileAtomic(join(dir, indexFileName(prefix)), serializeShardIndex(index));
  return index;
}

/** Lazy reader over a sharded (or single-file) checkpoint directory. Node only. */
export class ShardedSafetensors {
  private constructor(
    readonly index: ShardIndex | undefined,
    private readonly files: Map<string, SafetensorsFile>,
    private readonly where: Map<string, string>,
  ) {}

  /** Open `dir/<prefix>.safetensors.index.json` if present, else `dir/<prefix>.safetensors`. */
  static async open(dir: string, prefix = "model"): Promise<ShardedSafetensors> {
    const { join } = await import("node:path");
    let indexText: string | undefined;
    try {
      indexText = await readFileText(join(dir, indexFileName(prefix)));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    }
    const files = new Map<string, SafetensorsFile>();
    const where = new Map<string, string>();
    try {
      if (indexText === undefined) {
        const file = `${prefix}.safetensors`;
        const f = await SafetensorsFile.open(join(dir, file));
        files.set(file, f);
        for (const k of f.keys()) where.set(k, file);
        return new ShardedSafetensors(undefined, files, where);
      }
      const index = parseShardIndex(indexText);
      for (const file of new Set(Object.values(index.weight_map))) {
        try {
          files.set(file, await SafetensorsFile.open(join(dir, file)));
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
          throw new ShardedCheckpointError(`shard ${file} listed in the index's weight_map is missing from ${dir}`);
        }
      }
      for (const [name, file] of Object.entries(index.weight_map)) {
        if (!files.get(file)!.has(name)) {
          throw new ShardedCheckpointError(`tensor "${name}": weight_map points to ${file}, which does not contain it`);
        }
        where.set(name, file);
      }
      return new ShardedSafetensors(index, files, where);
    } catch (e) {
      for (const f of files.values()) await f.close();
      throw e;
    }
  }

  keys(): string[] {
    return [...this.where.keys()];
  }

  has(name: string): boolean {
    return this.where.has(name);
  }

  /** Which shard file holds `name`. */
  fileOf(name: string): string {
    const f = this.where.get(name);
    if (!f) throw new ShardedCheckpointError(`tensor "${name}" is not in this checkpoint`);
    return f;
  }

  private file(name: string): SafetensorsFile {
    return this.files.get(this.fileOf(name))!;
  }

  info(name: string): TensorEntry {
    return this.file(name).info(name);
  }

  read(name: string): Promise<Uint8Array> {
    return this.file(name).read(name);
  }

  readFloat32(name: string): Promise<Float32Array> {
    return this.file(name).readFloat32(name);
  }

  async close(): Promise<void> {
    for (const f of this.files.values()) await f.close();
  }
}
