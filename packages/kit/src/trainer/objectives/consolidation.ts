// Consolidation (OEL's self-distillation): the student — adapter on, no memory in its prompt — is
// fitted to the teacher's distribution over each completion token, the teacher being the adapter-off
// model with the task's memory in its system prompt; a token-level full-vocabulary divergence
// (@kiln/losses distillationLoss; TRL SDFT/GKD full_logits, docs/NUMERICS.md §3.3).
import { type ChunkedLogits, type DivergenceKind, type Logits, distillationLoss, padTokenRows } from "@kiln/losses";
import type { LoraAdapter } from "@kiln/lora";
import { type Model, defaultHeadChunkRows } from "@kiln/models";
import { Tensor, embedding, isTensor, noGrad, reshape } from "@kiln/tensor";
import { RecipeError } from "../../errors.js";
import type { Objective } from "../trainer.js";
import { type LengthOptions, trainingLogits } from "../training-logits.js";
import { completionTokens, distillationStep, fitToLength } from "./fit.js";

export interface ConsolidationSample {
  episodeId: string;
  turn: number;
  /** Prompt the student saw (no memory). */
  studentPromptIds: number[];
  /** The same conversation with the memory in the system prompt. */
  teacherPromptIds: number[];
  completionIds: number[];
}

function padded(rows: number[][], pad: number) {
  const { B, T, ids, attention } = padTokenRows(rows, pad);
  return { B, T, ids: new Tensor(ids, [B, T], "i32"), attention: new Tensor(attention, [B, T], "i32") };
}

export interface ConsolidateOptions {
  /** "forward_kl" = KL(teacher‖student) (default), "reverse_kl", or "jsd" with `beta`. */
  kind?: DivergenceKind;
  beta?: number;
  temperature?: number;
}

/**
 * Divergence between the student (gradient on) and teacher logits on each completion token.
 * `teacherLogits(ids, attention)` runs the teacher (no gradient), e.g. the adapter-off model; it
 * may return full logits [B, T, V] or hidden states plus head (`ChunkedLogits`). The student is
 * always projected in chunks; a chunked teacher is projected only at the completion rows,
 * `headChunkRows` rows at a time, so neither side ever holds [T, V] logits in one tensor.
 */
export function consolidationLoss(
  model: Model,
  teacherLogits: (ids: Tensor, attention: Tensor) => Logits,
  samples: readonly ConsolidationSample[],
  options: ConsolidateOptions & LengthOptions = {},
  padId = 0,
  /** Sees the student's logits (hidden states + head, rows in B·T order) and the completion-row mask. */
  onStudentLogits?: (logits: ChunkedLogits, mask: Uint8Array) => void,
) {
  if (samples.length === 0) throw new RecipeError("consolidationLoss: no samples");
  for (const x of samples)
    if (x.studentPromptIds.length === 0 || x.teacherPromptIds.length === 0)
      throw new RecipeError(`consolidationLoss: ${x.episodeId} turn ${x.turn} has an empty prompt`);
  const s = padded(
    samples.map((x) => [...x.studentPromptIds, ...x.completionIds]),
    padId,
  );
  const t = padded(
    samples.map((x) => [...x.teacherPromptIds, ...x.completionIds]),
    padId,
  );
  const student = trainingLogits(model, s.ids, s.attention, options);
  const teacher = noGrad(() => teacherLogits(t.ids, t.attention));
  const mask = new Uint8Array(s.B * s.T);
  const teacherRows = new Int32Array(s.B * s.T);
  const studentAt: number[] = [];
  const teacherAt: number[] = [];
  samples.forEach((x, b) => {
    // Row P+j−1 predicts completion token j in both renders.
    for (let j = 0; j < x.completionIds.length; j++) {
      const r = b * s.T + x.studentPromptIds.length + j - 1;
      mask[r] = 1;
      teacherRows[r] = b * t.T + x.teacherPromptIds.length + j - 1;
      studentAt.push(r);
      teacherAt.push(teacherRows[r]);
    }
  });
  onStudentLogits?.(student, mask);
  const divergence = {
    kind: options.kind ?? "forward_kl",
    beta: options.beta,
    temperature: options.temperature,
  } as const;
  if (isTensor(teacher)) {
    const V = teacher.shape[teacher.rank - 1];
    return distillationLoss(student, reshape(teacher, [t.B * t.T, V]), { ...divergence, mask, teacherRows });
  }
  const N = studentAt.length;
  if (N === 0) throw new RecipeError("consolidationLoss: the samples have no completion tokens");
  if (teacher.vocab !== student.vocab)
    throw new RecipeError(
      `consolidationLoss: teacher vocabulary ${teacher.vocab} differs from the student's ${student.vocab}`,
    );
  // The completion rows of both sides, projected `size` rows at a time by distillationLoss; the
  // teacher's chunks are projected again in the backward rather than kept (no [N, V] of them).
  const D = student.hidden.shape[student.hidden.rank - 1];
  const studentFlat = reshape(student.hidden, [s.B * s.T, D]);
  const size = options.headChunkRows ?? student.chunkRows ?? defaultHeadChunkRows(student.vocab);
  const out = distillationLoss(
    {
      hidden: embedding(studentFlat, new Tensor(Int32Array.from(studentAt), [N], "i32")),
      vocab: student.vocab,
      project: student.project,
      chunkRows: size,
    },
    teacher,
    { ...divergence, teacherRows: teacherAt },
  );
  return { loss: out.loss, metrics: { loss: out.metrics.loss, divergence: out.metrics.divergence, num_tokens: N } };
}

/** Self-distillation: the adapter-on student without memory fitted to the adapter-off model with it. */
export function consolidationObjective(
  model: Model,
  adapter: LoraAdapter,
  options: ConsolidateOptions & LengthOptions = {},
  padId = 0,
): Objective<ConsolidationSample> {
  // The student's row (no memory) is the one cut to maxLength; the teacher keeps its full prompt.
  const fit = (samples: readonly ConsolidationSample[]) =>
    options.maxLength === undefined
      ? samples
      : samples.map((x) => {
          const cut = fitToLength(
            { promptIds: x.studentPromptIds, completionIds: x.completionIds },
            options.maxLength!,
          );
          return { ...x, studentPromptIds: [...cut.promptIds], completionIds: [...cut.completionIds] };
        });
  // The teacher is the adapter-off model: its head projects with the adapter off too.
  const teacher = (ids: Tensor, attention: Tensor) => {
    const logits = adapter.withDisabled(() => trainingLogits(model, ids, attention, options));
    return { ...logits, project: (rows: Tensor) => adapter.withDisabled(() => logits.project(rows)) };
  };
  return {
    items: (samples) => completionTokens(fit(samples)),
    loss(all, stepItems) {
      const samples = fit(all);
      const { out, loss, entropy } = distillationStep(completionTokens(samples), stepItems, (onLogits) =>
        consolidationLoss(model, teacher, samples, options, padId, onLogits),
      );
      return {
        loss,
        tokens: samples.reduce((a, s) => a + s.studentPromptIds.length + s.completionIds.length, 0),
        metrics: { divergence: out.metrics.loss ?? out.loss.item(), entropy },
      };
    },
  };
}
