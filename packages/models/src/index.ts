// @kiln/models public API.
export * from "./errors.js";
export * from "./config.js";
export { computeInvFreq } from "./rope.js";
export { Linear, pushLinear, type LinearAdapter } from "./linear.js";
export { KVCache, type AttentionLayerCache, type LayerCache, type OtherLayerCache } from "./kv-cache.js";
export type { DecoderBlock, LayerContext, RaggedBatch, RaggedSegment } from "./layer-context.js";
export { SelfAttention } from "./attention.js";
export { SwiGluMlp } from "./mlp.js";
export { AttentionBlock, FULL_ATTENTION_BLOCK } from "./attention-block.js";
export {
  DEFAULT_CHUNK_SIZE,
  GatedDeltaNet,
  gatedDeltaRuleChunked,
  gatedDeltaRuleRecurrent,
  l2Normalize,
  type GatedDeltaNetWeights,
  type GatedDeltaRuleInputs,
  type GatedDeltaRuleOutput,
  type LinearAttentionLayerCache,
} from "./gated-deltanet.js";
export { LINEAR_ATTENTION_BLOCK, LinearAttentionBlock } from "./linear-attention-block.js";
export { type BlockType, blockType, registerBlockType } from "./block-types.js";
export { parameterShapes } from "./parameter-shapes.js";
export { CausalLM, type ForwardOptions, type TokenIdsInput } from "./causal-lm.js";
export { defaultHeadChunkRows, headTokenLogProbs, type HeadLogProbsOptions } from "./chunked-head.js";
export type { ModelFileMap, ModelSource } from "./model-files.js";
export { loadWeights, type LoadWeightsOptions } from "./load-weights.js";
export { createModel, loadConfig, loadModel, type LoadModelOptions, type Model } from "./load-model.js";
export type { RandomInitOptions } from "./random-init.js";
export { Tokenizer, loadTokenizer, type DecodeOptions, type EncodeOptions } from "./tokenizer.js";
export { ChatTemplate, type RenderOptions } from "./chat-template.js";
export { CHATML_TOOL_TEMPLATE, charTokenizer, chatmlBpeTokenizer, chatmlTemplate } from "./chatml.js";
export { assistantSpans, renderForTraining, type TrainingRender } from "./assistant-mask.js";
export {
  truncatePromptCompletion,
  truncateTokens,
  type PromptCompletionLimits,
  type TruncationSide,
} from "./truncation.js";
export * from "./sampling.js";
export { RunCRng, sampleRunC } from "./runc-sampler.js";
export {
  generate,
  generateAsync,
  type GenerateOptions,
  type GenerationOutput,
  type TokenAlternative,
} from "./generate.js";
export {
  scoreCompletions,
  scoreCompletionsAsync,
  scoreCompletionsTopK,
  scoreCompletionsTopKAsync,
  type ScoreItem,
  type TopLogprobs,
} from "./score.js";
export {
  BatchScheduler,
  type BatchSchedulerOptions,
  type ScheduledGenerateOptions,
  type ScheduledScore,
  type SchedulerStats,
} from "./batch-scheduler.js";
export { DecodeWidths, linearsRowInvariant } from "./decode-widths.js";
export { SequenceKV, kvBytesPerPosition, type KVRows, type KVSource } from "./sequence-kv.js";
export { PrefixCache, type PrefixChunk, type PrefixCacheCounters } from "./prefix-cache.js";
export { RowDecoder, type RowDecoderOptions } from "./row-decoder.js";
export { LocalPolicy, toGeneration, type LocalPolicyOptions } from "./local-policy.js";
export {
  LlamaCppPolicy,
  LlamaCppUnavailableError,
  loadLlamaCpp,
  type LlamaCppHandle,
  type LlamaCppPolicyOptions,
} from "./llama-cpp-policy.js";
export {
  loadStories260K,
  stories260KPaths,
  stories260KUrls,
  type Stories260K,
  type Stories260KFiles,
} from "./stories260K.js";
