#!/usr/bin/env python3
"""PyTorch peer for `pnpm bench models train-step`: one LoRA training step on a Qwen3-0.6B-shaped
model (random weights, the real config's dims), as transformers + PEFT would run it on CPU: the
base in DTYPE (f32 or bf16) and frozen, LoRA r16 (alpha 32) on q/k/v/o/gate/up/down in f32, full
[T, V] logits, cross-entropy, backward, AdamW; no activation recomputation. Then a 128-token
prefill and greedy decode steps with a KV cache. 1 torch thread.

usage: torch_train_step.py DTYPE --layers N --seq T --steps S --decode D
Prints one JSON line: stepMs (per step), prefillMs, decodeMs, maxRssMiB (ru_maxrss), loss, version.
"""
import json
import resource
import sys
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(1)


def arg(name, default):
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


DTYPE = {"f32": torch.float32, "bf16": torch.bfloat16}[sys.argv[1]]
L, T, STEPS, DECODE = arg("--layers", 28), arg("--seq", 1024), arg("--steps", 2), arg("--decode", 16)
V, D, I, H, KV, HD, EPS, THETA = 151936, 1024, 3072, 16, 8, 128, 1e-6, 1e6
R, ALPHA = 16, 32
g = torch.Generator().manual_seed(0)


def w(o, i):
    return (torch.randn(o, i, generator=g) * 0.02).to(DTYPE)


class Lin:
    def __init__(self, o, i):
        self.w = w(o, i)
        self.a = (torch.randn(R, i, generator=g) * (1 / i) ** 0.5).requires_grad_()
        self.b = torch.zeros(o, R, requires_grad=True)

    def __call__(self, x):
        base = F.linear(x, self.w)
        return base + (F.linear(F.linear(x.float(), self.a), self.b) * (ALPHA / R)).to(x.dtype)


embed = w(V, D)
layers = [
    dict(q=Lin(H * HD, D), k=Lin(KV * HD, D), v=Lin(KV * HD, D), o=Lin(D, H * HD), gate=Lin(I, D), up=Lin(I, D),
         down=Lin(D, I), n1=torch.ones(D, dtype=DTYPE), n2=torch.ones(D, dtype=DTYPE),
         qn=torch.ones(HD, dtype=DTYPE), kn=torch.ones(HD, dtype=DTYPE))
    for _ in range(L)
]
norm = torch.ones(D, dtype=DTYPE)
inv = 1.0 / (THETA ** (torch.arange(0, HD, 2).float() / HD))


def rms(x, weight):
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype)


def rot(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], -1)


def forward(ids, cache=None, pos0=0):
    B, S = ids.shape
    x = embed[ids]
    pos = torch.arange(pos0, pos0 + S).float()
    f = pos[:, None] * inv[None]
    emb = torch.cat([f, f], -1)
    cos, sin = emb.cos().to(DTYPE), emb.sin().to(DTYPE)
    for li, p in enumerate(layers):
        h = rms(x, p["n1"])
        q = rms(p["q"](h).view(B, S, H, HD), p["qn"]).transpose(1, 2)
        k = rms(p["k"](h).view(B, S, KV, HD), p["kn"]).transpose(1, 2)
        v = p["v"](h).view(B, S, KV, HD).transpose(1, 2)
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        if cache is not None:
            if li in cache:
                k, v = torch.cat([cache[li][0], k], 2), torch.cat([cache[li][1], v], 2)
            cache[li] = (k, v)
        k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None or S > 1) if hasattr(F, "scaled_dot_product_attention") else None
        if a is None:
            s = (q @ k.transpose(-1, -2)) * HD ** -0.5
            if S > 1:
                s = s + torch.full((S, k.shape[2]), float("-inf"), dtype=s.dtype).triu(k.shape[2] - S + 1)
            a = torch.softmax(s.float(), -1).to(DTYPE) @ v
        x = x + p["o"](a.transpose(1, 2).reshape(B, S, H * HD))
        h = rms(x, p["n2"])
        x = x + p["down"](F.silu(p["gate"](h)) * p["up"](h))
    return rms(x, norm) @ embed.T


params = [t for p in layers for m in ("q", "k", "v", "o", "gate", "up", "down") for t in (p[m].a, p[m].b)]
opt = torch.optim.AdamW(params, lr=1e-4)
ids = torch.tensor([[(i * 7919 + 13) % V for i in range(T)]])
step_ms, loss = [], float("nan")
for _ in range(STEPS):
    t0 = time.perf_counter()
    opt.zero_grad()
    logits = forward(ids)
    out = F.cross_entropy(logits[0, :-1].float(), ids[0, 1:])
    out.backward()
    opt.step()
    step_ms.append((time.perf_counter() - t0) * 1000)
    loss = float(out)
    del logits, out
prompt = torch.tensor([[(i * 104729 + 7) % V for i in range(128)]])
with torch.no_grad():
    t0 = time.perf_counter()
    cache = {}
    logits = forward(prompt, cache)
    prefill = (time.perf_counter() - t0) * 1000
    nxt = logits[:, -1].argmax(-1, keepdim=True)
    t0 = time.perf_counter()
    for s in range(DECODE):
        nxt = forward(nxt, cache, 128 + s)[:, -1].argmax(-1, keepdim=True)
    decode = (time.perf_counter() - t0) * 1000
print(json.dumps({"stepMs": step_ms, "prefillMs": prefill, "decodeMs": decode,
                  "maxRssMiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "loss": loss,
                  "version": torch.__version__}))
