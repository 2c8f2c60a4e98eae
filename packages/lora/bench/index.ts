// `pnpm bench lora`: a LoRA SFT step (frozen bf16 base, r=16, all-linear) on the reference
// decoder, kiln vs PyTorch with the same adapter, each measured in its own process. PyTorch runs on
// one thread; kiln is measured on two threads (its default on a 2-core machine) and on one (the
// same thread count as the peer), and both are reported.
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { BenchReporter } from "../../../tooling/src/bench.js";

const here = dirname(fileURLToPath(import.meta.url));
const reps = process.argv.includes("--quick") ? "1" : "5";

function runJson(cmd: string, args: string[]): Record<string, number> | null {
  const r = spawnSync(cmd, args, { cwd: join(here, ".."), encoding: "utf8" });
  if (r.status !== 0) {
    process.stderr.write(`bench lora: ${cmd} ${args.join(" ")} failed: ${r.stderr || r.error}\n`);
    return null;
  }
  const line = r.stdout.trim().split("\n").pop() ?? "";
  return JSON.parse(line);
}

const reporter = new BenchReporter("lora");
const tsx = join(here, "..", "..", "..", "node_modules", ".bin", "tsx");
const kiln = runJson(tsx, ["--conditions=source", join(here, "lora-step-run.ts"), "wasm", "2", reps]);
const kiln1 = runJson(tsx, ["--conditions=source", join(here, "lora-step-run.ts"), "wasm", "1", reps]);
const torch = runJson("/usr/bin/python3", [join(here, "lora_step_torch.py"), reps, "bfloat16"]);
const torchF32 = runJson("/usr/bin/python3", [join(here, "lora_step_torch.py"), reps, "float32"]);
const tokS = (r: Record<string, number> | null) => (r ? (r.tokens / r.step_ms) * 1000 : null);
reporter.add({
  case: "lora-sft-step r=16 all-linear bf16 base (B=4,T=128)",
  metric: "tokens/s",
  unit: "tok/s",
  better: "higher",
  kiln: tokS(kiln),
  peer: "pytorch-1thread",
  peer_value: tokS(torch),
});
reporter.add({
  case: "lora-sft-step r=16 all-linear bf16 base (B=4,T=128), kiln on 1 thread",
  metric: "tokens/s",
  unit: "tok/s",
  better: "higher",
  kiln: tokS(kiln1),
  peer: "pytorch-1thread",
  peer_value: tokS(torch),
});
reporter.add({
  case: "lora-sft-step r=16 all-linear bf16 base (B=4,T=128)",
  metric: "peak RSS",
  unit: "MiB",
  better: "lower",
  kiln: kiln?.peak_rss_mib ?? null,
  peer: "pytorch-1thread",
  peer_value: torch?.peak_rss_mib ?? null,
});
reporter.add({
  case: "lora-sft-step r=16 all-linear, peer with an f32 base (no AMX bf16 matmuls)",
  metric: "tokens/s",
  unit: "tok/s",
  better: "higher",
  kiln: tokS(kiln),
  peer: "pytorch-1thread-f32-base",
  peer_value: tokS(torchF32),
});
reporter.add({
  case: "lora-sft-step r=16 all-linear, f32-base peer, kiln on 1 thread",
  metric: "tokens/s",
  unit: "tok/s",
  better: "higher",
  kiln: tokS(kiln1),
  peer: "pytorch-1thread-f32-base",
  peer_value: tokS(torchF32),
});
reporter.finish();
