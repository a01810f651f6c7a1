#!/usr/bin/env python3
"""PyTorch peer of the device check's MLP step (bench/device/steps.hpp).

Usage: mlp_step_peer.py [steps] [eager|compile] [cpu|cuda]. The same model
and optimizer as Nova's `mlp_*` steps: 1024 -> 4096 (tanh-GELU) -> 1024
classes with biases, cross-entropy over a batch of 1024 samples,
AdamW(lr 1e-3, 0.9, 0.95, eps 1e-8, wd 0.1), grad clip 1.0; fp32, or
autocast bf16 with NOVA_MATMUL_PRECISION=bf16 (tf32: allow_tf32). Prints
what this PyTorch runs on, then "RESULT torch tokens_per_s=... step_mib=...
peak_mib=..." (a sample counts as a token, as run_steps counts it). On cuda
the memory is the GPU's peak allocated over the timed steps, else RSS.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_info  # noqa: E402

IN, HIDDEN, OUT, BATCH = 1024, 4096, 1024, 1024


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(IN, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, OUT)

    def forward(self, x, y):
        return F.cross_entropy(self.fc2(F.gelu(self.fc1(x), approximate="tanh")), y)


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    mode = sys.argv[2] if len(sys.argv) > 2 else "eager"
    device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
    cuda = device == "cuda"
    torch.set_num_threads(os.cpu_count() or 1)
    torch.manual_seed(0)
    model = MLP().to(device)
    forward = torch.compile(model) if mode == "compile" else model
    x = torch.rand(BATCH, IN, device=device) * 2 - 1
    y = torch.randint(0, OUT, (BATCH,), device=device)
    step, what = peer_info.train_step(torch, model, forward, x, y, cuda)
    print(f"peer: {peer_info.torch_loaded(torch)}, {mode}, {what}"
          f"{' on ' + torch.cuda.get_device_name() if cuda else ''}", flush=True)
    secs, peak, base = peer_info.time_steps(torch, step, steps, 2 if mode == "eager" else 3, cuda)
    print(f"torch {mode} mlp: step {secs * 1e3:.3f} ms, {BATCH / secs:.0f} samples/s, torch {torch.__version__}")
    print(f"RESULT torch tokens_per_s={BATCH / secs:.1f} step_mib={peak - base:.1f} peak_mib={peak:.1f}")


if __name__ == "__main__":
    main()
