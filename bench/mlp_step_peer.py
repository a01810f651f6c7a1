#!/usr/bin/env python3
"""PyTorch peer of the device check's MLP step (bench/device/steps.hpp).

Usage: mlp_step_peer.py [steps] [eager|compile] [cpu|cuda]. The same model
and optimizer as Nova's `mlp_*` steps: 1024 -> 4096 (tanh-GELU) -> 1024
classes with biases, cross-entropy over a batch of 1024 samples,
AdamW(lr 1e-3, 0.9, 0.95, eps 1e-8, wd 0.1), grad clip 1.0; fp32, or
autocast bf16 with NOVA_MATMUL_PRECISION=bf16 (tf32: allow_tf32). Prints
what this PyTorch runs on, then "RESULT torch tokens_per_s=... step_mib=...
peak_mib=..." (a sample counts as a token, as run_steps counts it). On cuda
the memory is the GPU's peak allocated over the timed steps.
"""
import os
import sys
import time

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
    adamw = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    try:
        opt = torch.optim.AdamW(model.parameters(), fused=True, **adamw)
        fused = True
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(model.parameters(), **adamw)
        fused = False
    forward = torch.compile(model) if mode == "compile" else model
    x = torch.rand(BATCH, IN, device=device) * 2 - 1
    y = torch.randint(0, OUT, (BATCH,), device=device)
    precision = os.environ.get("NOVA_MATMUL_PRECISION", "fp32")
    bf16 = precision == "bf16"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = forward(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    print(f"peer: {peer_info.torch_loaded(torch)}, {mode}, AdamW {'fused' if fused else 'for-each'}"
          f"{', autocast bf16' if bf16 else ''}{' on ' + torch.cuda.get_device_name() if cuda else ''}", flush=True)
    for _ in range(2 if mode == "eager" else 3):
        step()
    base = 0.0
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated() / 2**20
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    if cuda:
        torch.cuda.synchronize()
    secs = (time.perf_counter() - t0) / steps
    peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else float("nan")
    print(f"torch {mode} mlp: step {secs * 1e3:.3f} ms, {BATCH / secs:.0f} samples/s, torch {torch.__version__}")
    print(f"RESULT torch tokens_per_s={BATCH / secs:.1f} step_mib={peak - base:.1f} peak_mib={peak:.1f}")


if __name__ == "__main__":
    main()
