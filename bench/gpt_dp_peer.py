#!/usr/bin/env python3
"""PyTorch DDP peer of bench/gpt_dp_step: the same GPT (gpt_step_peer.py),
data-parallel over processes with the gloo backend.

Run one process per rank with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set
(as torchrun does): gpt_dp_peer.py small|medium [steps]. WORLD_SIZE=1 runs
without DDP. The global batch (small 16, medium 8) is split over the ranks;
each rank uses cores / ranks threads; DDP's own bucketing (bucket_cap_mb
$NOVA_BENCH_BUCKET_MB, default 25, and its 1 MiB first bucket). Rank 0
prints "RESULT torch ranks=N tokens_per_s=..." and what it loaded.
"""
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_info  # noqa: E402
from gpt_step_peer import GPT  # noqa: E402


def main():
    medium = len(sys.argv) > 1 and sys.argv[1] == "medium"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    vocab, context, d, layers, heads, batch = (256, 256, 512, 8, 8, 8) if medium else (256, 128, 256, 4, 4, 16)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    torch.manual_seed(0)
    model = GPT(vocab, context, d, layers, heads)
    forward = model
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
        bucket = float(os.environ.get("NOVA_BENCH_BUCKET_MB", 25))
        forward = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                            fused=True)
    B = batch // world
    g = torch.Generator().manual_seed(7 + rank)
    x = torch.randint(0, vocab, (B, context), generator=g)
    y = torch.randint(0, vocab, (B, context), generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = forward(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for _ in range(2):
        step()
    if world > 1:
        dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    secs = (time.perf_counter() - t0) / steps
    if rank == 0:
        print(f"peer: {peer_info.torch_loaded(torch)}, {'DDP gloo' if world > 1 else 'one process'}, "
              f"AdamW fused", flush=True)
        print(f"torch {'medium' if medium else 'small'}, {world} rank{'s' if world > 1 else ''}, {B} sequences each, "
              f"{torch.get_num_threads()} threads each: step {secs:.3f} s, {batch * context / secs:.0f} tokens/s")
        print(f"RESULT torch ranks={world} tokens_per_s={batch * context / secs:.1f}")
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
