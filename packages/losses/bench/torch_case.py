"""PyTorch peer for `pnpm bench losses`: the same case as bench/kiln-case.ts, one torch thread.

usage: torch_case.py <ce|kl|jsd> <tokens> <vocab> <reps>
Prints one JSON line: median/min ms of forward+backward and the peak RSS increase (MiB) over the
baseline taken after the inputs exist (peak from resource.getrusage, baseline from VmRSS).
The losses are the reference formulas: F.cross_entropy (transformers causal-LM loss) and TRL
GKD's generalized JSD (beta = 0 -> forward KL via kl_div(log_target=True)).
"""

import json
import resource
import sys
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
kind, T, V, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


gen = torch.Generator().manual_seed(0)
student = torch.randn(T, V, generator=gen) * 2
teacher = torch.randn(T, V, generator=gen) * 2 if kind != "ce" else None
labels = (torch.arange(T) * 7919) % V
student.requires_grad_(True)
baseline = rss_mib()


def step():
    if kind == "ce":
        loss = F.cross_entropy(student, labels)
    else:
        s = F.log_softmax(student, dim=-1)
        t = F.log_softmax(teacher, dim=-1)
        if kind == "kl":
            per = F.kl_div(s, t, reduction="none", log_target=True)
        else:
            b = torch.tensor(0.5)
            m = torch.logsumexp(torch.stack([s + torch.log(1 - b), t + torch.log(b)]), dim=0)
            per = b * F.kl_div(m, t, reduction="none", log_target=True) + (1 - b) * F.kl_div(m, s, reduction="none", log_target=True)
        loss = per.sum() / T
    loss.backward()
    return loss.item()


times = []
value = 0.0
for r in range(reps + 1):
    student.grad = None
    t0 = time.perf_counter()
    value = step()
    ms = (time.perf_counter() - t0) * 1000
    if r > 0:
        times.append(ms)
    student.grad = None
times.sort()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"median_ms": times[len(times) // 2], "min_ms": times[0], "peak_delta_mib": peak - baseline,
                  "baseline_mib": baseline, "loss": value, "torch": torch.__version__}))
