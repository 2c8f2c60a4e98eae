// Where a process's CPU goes, thread by thread, over blocks of the reference decoder's training steps (Linux: it
// reads /proc/self/task/*/stat, in clock ticks of 10 ms):
//   tsx --conditions=source bench/thread-cpu.ts [threads] [blocks] [stepsPerBlock] [backend]
// Per block: the step's wall time, the main thread's CPU, the workers' (the busiest other threads, one per worker)
// and every other thread's (V8's compiler and GC helpers, libuv): on two threads both cores are busy, so the others'
// CPU comes out of the step. With KILN_MARK_STEPS=1 it prints "step N" before each step, so that the lines of
// `node --trace-opt --trace-deopt --trace-gc --import tsx --conditions=source bench/thread-cpu.ts` can be counted per
// step.
import { readFileSync, readdirSync } from "node:fs";
import * as T from "../src/index.js";
import { referenceTraining } from "./decoder-model.js";

const [threadsArg = "2", blocksArg = "8", perBlockArg = "8", backend = "native"] = process.argv.slice(2);
const threads = Number(threadsArg);
const markSteps = process.env.KILN_MARK_STEPS === "1";
await T.initBackend(backend, { threads, relaxedSimd: true, ignoreOpenblasEnv: true });
const { step } = referenceTraining();

/** CPU ticks (user + system) of every thread of this process, by thread id. */
function threadTicks(): Map<number, number> {
  const ticks = new Map<number, number>();
  for (const tid of readdirSync("/proc/self/task")) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
    } catch {
      continue; // the thread ended between the listing and the read
    }
    // Fields after the ")" that closes the thread's name: state is the first, utime the 12th, stime the 13th.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    ticks.set(Number(tid), Number(fields[11]) + Number(fields[12]));
  }
  return ticks;
}

const mainTid = process.pid;
const workers = threads > 1 ? threads - 1 : 0;
const perBlock = Number(perBlockArg);
const tickMs = 10;
console.log(`| steps | wall ms/step | main CPU ms/step | workers' CPU ms/step | other threads' CPU ms/step |`);
console.log("|---|---|---|---|---|");
let done = 0;
for (let b = 0; b < Number(blocksArg); b++) {
  const before = threadTicks();
  const t0 = performance.now();
  for (let i = 0; i < perBlock; i++, done++) {
    if (markSteps) console.log(`step ${done}`);
    step();
  }
  const wall = (performance.now() - t0) / perBlock;
  const used = [...threadTicks()].map(([tid, t]) => [tid, t - (before.get(tid) ?? 0)] as const);
  const main = used.find(([tid]) => tid === mainTid)?.[1] ?? 0;
  const others = used.filter(([tid]) => tid !== mainTid).sort((x, y) => y[1] - x[1]);
  const sum = (xs: readonly (readonly [number, number])[]) => xs.reduce((s, [, t]) => s + t, 0);
  const perStep = (t: number) => ((t * tickMs) / perBlock).toFixed(1);
  console.log(
    `| ${done - perBlock}–${done - 1} | ${wall.toFixed(1)} | ${perStep(main)} | ${perStep(sum(others.slice(0, workers)))} | ${perStep(sum(others.slice(workers)))} |`,
  );
}
T.disposeNativeBackend();
T.disposeWasmBackend();
