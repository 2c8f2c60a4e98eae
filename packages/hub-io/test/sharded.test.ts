import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  ShardedCheckpointError,
  ShardedSafetensors,
  SafetensorsFile,
  parseShardIndex,
  planShards,
  serializeShardIndex,
  shardFileName,
  writeShardedSafetensors,
  writeFileAtomic,
} from "../src/index.js";
import { tempDir } from "./helpers.js";

const tmp = tempDir();
afterAll(tmp.cleanup);

describe("sharded checkpoints", () => {
  it("plans shards like huggingface_hub (oversized tensors alone, emitted in place)", () => {
    const t = (name: string, size: number) => ({ name, size });
    expect(planShards([t("a", 4), t("b", 4), t("c", 4)], 8)).toEqual([["a", "b"], ["c"]]);
    expect(planShards([t("a", 4), t("big", 20), t("b", 4), t("c", 1)], 8)).toEqual([["big"], ["a", "b"], ["c"]]);
    expect(planShards([], 8)).toEqual([]);
    expect(() => planShards([t("a", 1)], 0)).toThrow(ShardedCheckpointError);
    expect(shardFileName(0, 3)).toBe("model-00001-of-00003.safetensors");
    expect(shardFileName(0, 1)).toBe("model.safetensors");
  });

  it("writes shards + an index as transformers does, and reads them back", async () => {
    const dir = join(tmp.dir, "sharded");
    const tensors = new Map(
      [
        "model.embed_tokens.weight",
        "model.layers.0.mlp.up_proj.weight",
        "model.layers.1.mlp.up_proj.weight",
        "model.norm.weight",
      ].map((name, i) => {
        const v = Float32Array.from({ length: 16 }, (_, j) => i * 100 + j);
        return [name, { dtype: "F32" as const, shape: [4, 4], data: new Uint8Array(v.buffer) }];
      }),
    );
    const index = await writeShardedSafetensors(dir, tensors, { maxShardSize: 100, totalParameters: 64 });
    expect(index.metadata).toEqual({ total_size: 256, total_parameters: 64 });
    const text = readFileSync(join(dir, "model.safetensors.index.json"), "utf8");
    expect(text).toBe(serializeShardIndex(index));
    expect(text).toBe(
      `{
  "metadata": {
    "total_parameters": 64,
    "total_size": 256
  },
  "weight_map": {
    "model.embed_tokens.weight": "model-00001-of-00004.safetensors",
    "model.layers.0.mlp.up_proj.weight": "model-00002-of-00004.safetensors",
    "model.layers.1.mlp.up_proj.weight": "model-00003-of-00004.safetensors",
    "model.norm.weight": "model-00004-of-00004.safetensors"
  }
}
`,
    );
    const f = await SafetensorsFile.open(join(dir, "model-00002-of-00004.safetensors"));
    expect(f.metadata).toEqual({ format: "pt" });
    await f.close();
    const r = await ShardedSafetensors.open(dir);
    expect(r.keys().sort()).toEqual([...tensors.keys()].sort());
    for (const [name, t] of tensors) expect(await r.read(name)).toEqual(t.data);
    expect(r.fileOf("model.norm.weight")).toBe("model-00004-of-00004.safetensors");
    await r.close();

    // Two shards of two tensors each.
    const dir2 = join(tmp.dir, "sharded2");
    const idx2 = await writeShardedSafetensors(dir2, tensors, { maxShardSize: 128 });
    expect(new Set(Object.values(idx2.weight_map))).toEqual(
      new Set(["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]),
    );
  });

  it("writes a single model.safetensors and no index when everything fits", async () => {
    const dir = join(tmp.dir, "single");
    await writeShardedSafetensors(dir, { w: { dtype: "U8", shape: [3], data: new Uint8Array([1, 2, 3]) } });
    expect(existsSync(join(dir, "model.safetensors"))).toBe(true);
    expect(existsSync(join(dir, "model.safetensors.index.json"))).toBe(false);
    const r = await ShardedSafetensors.open(dir);
    expect([...(await r.read("w"))]).toEqual([1, 2, 3]);
    await r.close();
  });

  it("refuses bad indexes: missing weight_map, paths escaping the repo, tensors absent from their shard", async () => {
    expect(() => parseShardIndex("{}")).toThrow(/weight_map/);
    expect(() => parseShardIndex('{"weight_map":{"a":"../x.safetensors"}}')).toThrow(/relative path/);
    expect(() => parseShardIndex('{"weight_map":{"a":"/abs.safetensors"}}')).toThrow(ShardedCheckpointError);
    expect(() => parseShardIndex('{"metadata":{"total_size":"12"},"weight_map":{}}')).toThrow(/total_size/);
    expect(parseShardIndex('{"metadata":{"total_size":1,"future":true},"weight_map":{}}').metadata.future).toBe(true);
    const dir = join(tmp.dir, "sharded");
    await writeFileAtomic(
      join(dir, "model.safetensors.index.json"),
      serializeShardIndex({ metadata: { total_size: 0 }, weight_map: { ghost: "model-00001-of-00004.safetensors" } }),
    );
    await expect(ShardedSafetensors.open(dir)).rejects.toThrow(/tensor "ghost"/);
    await writeFileAtomic(
      join(dir, "model.safetensors.index.json"),
      serializeShardIndex({ metadata: { total_size: 0 }, weight_map: { w: "model-00009-of-00009.safetensors" } }),
    );
    await expect(ShardedSafetensors.open(dir)).rejects.toThrow(/model-00009-of-00009.safetensors listed .* is missing/);
  });
});
