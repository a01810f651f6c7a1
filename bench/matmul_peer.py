#!/usr/bin/env python3
"""BLAS peer of bench/matmul_bench: the same shapes through torch.matmul
or numpy.matmul, transposed operands passed as transposed views (the BLAS
reads them with its trans flag, no copy), into a preallocated result.

Usage: matmul_peer.py torch|numpy shape... (shapes as matmul_bench takes them).
Prints what it loaded, then "RESULT <label> shape=... gflops=..." per shape.
With NOVA_MATMUL_PRECISION=bf16 (as matmul_bench takes it) torch multiplies
bfloat16 operands made before the timing into a bfloat16 result (its best:
oneDNN's bf16 GEMM where the CPU has bf16 instructions; Nova's timing
includes rounding its float32 operands and writes float32), and with oneDNN
prints, per shape, the implementation it ran ("onednn_verbose,...": its own
verbose line); numpy has no bf16 and says so.
"""
import os
import contextlib
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_info  # noqa: E402


def parse(s):
    m = re.fullmatch(r"(?:(\d+)bx)?(\d+)x(\d+)x(\d+)(?::(ta|tb))?", s)
    if not m:
        sys.exit(f"matmul_peer: cannot read shape {s!r}")
    b, M, N, K, t = m.groups()
    return (int(b) if b else 0), int(M), int(N), int(K), t or ""


def median_seconds(f):
    for _ in range(3):
        f()
    times, total = [], 0.0
    while total < 0.3 or len(times) < 5:
        t0 = time.perf_counter()
        f()
        dt = time.perf_counter() - t0
        times.append(dt)
        total += dt
    return sorted(times)[len(times) // 2]


def main():
    lib, shapes = sys.argv[1], sys.argv[2:]
    bf16 = os.environ.get("NOVA_MATMUL_PRECISION", "fp32") == "bf16"
    verbose = lambda: contextlib.nullcontext()
    if lib == "torch":
        import torch
        torch.set_num_threads(os.cpu_count() or 1)
        print(f"peer: {peer_info.torch_loaded(torch)}", flush=True)
        dtype = torch.bfloat16 if bf16 else torch.float32
        rand = lambda *d: torch.randn(*d, dtype=torch.float32).to(dtype)
        tr = lambda x: x.transpose(-2, -1)
        mm = torch.matmul
        empty = lambda *d: torch.empty(*d, dtype=dtype)
        label = f"torch{torch.__version__.split('.')[0]}"
        if bf16 and torch.backends.mkldnn.is_available():
            verbose = lambda: torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON)
    elif bf16:
        print("peer: numpy has no bfloat16; nothing measured", flush=True)
        return
    else:
        import numpy as np
        rng = np.random.default_rng(0)
        rand = lambda *d: rng.standard_normal(d, dtype=np.float32)
        tr = lambda x: np.swapaxes(x, -2, -1)
        mm = np.matmul
        empty = lambda *d: np.empty(d, dtype=np.float32)
        print(f"peer: {peer_info.numpy_loaded(np)}", flush=True)
        label = "numpy"
    for s in shapes:
        b, M, N, K, t = parse(s)
        lead = (b,) if b else ()
        a = tr(rand(*lead, K, M)) if t == "ta" else rand(*lead, M, K)
        w = tr(rand(*lead, N, K)) if t == "tb" else rand(*lead, K, N)
        c = empty(*lead, M, N)  # out=: no allocation in the timed call
        with verbose():
            mm(a, w, out=c)
        sys.stdout.flush()
        secs = median_seconds(lambda: mm(a, w, out=c))
        gflops = 2.0 * max(b, 1) * M * N * K / secs * 1e-9
        print(f"RESULT {label} shape={s} gflops={gflops:.2f}", flush=True)


main()
