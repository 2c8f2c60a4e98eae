#!/usr/bin/env python3
"""PyTorch peer for `pnpm bench models`: the same Llama-architecture weights (config.json +
model.safetensors written by bench/index.ts), fp32, 1 torch thread, eager attention with a
KV cache (transformers LlamaForCausalLM semantics, docs/NUMERICS.md §5).

usage: torch_decoder.py MODEL_DIR PROMPT_LEN DECODE_STEPS
Prints a JSON line with the torch version once loaded (after a warm-up rep), then, for each
line read from stdin, runs one rep and prints {prefill_ms, decode_ms, tokens}: DECODE_STEPS
greedy single-token steps after the prefill, and the greedy tokens (a cross-check against kiln).
The driver interleaves these reps with kiln's, so both see the same machine load.
"""
import json
import math
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)


def load(dir_):
    cfg = json.load(open(f"{dir_}/config.json"))
    raw = open(f"{dir_}/model.safetensors", "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    w = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", name
        b, e = info["data_offsets"]
        w[name] = torch.from_numpy(np.frombuffer(raw[8 + n + b:8 + n + e], dtype="<f4").reshape(info["shape"]).copy())
    return cfg, w


class Llama:
    def __init__(self, cfg, w):
        self.c, self.w = cfg, w
        self.H = cfg["num_attention_heads"]
        self.KV = cfg.get("num_key_value_heads", self.H)
        self.d = cfg.get("head_dim") or cfg["hidden_size"] // self.H
        self.eps = cfg["rms_norm_eps"]
        self.inv = 1.0 / (cfg.get("rope_theta", 10000.0) ** (torch.arange(0, self.d, 2).float() / self.d))
        self.head = w.get("lm_head.weight", w["model.embed_tokens.weight"])

    def rms(self, x, wt):
        return wt * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def forward(self, ids, cache):
        B, T = ids.shape
        past = cache[0][0].shape[2] if cache else 0
        ang = torch.outer(torch.arange(past, past + T).float(), self.inv)
        emb = torch.cat([ang, ang], -1)
        cos, sin = emb.cos(), emb.sin()

        def rope(x):
            h = self.d // 2
            return x * cos + torch.cat([-x[..., h:], x[..., :h]], -1) * sin

        x = F.embedding(ids, self.w["model.embed_tokens.weight"])
        new_cache = []
        for l in range(self.c["num_hidden_layers"]):
            p = f"model.layers.{l}."
            g = lambda name: self.w[p + name + ".weight"]
            h = self.rms(x, g("input_layernorm"))
            q = rope((h @ g("self_attn.q_proj").T).view(B, T, self.H, self.d).transpose(1, 2))
            k = rope((h @ g("self_attn.k_proj").T).view(B, T, self.KV, self.d).transpose(1, 2))
            v = (h @ g("self_attn.v_proj").T).view(B, T, self.KV, self.d).transpose(1, 2)
            if cache:
                k = torch.cat([cache[l][0], k], 2)
                v = torch.cat([cache[l][1], v], 2)
            new_cache.append((k, v))
            rep = self.H // self.KV
            kk, vv = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            s = q @ kk.transpose(-1, -2) / math.sqrt(self.d)
            if T > 1:
                s = s + torch.full((T, past + T), float("-inf")).triu(past + 1)
            a = torch.softmax(s, -1) @ vv
            x = x + a.transpose(1, 2).reshape(B, T, -1) @ g("self_attn.o_proj").T
            h = self.rms(x, g("post_attention_layernorm"))
            x = x + (F.silu(h @ g("mlp.gate_proj").T) * (h @ g("mlp.up_proj").T)) @ g("mlp.down_proj").T
        x = self.rms(x[:, -1:], self.w["model.norm.weight"])  # logits of the last position only, as generate needs
        return x @ self.head.T, new_cache


def main():
    dir_, prompt_len, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    cfg, w = load(dir_)
    m = Llama(cfg, w)
    V = cfg["vocab_size"]
    ids = torch.tensor([[(i * 7 + 3) % V for i in range(prompt_len)]])

    def rep():
        with torch.no_grad():
            t0 = time.perf_counter()
            logits, cache = m.forward(ids, None)
            t1 = time.perf_counter()
            tokens = []
            for _ in range(steps):
                tok = int(logits[0, -1].argmax())
                tokens.append(tok)
                logits, cache = m.forward(torch.tensor([[tok]]), cache)
            t2 = time.perf_counter()
        return dict(prefill_ms=(t1 - t0) * 1000, decode_ms=(t2 - t1) * 1000, tokens=tokens)

    rep()  # warm-up
    print(json.dumps(dict(torch=torch.__version__)), flush=True)
    for _ in sys.stdin:
        print(json.dumps(rep()), flush=True)


if __name__ == "__main__":
    main()
