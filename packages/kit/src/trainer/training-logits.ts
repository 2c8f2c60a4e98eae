// The training forward of every objective: hidden states plus the output head instead of logits.
import type { Model } from "@kiln/models";
import type { Tensor } from "@kiln/tensor";
import { TrainerError } from "./errors.js";

export interface LengthOptions {
  /** Longest row in tokens (SFT keeps the start unless `truncationSide` is "left", DPO the end). */
  maxLength?: number;
  /** Which end of an over-long SFT row is cut: "right" (default, keeps the start) or "left". */
  truncationSide?: "left" | "right";
  /** Recompute each decoder layer in the backward instead of keeping its activations. */
  checkpointLayers?: boolean;
  /** Older name of `checkpointLayers`. */
  gradientCheckpointing?: boolean;
  /**
   * Rows of hidden states sent through the output head at a time: the loss never holds more than
   * `headChunkRows × V` logits (default: about 4 Mi logits per chunk, @kiln/losses).
   */
  headChunkRows?: number;
}

/**
 * The model's logits for training as hidden states plus the head (@kiln/losses `ChunkedLogits`):
 * every loss projects them `headChunkRows` rows at a time, forward and backward, so a [T, V]
 * logits tensor never exists (at V = 151,936 one 2,048-token row would be 1.2 GB).
 */
export function trainingLogits(
  model: Model,
  ids: Tensor,
  attentionMask: Tensor | undefined,
  options: LengthOptions = {},
) {
  if (options.headChunkRows !== undefined && !(Number.isInteger(options.headChunkRows) && options.headChunkRows >= 1))
    throw new TrainerError(`headChunkRows must be a positive integer, got ${options.headChunkRows}`);
  return model.chunkedLogits(ids, {
    attentionMask,
    checkpointLayers: options.checkpointLayers ?? options.gradientCheckpointing,
    chunkRows: options.headChunkRows,
  });
}
