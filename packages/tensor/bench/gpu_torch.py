#!/usr/bin/env python3
"""PyTorch CUDA peer of `pnpm bench gpu`: f32 GEMM (TF32 off: plain FP32 cores), f16 GEMM, the reference
decoder's fwd+bwd (bench/decoder-model.ts shapes) and a Qwen3-0.6B-shaped LoRA step (bf16 frozen random
base, LoRA r16 on every linear, B=1, T=256, AdamW on the adapters). Prints one JSON line; without CUDA
it prints {"available": false, "reason": ...}."""
import json
import math
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except Exception as err:  # noqa: BLE001
    print(json.dumps({"available": False, "reason": f"torch not importable: {err}"}))
    sys.exit(0)
if not torch.cuda.is_available():
    print(json.dumps({"available": False, "reason": "torch.cuda.is_available() is False"}))
    sys.exit(0)

dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
N = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
LORA = (sys.argv[2] if len(sys.argv) > 2 else "1") == "1"


def timed(fn, reps=5):
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) * 1000)
    return sorted(out)[len(out) // 2]


res = {"available": True, "device": torch.cuda.get_device_name(0), "torch": torch.__version__}
for name, dtype in (("matmul_f32", torch.float32), ("matmul_f16", torch.float16)):
    a = torch.randn(N, N, device=dev, dtype=dtype)
    b = torch.randn(N, N, device=dev, dtype=dtype)
    ms = timed(lambda: a @ b)
    res[name] = 2 * N**3 / (ms * 1e6)

# Reference decoder (decoder-model.ts): 4 layers, d=256, 4 heads, hidden 688, vocab 2048, T=128, B=4, f32.
L, D, H, HID, V, S, B = 4, 256, 4, 688, 2048, 128, 4
HD = D // H


def w(o, i, dtype=torch.float32, grad=True):
    return (torch.randn(o, i, device=dev) * 0.02).to(dtype).requires_grad_(grad)


def rms(x, g, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


def rope(x, cos, sin):
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def tables(seq, hd, theta):
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, device=dev).float() / hd))
    ang = torch.outer(torch.arange(seq, device=dev).float(), inv)
    return ang.cos(), ang.sin()


embed, head, norm = w(V, D), w(V, D), torch.ones(D, device=dev, requires_grad=True)
layers = [dict(an=torch.ones(D, device=dev, requires_grad=True), q=w(D, D), k=w(D, D), v=w(D, D), o=w(D, D),
               mn=torch.ones(D, device=dev, requires_grad=True), gate=w(HID, D), up=w(HID, D), down=w(D, HID))
          for _ in range(L)]
cos, sin = tables(S, HD, 10000.0)
ids = torch.randint(0, V, (B, S), device=dev)


def decoder_fwd_bwd():
    h = embed[ids]
    for l in layers:
        n = rms(h, l["an"], 1e-5)
        sp = lambda t: t.view(B, S, H, HD).transpose(1, 2)  # noqa: E731
        q, k, v = rope(sp(n @ l["q"].T), cos, sin), rope(sp(n @ l["k"].T), cos, sin), sp(n @ l["v"].T)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, S, D)
        h = h + a @ l["o"].T
        m = rms(h, l["mn"], 1e-5)
        h = h + (F.silu(m @ l["gate"].T) * (m @ l["up"].T)) @ l["down"].T
    logits = rms(h, norm, 1e-5) @ head.T
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
    loss.backward()


res["decoder_tok_s"] = B * S / timed(decoder_fwd_bwd) * 1000

if LORA:
    # Qwen3-0.6B: 28 layers, d=1024, 16 heads / 8 kv heads of 128, hidden 3072, vocab 151,936, tied embeddings.
    QL, QD, QH, QKV, QHD, QHID, QV, QS, R, ALPHA = 28, 1024, 16, 8, 128, 3072, 151936, 256, 16, 32
    bf = torch.bfloat16
    qemb = w(QV, QD, bf, False)
    qlayers = []
    lora = []

    def lin(o, i):
        W = w(o, i, bf, False)
        A = (torch.randn(R, i, device=dev) / math.sqrt(i)).requires_grad_(True)
        Bm = torch.zeros(o, R, device=dev, requires_grad=True)
        lora.extend([A, Bm])
        return (W, A, Bm)

    def apply(x, p):
        W, A, Bm = p
        return (x.to(bf) @ W.T).float() + (x @ A.T @ Bm.T) * (ALPHA / R)

    for _ in range(QL):
        qlayers.append(dict(an=torch.ones(QD, device=dev), mn=torch.ones(QD, device=dev),
                            qn=torch.ones(QHD, device=dev), kn=torch.ones(QHD, device=dev),
                            q=lin(QH * QHD, QD), k=lin(QKV * QHD, QD), v=lin(QKV * QHD, QD), o=lin(QD, QH * QHD),
                            gate=lin(QHID, QD), up=lin(QHID, QD), down=lin(QD, QHID)))
    qnorm = torch.ones(QD, device=dev)
    qcos, qsin = tables(QS, QHD, 1_000_000.0)
    qids = torch.randint(0, QV, (1, QS), device=dev)
    opt = torch.optim.AdamW(lora, lr=1e-4)

    def lora_step():
        opt.zero_grad(set_to_none=True)
        h = qemb[qids].float()
        for l in qlayers:
            n = rms(h, l["an"], 1e-6)
            q = rms(apply(n, l["q"]).view(1, QS, QH, QHD), l["qn"], 1e-6).transpose(1, 2)
            k = rms(apply(n, l["k"]).view(1, QS, QKV, QHD), l["kn"], 1e-6).transpose(1, 2)
            v = apply(n, l["v"]).view(1, QS, QKV, QHD).transpose(1, 2)
            q, k = rope(q, qcos, qsin), rope(k, qcos, qsin)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            h = h + apply(a.transpose(1, 2).reshape(1, QS, QH * QHD), l["o"])
            m = rms(h, l["mn"], 1e-6)
            h = h + apply(F.silu(apply(m, l["gate"])) * apply(m, l["up"]), l["down"])
        logits = (rms(h, qnorm, 1e-6).to(bf) @ qemb.T).float()
        F.cross_entropy(logits[0, :-1], qids[0, 1:]).backward()
        opt.step()

    torch.cuda.reset_peak_memory_stats()
    res["lora_tok_s"] = QS / timed(lora_step, 3) * 1000
    res["lora_peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
print(json.dumps(res))
