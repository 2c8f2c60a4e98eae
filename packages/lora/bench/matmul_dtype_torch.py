"""PyTorch's single-thread matmul throughput per dtype: why a bf16 base is fast on AMX CPUs.

usage: /usr/bin/python3 packages/lora/bench/matmul_dtype_torch.py [n]
Prints GFLOP/s (median of 7 timed n×n×n products, after 3 warm-ups) for bfloat16 and float32, and
the OpenBLAS core. OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE pin OpenBLAS to an older kernel; the script
re-runs itself without them (as the benchmarks' peers run) so the float32 figure is full speed.
"""

import ctypes
import os
import sys
import time

PINNING = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if any(v in os.environ for v in PINNING):
    env = {k: v for k, v in os.environ.items() if k not in PINNING}
    os.execve(sys.executable, [sys.executable, *sys.argv], env)

import torch  # noqa: E402  (after the environment is settled: OpenBLAS reads it when it loads)

torch.set_num_threads(1)
try:
    blas = ctypes.CDLL("libblas.so.3")
    blas.openblas_get_corename.restype = ctypes.c_char_p
    print(f"OpenBLAS core: {blas.openblas_get_corename().decode()}")
except (OSError, AttributeError):
    print("BLAS: not OpenBLAS (no openblas_get_corename)")
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
