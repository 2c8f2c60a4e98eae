#!/usr/bin/env python3
"""PyTorch peer of bench/lora-step-run.ts: the same Llama (4 layers, d=256, 4 heads, SwiGLU 688,
vocab 2048) with frozen bf16 base weights and fp32 LoRA r=16 alpha=32 on all linear layers
(PEFT's forward: base(x) + s * B(A(x))), AdamW on the adapter, B=4 x T=128, 1 torch thread."""
import json
import math
import resource
import sys
import time

import os
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tooling", "python"))
from torch_blas import torch_blas  # noqa: E402  the BLAS torch itself mapped, read in this process
import torch.nn.functional as F

torch.set_num_threads(1)
L, D, H, HID, V, S, B, R, ALPHA = 4, 256, 4, 688, 2048, 128, 4, 16, 32
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
# "bfloat16" (default, as kiln's frozen base) or "float32": on CPUs with AMX, torch's bf16 matmuls
# run on the matrix unit, which WebAssembly cannot reach, so the f32 base is the like-for-like peer.
BASE = getattr(torch, sys.argv[2]) if len(sys.argv) > 2 else torch.bfloat16
HD = D // H
g = torch.Generator().manual_seed(0)
adapters = []


class LoraLinear:
    def __init__(self, out_f, in_f):
        self.w = (torch.randn(out_f, in_f, generator=g) * 0.02).to(BASE)
        self.a = (torch.rand(R, in_f, generator=g) * 2 - 1).div(math.sqrt(in_f)).requires_grad_(True)
        self.b = torch.zeros(out_f, R, requires_grad=True)
        adapters.extend([self.a, self.b])

    def __call__(self, x):
        base = (x.to(BASE) @ self.w.T).float()
        return base + (ALPHA / R) * ((x @ self.a.T) @ self.b.T)


embed = (torch.randn(V, D, generator=g) * 0.02).to(BASE)
layers = [dict(q=LoraLinear(D, D), k=LoraLinear(D, D), v=LoraLinear(D, D), o=LoraLinear(D, D),
               gate=LoraLinear(HID, D), up=LoraLinear(HID, D), down=LoraLinear(D, HID)) for _ in range(L)]
head = (torch.randn(V, D, generator=g) * 0.02).to(BASE)
inv_freq = 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD))
ang = torch.outer(torch.arange(S).float(), inv_freq)
cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
mask = torch.full((S, S), float("-inf")).triu(1)


def rms(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)


def rot(x):
    return torch.cat([-x[..., HD // 2:], x[..., : HD // 2]], -1)


def loss_fn(ids):
    h = F.embedding(ids, embed).float()
    for l in layers:
        n = rms(h)
        q, k, v = [l[name](n).view(B, S, H, HD).transpose(1, 2) for name in ("q", "k", "v")]
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(HD) + mask, -1) @ v
        h = h + l["o"](a.transpose(1, 2).reshape(B, S, D))
        m = rms(h)
        h = h + l["down"](F.silu(l["gate"](m)) * l["up"](m))
    logits = (rms(h).to(BASE) @ head.T).float()
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))


ids = torch.randint(0, V, (B, S), generator=g)
opt = torch.optim.AdamW(adapters, lr=1e-4)
times = []
cpu = []
# Steps before the measured ones: KILN_BENCH_WARMUP, as kiln's step scripts (set by the bench's --warmup).
warmup = int(os.environ.get("KILN_BENCH_WARMUP", "1"))
for r in range(reps + warmup):
    c0 = time.process_time()
    t0 = time.perf_counter()
    opt.zero_grad()
    loss_fn(ids).backward()
    opt.step()
    if r >= warmup:
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
print(json.dumps({"step_ms": sorted(times)[len(times) // 2], "step_cpu_ms": sorted(cpu)[len(cpu) // 2], "tokens": B * S,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "trainable": sum(p.numel() for p in adapters), **torch_blas()}))
