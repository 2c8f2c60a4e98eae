// Where the LoRA SFT step (bench/lora-step-run.ts's model and adapter) spends its time, kernel by kernel:
//   tsx --conditions=source bench/lora-profile.ts [threads] [steps] [bf16Gemm widen|onednn]
// Prints a markdown table (the tensor package's bench/kernel-profile.ts). Run it for 1 and 2 threads.
import * as T from "@kiln/tensor";
import { profileSteps } from "../../tensor/bench/kernel-profile.js";
import { loraBenchStep } from "./lora-bench-step.js";

const [threadsArg = "2", stepsArg = "8", bf16Gemm = "widen"] = process.argv.slice(2);
const threads = Number(threadsArg);
const steps = Number(stepsArg);
await T.initBackend("native", {
  threads,
  relaxedSimd: true,
  ignoreOpenblasEnv: true,
  bf16Gemm: bf16Gemm === "onednn" ? "onednn" : "widen",
});
const { step } = loraBenchStep();
profileSteps(`LoRA r16 step, native ${threads} thread(s), bf16 ${bf16Gemm}`, "native", steps, step);
T.disposeNativeBackend();
T.disposeWasmBackend();
