// Bounded, seeded fuzz of the file parsers kiln reads untrusted bytes with: zip (unzipSafe), gzip
// (gunzip), safetensors (parseSafetensors + toFloat32) and trajectory files (decodeJsonl +
// checkTrajectoryRecord in memory, readTrajectories on disk). Inputs are valid files mutated the
// ways files get damaged or forged: flipped bits, overwritten bytes, truncations, spliced and
// appended bytes, and absurd values written into the length fields of each format. A case either
// parses (and then stays within its cap) or throws the parser's typed error; anything else is a
// crash. Case counts are fixed per parser so every run sees the same inputs; the test prints the
// figures. KILN_FUZZ_CASES=N multiplies the counts for a longer run.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  ArchiveError,
  SafetensorsError,
  gunzip,
  gzip,
  parseSafetensors,
  serializeSafetensors,
  toFloat32,
  unzipSafe,
  zipFiles,
} from "@kiln/hub-io";
import {
  GuessNumberEnv,
  ScriptedPolicy,
  TrajectoryFileError,
  checkTrajectoryRecord,
  decodeJsonl,
  encodeJsonl,
  guessNumberScript,
  readTrajectories,
  runEpisodes,
  withoutTimings,
} from "@kiln/rollout";
import { afterAll, describe, expect, it } from "vitest";

const scale = Number(process.env.KILN_FUZZ_CASES ?? 1);
const CAP = 1 << 20;
const dir = mkdtempSync(join(tmpdir(), "kiln-fuzz-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ABSURD_U32 = [0, 1, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff, 0x10000, 0xffff];
const ABSURD_U64 = [0n, 1n, 2n ** 32n, 2n ** 53n, 2n ** 63n, 2n ** 64n - 1n];

/** Mutates `input`; `lengthFields` are byte offsets of the format's u32 length fields (the u64 ones are given as negative). */
function mutate(r: () => number, input: Uint8Array, lengthFields: readonly number[]): Uint8Array {
  let b = new Uint8Array(input);
  const edits = 1 + Math.floor(r() * 3);
  for (let e = 0; e < edits; e++) {
    const kind = Math.floor(r() * 8);
    const at = Math.floor(r() * Math.max(1, b.length));
    if (kind === 0 && b.length) b[at] ^= 1 << Math.floor(r() * 8);
    else if (kind === 1 && b.length) b[at] = Math.floor(r() * 256);
    else if (kind === 2) b = b.slice(0, at);
    else if (kind === 3)
      b = new Uint8Array([...b, ...Array.from({ length: 1 + Math.floor(r() * 24) }, () => Math.floor(r() * 256))]);
    else if (kind === 4)
      b = new Uint8Array([...b.subarray(0, at), ...b.subarray(at, at + 1 + Math.floor(r() * 64)), ...b.subarray(at)]);
    else if (lengthFields.length > 0) {
      const f = lengthFields[Math.floor(r() * lengthFields.length)];
      const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
      if (f < 0 && -f - 1 + 8 <= b.length)
        view.setBigUint64(-f - 1, ABSURD_U64[Math.floor(r() * ABSURD_U64.length)], true);
      else if (f >= 0 && f + 4 <= b.length) {
        const pick = Math.floor(r() * (ABSURD_U32.length + 2));
        const value =
          pick < ABSURD_U32.length
            ? ABSURD_U32[pick]
            : (view.getUint32(f, true) + (pick === ABSURD_U32.length ? 1 : -1)) >>> 0;
        view.setUint32(f, value, true);
      }
    }
  }
  return b;
}

interface Tally {
  ms: number;
  cases: number;
  parsed: number;
  rejected: Map<string, number>;
  crashes: string[];
}

function tally(): Tally {
  return { ms: 0, cases: 0, parsed: 0, rejected: new Map(), crashes: [] };
}

/** Runs one case: typed errors are counted by rule, anything else is a crash. */
async function run(
  t: Tally,
  label: string,
  typed: (e: unknown) => string | undefined,
  fn: () => unknown,
): Promise<void> {
  t.cases++;
  const start = performance.now();
  try {
    await fn();
    t.parsed++;
  } catch (e) {
    const rule = typed(e);
    if (rule === undefined) t.crashes.push(`${label}: ${(e as Error)?.stack ?? String(e)}`.slice(0, 600));
    else t.rejected.set(rule, (t.rejected.get(rule) ?? 0) + 1);
  } finally {
    t.ms += performance.now() - start;
  }
}

const summary = (name: string, t: Tally) =>
  `${name}: ${t.cases} cases, ${t.parsed} parsed, ${t.cases - t.parsed - t.crashes.length} refused (${[...t.rejected]
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v}`)
    .join(", ")}), crashes ${t.crashes.length}, ${(t.ms / 1000).toFixed(1)} s in the parser`;

function text(r: () => number, n: number): string {
  const words = ["ep", "-", "00042", "turn", '{"a":1}', "\n", "zz", "héllo", "🙂", " "];
  let s = "";
  while (s.length < n) s += words[Math.floor(r() * words.length)];
  return s;
}

/** u32 length fields of a zip: every local header's sizes and name/extra lengths, every central entry's, the EOCD's. */
function zipLengthFields(z: Uint8Array): number[] {
  const v = new DataView(z.buffer, z.byteOffset, z.byteLength);
  const out: number[] = [];
  for (let i = 0; i + 4 <= z.length; i++) {
    const sig = v.getUint32(i, true);
    if (sig === 0x04034b50) out.push(i + 14, i + 18, i + 22, i + 26);
    else if (sig === 0x02014b50) out.push(i + 16, i + 20, i + 24, i + 28, i + 32, i + 38, i + 42);
    else if (sig === 0x06054b50) out.push(i + 8, i + 12, i + 16);
  }
  return out;
}

describe("parser fuzz (seeded, fixed case counts; KILN_FUZZ_CASES=N for N× more)", () => {
  it("zip, gzip, safetensors and trajectory files: every input parses within its cap or throws its typed error", async () => {
    const t0 = performance.now();
    const r = rng(31);
    const archiveRule = (e: unknown) => (e instanceof ArchiveError ? e.rule : undefined);

    // zip
    const zip = tally();
    const zips = Array.from({ length: 6 }, (_, k) => {
      const files: Record<string, string> = {};
      for (let f = 0; f < 1 + (k % 4); f++) files[`d${f % 2}/f${f}.txt`] = text(r, 20 + Math.floor(r() * 3000));
      return zipFiles(files);
    });
    const zipFields = zips.map(zipLengthFields);
    for (let i = 0; i < 1500 * scale; i++) {
      const input = mutate(r, zips[i % zips.length], zipFields[i % zips.length]);
      await run(zip, `zip case ${i}`, archiveRule, () => {
        let total = 0;
        for (const v of unzipSafe(input, CAP).values()) total += v.length;
        if (total > CAP) throw new Error(`zip case ${i}: ${total} bytes out, cap ${CAP}`);
      });
    }

    // gzip (single and multi-member; ISIZE, FEXTRA XLEN and stored-block LEN as length fields)
    const gz = tally();
    const gzips = Array.from({ length: 6 }, (_, k) => {
      const a = gzip(new TextEncoder().encode(text(r, 30 + Math.floor(r() * 4000))), ([0, 1, 6, 9, 6, 0] as const)[k]);
      return k % 2 ? new Uint8Array([...a, ...gzip(new TextEncoder().encode(text(r, 100)))]) : a;
    });
    for (let i = 0; i < 1500 * scale; i++) {
      const base = gzips[i % gzips.length];
      const input = mutate(r, base, [base.length - 4, base.length - 8, 10, 11]);
      await run(gz, `gzip case ${i}`, archiveRule, () => {
        const out = gunzip(input, CAP);
        if (out.length > CAP) throw new Error(`gzip case ${i}: ${out.length} bytes out, cap ${CAP}`);
      });
    }

    // safetensors (the u64 header length at 0 and the tensors' data)
    const st = tally();
    const sts = Array.from({ length: 4 }, (_, k) =>
      serializeSafetensors(
        Object.fromEntries(
          Array.from({ length: 1 + k }, (_, j) => {
            const n = 1 + Math.floor(r() * 40);
            const dtype = (["F32", "BF16", "F16", "I32"] as const)[(j + k) % 4];
            const bytes = n * (dtype === "F32" || dtype === "I32" ? 4 : 2);
            return [
              `model.layers.${j}.w`,
              { dtype, shape: [n], data: Uint8Array.from({ length: bytes }, () => Math.floor(r() * 256)) },
            ];
          }),
        ),
        { format: "pt" },
      ),
    );
    for (let i = 0; i < 2000 * scale; i++) {
      const base = sts[i % sts.length];
      // -1 marks the u64 at offset 0; digits inside the JSON header are hit by the byte edits.
      const input = mutate(r, base, [-1]);
      await run(
        st,
        `safetensors case ${i}`,
        (e) => (e instanceof SafetensorsError ? e.rule : undefined),
        () => {
          for (const t of parseSafetensors(input).tensors.values()) {
            try {
              toFloat32(t);
            } catch (e) {
              if (!(e instanceof SafetensorsError && e.rule === "UnsupportedConversion")) throw e;
            }
          }
        },
      );
    }

    // trajectory files (sized gzip members; the "KL" size at byte 16 of each member, ISIZE)
    const traj = tally();
    const trajectoryError = (e: unknown) => (e instanceof TrajectoryFileError ? e.problem : undefined);
    const { trajectories: timed } = await runEpisodes({
      makeEnv: () => new GuessNumberEnv(),
      policy: new ScriptedPolicy({ id: "bisect", script: guessNumberScript({ exploreRate: 0.3 }) }),
      episodes: 4,
    });
    // Without wall-clock timings every run fuzzes the same bytes.
    const trajectories = timed.map(withoutTimings);
    const files = [
      encodeJsonl(trajectories, true),
      encodeJsonl(trajectories.slice(0, 1), true),
      gzip(encodeJsonl(trajectories, false)), // recompressed by another tool: no size fields
    ];
    const memberStarts = (f: Uint8Array) => {
      const out: number[] = [];
      for (let i = 0; i + 20 <= f.length; i++)
        if (f[i] === 0x1f && f[i + 1] === 0x8b && f[i + 12] === 0x4b) out.push(i + 16);
      return out;
    };
    const trajFields = files.map((f) => [...memberStarts(f), f.length - 4]);
    for (let i = 0; i < 600 * scale; i++) {
      const input = mutate(r, files[i % files.length], trajFields[i % files.length]);
      await run(traj, `trajectory case ${i}`, trajectoryError, async () => {
        const decoded = decodeJsonl(input, true, "fuzz.jsonl.gz", { maxMemberBytes: CAP, maxTotalBytes: 4 * CAP });
        for (const [k, rec] of decoded.records.entries()) checkTrajectoryRecord(rec, `record ${k + 1}`);
        if (i % 20 === 0) {
          const path = join(dir, `case-${i}.jsonl.gz`);
          writeFileSync(path, input);
          await readTrajectories(path, { maxRecordBytes: CAP, maxTotalBytes: 4 * CAP });
        }
      });
    }

    const seconds = (performance.now() - t0) / 1000;
    const all = [zip, gz, st, traj];
    const lines = [
      summary("zip", zip),
      summary("gzip", gz),
      summary("safetensors", st),
      summary("trajectory", traj),
      `total: ${all.reduce((a, t) => a + t.cases, 0)} cases, crashes ${all.reduce((a, t) => a + t.crashes.length, 0)}, ${seconds.toFixed(1)} s`,
    ];
    console.log(`[parser fuzz]\n${lines.join("\n")}`);
    expect(all.flatMap((t) => t.crashes)).toEqual([]);
    // The mutations reach deep: each parser both accepts some inputs and refuses others for several reasons.
    for (const t of all) {
      expect(t.parsed).toBeGreaterThan(0);
      expect(t.rejected.size).toBeGreaterThanOrEqual(2);
    }
  });
});
