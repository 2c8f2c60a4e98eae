"""PyTorch's single-thread matmul throughput per dtype: why a bf16 base is fast on AMX CPUs.

usage: /usr/bin/python3 packages/lora/bench/matmul_dtype_torch.py [n]
Prints GFLOP/s (median of 7 timed n×n×n products, after 3 warm-ups) for bfloat16 and float32.
"""

import sys
import time

import torch

torch.set_num_threads(1)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
for dtype in (torch.bfloat16, torch.float32):
    a = torch.randn(n, n).to(dtype)
    b = torch.randn(n, n).to(dtype)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    times.sort()
    print(f"{dtype}: {2 * n**3 / times[3] / 1e9:.1f} GFLOP/s (n={n}, 1 thread, median of 7)")
