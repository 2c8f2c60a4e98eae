// `pnpm bench hub-io [--json]`: safetensors load/write throughput vs raw fs in the same run, peak RSS
// while reading one tensor of a large file, and the ≥ 100,000-input fuzz run.
// The ~1 GB file is generated in a temp dir and deleted afterwards. Set HUB_IO_BENCH_MB to resize it.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { BenchReporter, type Timing, summarize } from "../../../tooling/src/bench.js";
import { SafetensorsFile, toFloat32, writeSafetensorsFile } from "../src/index.js";
import { runFuzz } from "./fuzz.js";

/**
 * Alternate kiln and peer runs so background load on a shared machine hits both alike. Returns wall
 * and process CPU (user + system) milliseconds; CPU time is the steadier figure on a busy machine.
 */
async function interleaved(
  kiln: () => Promise<unknown>,
  peer: () => Promise<unknown>,
  reps: number,
): Promise<{ wall: [Timing, Timing]; cpu: [Timing, Timing] }> {
  await kiln();
  await peer();
  const wall: [number[], number[]] = [[], []];
  const cpu: [number[], number[]] = [[], []];
  for (let i = 0; i < reps; i++) {
    const order: [() => Promise<unknown>, 0 | 1][] =
      i % 2
        ? [
            [peer, 1],
            [kiln, 0],
          ]
        : [
            [kiln, 0],
            [peer, 1],
          ];
    for (const [fn, k] of order) {
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      await fn();
      wall[k].push(performance.now() - t0);
      const c = process.cpuUsage(c0);
      cpu[k].push((c.user + c.system) / 1000);
    }
  }
  return { wall: [summarize(wall[0]), summarize(wall[1])], cpu: [summarize(cpu[0]), summarize(cpu[1])] };
}

const here = dirname(fileURLToPath(import.meta.url));
const rep = new BenchReporter("hub-io");
const totalMiB = Number(process.env.HUB_IO_BENCH_MB ?? 1024);
const tensorMiB = 64;
const nTensors = Math.max(1, Math.round(totalMiB / tensorMiB));
const dir = mkdtempSync(join(tmpdir(), "hub-io-bench-"));
const path = join(dir, "big.safetensors");

try {
  // A tensor's bytes are produced only when the writer asks for them, so generation stays at one tensor.
  const chunk = new Float32Array((tensorMiB * 2 ** 20) / 4);
  for (let i = 0; i < chunk.length; i++) chunk[i] = Math.sin(i);
  const bytes = new Uint8Array(chunk.buffer);
  const tensors = new Map(
    Array.from({ length: nTensors }, (_, i) => [
      `model.layers.${i}.mlp.up_proj.weight`,
      { dtype: "F32" as const, shape: [chunk.length / 1024, 1024], data: () => bytes },
    ]),
  );
  const expectedSize = nTensors * bytes.byteLength;
  const rawBytes = new Uint8Array(expectedSize).fill(1);
  const w = await interleaved(
    () => writeSafetensorsFile(path, tensors, { format: "pt" }),
    () => writeFile(join(dir, "raw.bin"), rawBytes),
    5,
  );
  rmSync(join(dir, "raw.bin"));
  const size = statSync(path).size;
  const gbps = (ms: number) => size / 1e9 / (ms / 1000);
  const both = (label: string, peer: string, r: Awaited<ReturnType<typeof interleaved>>) => {
    rep.add({
      case: label,
      metric: "throughput (wall)",
      unit: "GB/s",
      better: "higher",
      kiln: gbps(r.wall[0].median),
      peer,
      peer_value: gbps(r.wall[1].median),
    });
    rep.add({
      case: label,
      metric: "throughput per CPU s",
      unit: "GB/s",
      better: "higher",
      kiln: gbps(r.cpu[0].median),
      peer,
      peer_value: gbps(r.cpu[1].median),
    });
  };
  both(`write ${(size / 2 ** 30).toFixed(2)} GiB F32 (${nTensors} tensors)`, "fs.writeFile raw", w);

  // Load every tensor into typed arrays vs reading the whole file with fs (page cache warm for both).
  const l = await interleaved(
    async () => {
      // Hold every array until the end, as a model load does (the peer holds its whole buffer too).
      const f = await SafetensorsFile.open(path);
      const arrays: Float32Array[] = [];
      for (const k of f.keys()) arrays.push(await f.readFloat32(k));
      await f.close();
      return arrays;
    },
    async () => (await readFile(path)).byteLength,
    7,
  );
  both(`load ${(size / 2 ** 30).toFixed(2)} GiB into Float32Arrays`, "fs.readFile raw", l);
  const all = await interleaved(
    async () => {
      const f = await SafetensorsFile.open(path);
      let n = 0;
      for (const t of (await f.readAll()).values()) n += toFloat32(t).length;
      await f.close();
      return n;
    },
    async () => (await readFile(path)).byteLength,
    7,
  );
  both(`load ${(size / 2 ** 30).toFixed(2)} GiB with readAll()`, "fs.readFile raw", all);

  // Peak RSS reading one 64 MiB tensor of the large file, in a fresh process.
  const tsx = join(here, "../../../node_modules/.bin/tsx");
  const child = spawnSync(
    tsx,
    ["--conditions=source", join(here, "peak-rss-child.ts"), path, `model.layers.${nTensors - 1}.mlp.up_proj.weight`],
    {
      encoding: "utf8",
    },
  );
  if (child.status !== 0) throw new Error(child.stderr);
  const m = JSON.parse(child.stdout) as { baselineMiB: number; peakMiB: number; tensorMiB: number };
  rep.add({
    case: `read 1 tensor of a ${(size / 2 ** 30).toFixed(2)} GiB file`,
    metric: "peak RSS above baseline",
    unit: "MiB",
    better: "lower",
    kiln: m.peakMiB - m.baselineMiB,
    peer: "tensor size",
    peer_value: m.tensorMiB,
    note: `baseline ${m.baselineMiB.toFixed(0)} MiB, peak ${m.peakMiB.toFixed(0)} MiB`,
  });
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const fuzz = runFuzz(Number(process.env.HUB_IO_FUZZ_N ?? 100_000));
rep.add({
  case: `fuzz ${fuzz.inputs} random/mutated headers`,
  metric: "inputs/s",
  unit: "1/s",
  better: "higher",
  kiln: fuzz.inputs / (fuzz.ms / 1000),
  peer: "none",
  peer_value: null,
  note: `crashes ${fuzz.crashes}, accepted ${fuzz.accepted}, RSS growth ${fuzz.rssGrowthMiB.toFixed(1)} MiB, rules ${JSON.stringify(fuzz.rules)}`,
});
rep.finish();
if (fuzz.crashes > 0) process.exit(1);
