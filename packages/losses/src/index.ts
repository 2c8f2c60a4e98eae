// @kiln/losses: training objectives as pure functions of tensors. Each loss returns
// { loss, metrics }: a scalar to backpropagate and numbers to log (TRL metric names).
export { LossError, LossInputError, LossOptionError } from "./errors.js";
export type { LossResult, MaskLike } from "./result.js";
export { tokenLogProbs, type TokenLogProbsOptions } from "./token-log-probs.js";
export { isChunkedLogits, type ChunkedLogits, type Logits } from "./chunked-logits.js";
export { countTargetTokens, labelsFromMask, shiftLabels, type CountTargetsOptions } from "./labels.js";
export {
  collatePreference,
  collateSft,
  lastSpanMask,
  padRows,
  padTokenRows,
  type PaddedTokenRows,
  type MaskedRow,
  type PaddedRows,
  type PreferenceCollated,
  type SftCollated,
} from "./collate.js";
export { tokenAccuracy, tokenEntropy, type EntropyOptions } from "./token-stats.js";
export { sftLoss, type SftLossOptions } from "./sft.js";
export { sequenceLogProbs, type SequenceLogProbs, type SequenceLogProbsOptions } from "./sequence-log-probs.js";
export { dpoLoss, dpoLossFromLogits, type DpoBatch, type DpoInputs, type DpoLossType, type DpoOptions } from "./dpo.js";
export {
  opdAdvantages,
  opdLoss,
  policyGradientLoss,
  type OpdAdvantageInputs,
  type OpdAdvantageOptions,
  type OpdAdvantages,
  type OpdLossInputs,
  type PolicyGradientInputs,
  type PolicyGradientOptions,
  type PolicyObjective,
} from "./opd.js";
export { tokenDivergence, type DivergenceKind, type TokenDivergenceOptions } from "./divergence.js";
export { teacherTopKDivergence, type TeacherTopK, type TeacherTopKOptions } from "./teacher-top-k.js";
export { reductionWeights, type ReductionOptions, type TokenReduction } from "./reduce.js";
export {
  distillationLoss,
  sampledTokenKl,
  type DistillationOptions,
  type SampledTokenKlInputs,
  type SampledTokenKlOptions,
} from "./distillation.js";
