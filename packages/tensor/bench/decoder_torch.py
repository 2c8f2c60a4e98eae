#!/usr/bin/env python3
"""PyTorch peer of bench/decoder-model.ts: same architecture, fp32, 1 torch thread.
  python3 bench/decoder_torch.py [reps] [threads]   (threads: torch.set_num_threads, default 1)
Prints one JSON line: median fwd+bwd and fwd+bwd+AdamW times (ms), peak RSS (MiB)."""
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

torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
L, D, H, HID, V, S, B = 4, 256, 4, 688, 2048, 128, 4
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
HD = D // H
g = torch.Generator().manual_seed(0)


def w(o, i):
    return (torch.randn(o, i, generator=g) * 0.02).requires_grad_(True)


embed, head = w(V, D), w(V, D)
layers = [dict(an=torch.ones(D, requires_grad=True), q=w(D, D), k=w(D, D), v=w(D, D), o=w(D, D),
               mn=torch.ones(D, requires_grad=True), gate=w(HID, D), up=w(HID, D), down=w(D, HID)) for _ in range(L)]
norm = torch.ones(D, requires_grad=True)
params = [embed, head, norm] + [p for l in layers for p in l.values()]
inv_freq = 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD))
ang = torch.outer(torch.arange(S).float(), inv_freq)
cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
mask = torch.full((S, S), float("-inf")).triu(1)


def rms(x, wt):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * wt


def rot(x):
    x1, x2 = x[..., : HD // 2], x[..., HD // 2:]
    return torch.cat([-x2, x1], -1)


def loss_fn(ids):
    h = F.embedding(ids, embed)
    for l in layers:
        n = rms(h, l["an"])
        q, k, v = [(n @ l[name].T).view(B, S, H, HD).transpose(1, 2) for name in ("q", "k", "v")]
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(HD) + mask, -1) @ v
        h = h + a.transpose(1, 2).reshape(B, S, D) @ l["o"].T
        m = rms(h, l["mn"])
        h = h + (F.silu(m @ l["gate"].T) * (m @ l["up"].T)) @ l["down"].T
    logits = rms(h, norm) @ head.T
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))


ids = torch.randint(0, V, (B, S), generator=g)
opt = torch.optim.AdamW(params, lr=1e-3)
fb, st, cpu = [], [], []
# Steps before the measured ones: KILN_BENCH_WARMUP, as kiln's step scripts (set by the bench's --warmup).
warmup = int(os.environ.get("KILN_BENCH_WARMUP", "1"))
for r in range(reps + warmup):
    opt.zero_grad()
    c0 = time.process_time()
    t0 = time.perf_counter()
    loss = loss_fn(ids)
    loss.backward()
    t1 = time.perf_counter()
    opt.step()
    t2 = time.perf_counter()
    c1 = time.process_time()
    if r >= warmup:
        cpu.append((c1 - c0) * 1000)
        fb.append((t1 - t0) * 1000)
        st.append((t2 - t0) * 1000)
med = lambda xs: sorted(xs)[len(xs) // 2]
print(json.dumps({"fwd_bwd_ms": med(fb), "step_ms": med(st), "step_cpu_ms": med(cpu), "tokens": B * S,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "torch": torch.__version__,
                  **torch_blas()}))
