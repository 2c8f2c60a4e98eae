"""Peer for bench/matmul.ts: PyTorch (Debian python3-torch + OpenBLAS) float32 square matmul.

Serves timing requests so the benchmark can interleave it with the kiln kernels (the machine is shared,
so measurements taken minutes apart are not comparable). Protocol, one line each way:
  stdin  "N REPS"   ->  stdout {"n": N, "median_s": wall seconds, "min_s": ..., "median_cpu_s": process CPU seconds}
The first stdout line is {"torch": version, "threads": torch threads}. EOF on stdin ends the process.
Torch runs with 1 intra-op thread (js-stack spec §5: 2 torch threads fight OpenBLAS's own threads);
OpenBLAS's thread count comes from OPENBLAS_NUM_THREADS, set by the caller.
"""

import json
import statistics
import sys
import time

import os
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tooling", "python"))
from torch_blas import torch_blas  # noqa: E402  the BLAS torch itself mapped, read in this process

torch.set_num_threads(1)
print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), **torch_blas()}), flush=True)
cache = {}
for line in sys.stdin:
    n, reps = (int(x) for x in line.split())
    if n not in cache:
        cache[n] = (torch.rand(n, n), torch.rand(n, n), torch.empty(n, n))
    a, b, out = cache[n]
    torch.matmul(a, b, out=out)
    samples = []
    cpu = []
    for _ in range(reps):
        c = time.process_time()
        t = time.perf_counter()
        torch.matmul(a, b, out=out)
        samples.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    result = {"n": n, "median_s": statistics.median(samples), "min_s": min(samples), "median_cpu_s": statistics.median(cpu)}
    print(json.dumps(result), flush=True)
