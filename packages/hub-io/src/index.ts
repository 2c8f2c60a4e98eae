// @kiln/hub-io public API. Everything works on bytes and typed arrays; functions that touch the
// file system are Node-only and import node:* lazily, so the package also loads in browsers.

export * from "./errors.js";
export * from "./dtypes.js";
export * from "./byte-source.js";
export * from "./safetensors-header.js";
export * from "./safetensors-read.js";
export * from "./safetensors-write.js";
export * from "./sharded.js";
export * from "./python-json.js";
export * from "./repo-files.js";
export * from "./model-card.js";
export * from "./peft.js";
export * from "./sha256.js";
export * from "./manifest.js";
export * from "./gzip-stream.js";
export * from "./archive.js";
export * from "./hub-download.js";
export * from "./llama2c.js";
export * from "./llama2c-tokenizer.js";
export * from "./llama2c-convert.js";
export * from "./gguf-types.js";
export * from "./gguf.js";
export * from "./gguf-models.js";
export * from "./gguf-tokenizer.js";
export * from "./gguf-convert.js";
export {
  openAtomic,
  writeFileAtomic,
  writeFileAtomicSync,
  type SyncFs,
  readFileBytes,
  readFileText,
  syncDirectory,
  type AtomicWriter,
} from "./atomic-file.js";
