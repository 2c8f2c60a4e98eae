// SFT: next-token cross-entropy on the assistant's tokens (@kiln/losses sftLoss, labels from
// collateSft through the chat template; docs/NUMERICS.md §3.1).
import { countTargetTokens, sftLoss } from "@kiln/losses";
import type { Model } from "@kiln/models";
import { type ChatCodec, type Conversation, conversationBatch } from "../chat-batches.js";
import type { Objective } from "../trainer.js";
import { type LengthOptions, trainingLogits } from "../training-logits.js";

/** Next-token cross-entropy on assistant tokens only. Items: target tokens. */
export function sftObjective(model: Model, codec: ChatCodec, options: LengthOptions = {}): Objective<Conversation> {
  const batches = new Map<readonly Conversation[], ReturnType<typeof conversationBatch>>();
  const batchOf = (examples: readonly Conversation[]) => {
    let b = batches.get(examples);
    if (!b) {
      batches.clear();
      b = conversationBatch(codec, examples, options.maxLength, options.truncationSide);
      batches.set(examples, b);
    }
    return b;
  };
  return {
    items: (examples) => countTargetTokens(batchOf(examples).labels),
    loss(examples, stepItems) {
      const b = batchOf(examples);
      const logits = trainingLogits(model, b.inputIds, b.attentionMask, options);
      const out = sftLoss(logits, b.labels, { numItemsInBatch: stepItems });
      return {
        loss: out.loss,
        tokens: b.inputIds.size,
        metrics: { mean_token_accuracy: out.metrics.mean_token_accuracy ?? 0 },
      };
    },
  };
}
