"""The BLAS a PyTorch benchmark peer really runs on, read from inside the peer's own process.

Benchmark notes must name the OpenBLAS kernel ("core") torch itself uses, not one of a library loaded
separately for the question (a second load may resolve to another file, and OPENBLAS_CORETYPE read at a
different time). So: make torch run a GEMM (its BLAS is loaded and initialised then), list the BLAS
libraries this process has mapped (/proc/self/maps), and ask those very mappings — dlopen with
RTLD_NOLOAD returns the loaded handle or fails, it never loads anything new — for OpenBLAS's
corename and config.
"""
import ctypes
import os
import re

BLAS_NAME = re.compile(r"(openblas|libblas|libcblas|mkl_rt|libblis)")


def mapped_blas_libraries():
    """Paths of BLAS-looking libraries mapped into this process, OpenBLAS builds first."""
    paths = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split()
                if len(fields) >= 6 and fields[5].startswith("/"):
                    path = fields[5]
                    if BLAS_NAME.search(os.path.basename(path)) and path not in paths:
                        paths.append(path)
    except OSError:
        return []
    return sorted(paths, key=lambda p: 0 if "openblas" in os.path.basename(p) else 1)


def torch_blas():
    """{"blas_library", "blas_core", "blas_config"} of the BLAS torch has loaded in this process."""
    import torch

    a = torch.ones(64, 64)
    (a @ a).sum().item()
    paths = mapped_blas_libraries()
    for path in paths:
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
        except OSError:
            continue
        try:
            lib.openblas_get_corename.restype = ctypes.c_char_p
            core = lib.openblas_get_corename().decode()
        except AttributeError:
            continue
        config = None
        try:
            lib.openblas_get_config.restype = ctypes.c_char_p
            config = lib.openblas_get_config().decode().strip()
        except AttributeError:
            pass
        return {"blas_library": os.path.realpath(path), "blas_core": core, "blas_config": config}
    return {"blas_library": os.path.realpath(paths[0]) if paths else None, "blas_core": None, "blas_config": None}


if __name__ == "__main__":
    import json

    print(json.dumps(torch_blas()))
