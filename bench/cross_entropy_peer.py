#!/usr/bin/env python3
"""PyTorch's cross-entropy loss and its gradient with respect to the logits
(F.cross_entropy, mean over tokens, then backward), f32, on the CPU: the
peer of build/bench/cross_entropy_bench on the same cases.

Usage: cross_entropy_peer.py [tokens vocab ...]. Prints one line per case:
"RESULT torch <tokens> <vocab> <ms>" (median of 20 runs after 3 warm-ups),
and what it loaded.
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

from peer_info import torch_loaded


def main():
    torch.set_num_threads(os.cpu_count() or 1)  # the machine's cores, as Nova takes them
    args = [int(a) for a in sys.argv[1:]]
    cases = list(zip(args[0::2], args[1::2])) or [(2048, 256), (2048, 8192), (512, 50257)]
    print(f"# {torch_loaded(torch)}")
    for n, v in cases:
        torch.manual_seed(1)
        z = torch.randn(n, v, dtype=torch.float32, requires_grad=True)
        y = (torch.arange(n) * 7919 + 13) % v

        def step():
            z.grad = None
            F.cross_entropy(z, y).backward()

        for _ in range(3):
            step()
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        times.sort()
        print(f"RESULT torch {n} {v} {times[len(times) // 2] * 1e3:.3f}", flush=True)


if __name__ == "__main__":
    main()
