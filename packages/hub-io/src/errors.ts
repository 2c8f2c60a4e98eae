// Typed errors: every message names the thing (tensor, file, key) and the rule it broke,
// e.g. `SafetensorsError [InvalidOffset]: tensor "b": data_offsets [0, 16] must start at 16 ...`.

/** Base class for every error thrown by @kiln/hub-io. */
export class HubIoError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * Rules of the safetensors format. The names are the Rust reference's `SafeTensorError` variants
 * (huggingface/safetensors `safetensors/src/tensor.rs`) plus a few finer ones that the reference
 * folds into `InvalidHeaderDeserialization` (UnknownDtype, InvalidTensorInfo, InvalidMetadata) and the
 * lookups a reader needs (TensorNotFound).
 */
export type SafetensorsRule =
  | "HeaderTooSmall"
  | "HeaderTooLarge"
  | "InvalidHeaderLength"
  | "InvalidHeader"
  | "InvalidHeaderDeserialization"
  | "InvalidTensorInfo"
  | "InvalidMetadata"
  | "UnknownDtype"
  | "InvalidOffset"
  | "ValidationOverflow"
  | "MisalignedSlice"
  | "TensorInvalidInfo"
  | "MetadataIncompleteBuffer"
  | "TensorNotFound"
  | "DuplicateTensor"
  | "UnsupportedConversion";

export class SafetensorsError extends HubIoError {
  constructor(
    readonly rule: SafetensorsRule,
    message: string,
    readonly tensor?: string,
  ) {
    super(`[${rule}] ${tensor !== undefined ? `tensor ${JSON.stringify(tensor)}: ` : ""}${message}`);
  }
}

/** `model.safetensors.index.json` and shard planning. */
export class ShardedCheckpointError extends HubIoError {}
/** PEFT adapter_config.json / adapter_model.safetensors. */
export class PeftError extends HubIoError {}
/** config.json, tokenizer files and other repo files. */
export class RepoFileError extends HubIoError {}
/** README.md model card front matter. */
export class ModelCardError extends HubIoError {}
/** SHA256SUMS manifests. */
export class ManifestError extends HubIoError {}
/**
 * Rules of the archive readers: `TooLarge` (inflation would pass the caller's cap), `Corrupt` (not
 * a valid stream or archive), `Checksum` (CRC-32 or size disagrees with the data), `TrailingData`
 * (bytes after the end), `UnsafePath` (zip-slip names), `Duplicate`, `TypeClash` (a file where a
 * directory is needed or the reverse), `Symlink` (a link in the destination path), `Unsupported`,
 * `Overlap` (zip entries sharing bytes with each other or the central directory), `NotRegularFile`
 * (a zip entry that is a symlink, hard link, FIFO, device or socket), `NameTooLong` (an entry path
 * past PATH_MAX / NAME_MAX).
 */
export type ArchiveRule =
  | "TooLarge"
  | "Corrupt"
  | "Checksum"
  | "TrailingData"
  | "UnsafePath"
  | "Duplicate"
  | "TypeClash"
  | "Symlink"
  | "Unsupported"
  | "Overlap"
  | "NotRegularFile"
  | "NameTooLong";

/** gzip/zip archives (including zip-slip refusals). */
export class ArchiveError extends HubIoError {
  constructor(
    message: string,
    readonly rule: ArchiveRule = "Corrupt",
    /** Byte offset in the archive where the problem is, when known. */
    readonly byteOffset?: number,
    /** The entry (zip) the problem is about, when known. */
    readonly entry?: string,
  ) {
    super(`[${rule}] ${message}`);
  }
}
/** llama2.c checkpoints and tokenizers. */
export class Llama2cError extends HubIoError {}
/** Hub downloads and the local cache (offline mode). */
export class HubDownloadError extends HubIoError {}

/**
 * Rules of the GGUF reader and writer: `BadMagic`, `UnsupportedVersion`, `Truncated` (the file ends
 * inside the header or a tensor), `AbsurdCount` (a tensor, key or array count the file cannot
 * hold), `AbsurdSize` (a string, header or tensor larger than the file or the limits), `InvalidUtf8`,
 * `InvalidValueType`, `InvalidMetadata` (a key with the wrong kind, e.g. general.alignment),
 * `DuplicateKey`, `DuplicateTensor`, `InvalidTensorInfo` (dimensions, block sizes), `UnknownTensorType`
 * (an id ggml does not define), `UnsupportedTensorType` (a type kiln cannot decode), `InvalidOffset`
 * (misaligned, overlapping or past the end of the file), `TensorNotFound`, `UnsupportedConversion`.
 */
export type GgufRule =
  | "BadMagic"
  | "UnsupportedVersion"
  | "Truncated"
  | "AbsurdCount"
  | "AbsurdSize"
  | "InvalidUtf8"
  | "InvalidValueType"
  | "InvalidMetadata"
  | "DuplicateKey"
  | "DuplicateTensor"
  | "InvalidTensorInfo"
  | "UnknownTensorType"
  | "UnsupportedTensorType"
  | "InvalidOffset"
  | "TensorNotFound"
  | "UnsupportedConversion";

/** GGUF files (llama.cpp's format). */
export class GgufError extends HubIoError {
  constructor(
    readonly rule: GgufRule,
    message: string,
    readonly tensor?: string,
  ) {
    super(`[${rule}] ${tensor !== undefined ? `tensor ${JSON.stringify(tensor)}: ` : ""}${message}`);
  }
}
/** Converting between Hugging Face files and GGUF: an architecture, tokenizer or setting with no counterpart. */
export class GgufConvertError extends HubIoError {}
