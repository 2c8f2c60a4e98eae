// The tensor benchmark's reference decoder (4 layers, d=256, 4 heads, FFN 688, vocab 2048, untied) as a
// LlamaForCausalLM config: the model `pnpm bench models` and its decode profile measure.
export const REFERENCE_CONFIG = {
  architectures: ["LlamaForCausalLM"],
  model_type: "llama",
  vocab_size: 2048,
  hidden_size: 256,
  intermediate_size: 688,
  num_hidden_layers: 4,
  num_attention_heads: 4,
  num_key_value_heads: 4,
  rms_norm_eps: 1e-5,
  rope_theta: 10000.0,
  tie_word_embeddings: false,
  max_position_embeddings: 512,
};
