// What an evaluation phase reports (base, after SFT, after each round…). Below both the recipes that
// produce it and the report that renders it (docs/ARCHITECTURE.md §Floors).
import type { MeanSe, PairedDelta } from "@kiln/rollout";

/** One phase's evaluation: per-instance scores (for paired Δ), mean ± SE, errors surfaced. */
export interface PhaseEval {
  phase: string;
  n: number;
  score: MeanSe;
  success: MeanSe;
  /** Score per evaluation instance id. */
  scores: Record<string, number>;
  /** Episodes that errored: id and reason. */
  errors: { id: string; reason: string }[];
  /** Paired difference of the score against the base model on the same instances. */
  delta?: PairedDelta;
}
