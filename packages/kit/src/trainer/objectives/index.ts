// The objectives of the one trainer loop (docs/ARCHITECTURE.md §Trainer), one file each. Each builds
// its padded micro-batch with @kiln/losses' collators, calls one loss, and scales it by (its items /
// the step's items), so accumulated micro-batches add up to the loss of one large batch: tokens for
// SFT (transformers' num_items_in_batch), pairs for DPO, completion tokens for OPD and
// consolidation. Distillation objectives also log the student's mean token entropy.
export type { LengthOptions } from "../training-logits.js";
export { completionTokens, fitToLength } from "./fit.js";
export { sftObjective } from "./sft.js";
export { dpoBatchLoss, dpoObjective } from "./dpo.js";
export {
  opdBatch,
  opdBatchLoss,
  opdObjective,
  turnWeights,
  type OpdObjectiveOptions,
  type OpdSample,
} from "./opd.js";
export {
  consolidationLoss,
  consolidationObjective,
  type ConsolidateOptions,
  type ConsolidationSample,
} from "./consolidation.js";
