#!/usr/bin/env python3
"""PyTorch peer of bench/mlp_forward_bench: the same MLP forward, fp32.

Usage: mlp_forward_peer.py B IN HIDDEN OUT  -> prints "torch_ms <median ms>".
Run it through bench/mlp_forward_peer.sh, which sets the peer up at its best.
"""
import os
import sys
import time

import torch

B, I, H, O = (int(v) for v in sys.argv[1:5])
torch.set_num_threads(os.cpu_count() or 1)
torch.manual_seed(0)
x, w1, b1 = torch.randn(B, I), torch.randn(I, H), torch.randn(H)
w2, b2 = torch.randn(H, O), torch.randn(O)


def mlp():
    # gelu(approximate="tanh") is the same formula as nova::gelu's default.
    return torch.nn.functional.gelu(x @ w1 + b1, approximate="tanh") @ w2 + b2


with torch.inference_mode():
    for _ in range(3):
        mlp()
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        mlp()
        times.append(time.perf_counter() - t0)
times.sort()
print(f"torch_ms {times[len(times) // 2] * 1e3:.4f} threads {torch.get_num_threads()} "
      f"version {torch.__version__}")
