// One call from llama2.c files to a loadable Hugging Face Llama directory:
// config.json, generation_config.json, model.safetensors, tokenizer.json, tokenizer_config.json,
// special_tokens_map.json. In memory (browsers, tests) or written to a directory (Node).

import { readFileBytes } from "./atomic-file.js";
import { fromFloat32 } from "./dtypes.js";
import { type Llama2cCheckpoint, llama2cHfConfig, llama2cToHfWeights, parseLlama2cCheckpoint } from "./llama2c.js";
import {
  LLAMA2C_SPECIAL_TOKENS_MAP,
  type Llama2cTokenizer,
  type Llama2cTokenizerOptions,
  llama2cTokenizerConfig,
  llama2cTokenizerJson,
  parseLlama2cTokenizer,
} from "./llama2c-tokenizer.js";
import { pyFloat } from "./python-json.js";
import {
  REPO_FILES,
  type RepoFileMap,
  serializeGenerationConfig,
  serializeModelConfig,
  serializeTokenizerConfig,
  serializeTokenizerJson,
  writeRepoFiles,
} from "./repo-files.js";
import { serializeSafetensors } from "./safetensors-write.js";

export interface ConvertedLlama2c {
  checkpoint: Llama2cCheckpoint;
  tokenizer?: Llama2cTokenizer;
  /** The HF directory's files, name → contents. */
  files: RepoFileMap;
  /** Write `files` under `dir` (atomically, file by file). Node only. */
  writeTo(dir: string): Promise<void>;
}

/** Convert llama2.c checkpoint bytes (and optionally tokenizer bytes) to HF Llama files in memory. */
export function convertLlama2cToHf(
  checkpointBytes: Uint8Array,
  tokenizerBytes?: Uint8Array,
  tokenizerOptions?: Llama2cTokenizerOptions,
): ConvertedLlama2c {
  const checkpoint = parseLlama2cCheckpoint(checkpointBytes);
  const c = checkpoint.config;
  const hf = llama2cToHfWeights(checkpoint);
  const tensors = new Map(
    [...hf.tensors].map(([name, t]) => [
      name,
      { dtype: "F32" as const, shape: t.shape, data: fromFloat32(t.values, "F32") },
    ]),
  );
  const files: RepoFileMap = new Map();
  const config = llama2cHfConfig(c);
  // Python floats in the config (rope_theta, rms_norm_eps, ...) keep their ".0" form.
  for (const k of ["rms_norm_eps", "rope_theta", "attention_dropout", "initializer_range"])
    config[k] = pyFloat(config[k] as number);
  files.set(REPO_FILES.config, serializeModelConfig(config));
  files.set(REPO_FILES.generationConfig, serializeGenerationConfig({ bos_token_id: 1, eos_token_id: 2 }));
  files.set(REPO_FILES.weights, serializeSafetensors(tensors, { format: "pt" }));
  let tokenizer: Llama2cTokenizer | undefined;
  if (tokenizerBytes) {
    tokenizer = parseLlama2cTokenizer(tokenizerBytes, c.vocabSize);
    files.set(REPO_FILES.tokenizer, serializeTokenizerJson(llama2cTokenizerJson(tokenizer, tokenizerOptions)));
    files.set(REPO_FILES.tokenizerConfig, serializeTokenizerConfig(llama2cTokenizerConfig(c.seqLen)));
    files.set(REPO_FILES.specialTokensMap, serializeTokenizerConfig(LLAMA2C_SPECIAL_TOKENS_MAP));
  }
  return { checkpoint, tokenizer, files, writeTo: (dir) => writeRepoFiles(dir, files) };
}

/** Node: read `checkpoint` (.bin) and optional `tokenizer` (.bin) paths, write the HF directory to `outDir`. */
export async function convertLlama2c(opts: {
  checkpoint: string;
  tokenizer?: string;
  outDir: string;
}): Promise<ConvertedLlama2c> {
  const ckpt = await readFileBytes(opts.checkpoint);
  const tok = opts.tokenizer ? await readFileBytes(opts.tokenizer) : undefined;
  const converted = convertLlama2cToHf(ckpt, tok);
  await converted.writeTo(opts.outDir);
  return converted;
}
