#!/usr/bin/env python3
"""Nova's GPT training steps on the GPU against PyTorch eager on the same GPU.

Usage: steps_check.py ARTIFACTS [N]. Runs ARTIFACTS/bin/run_steps (the
runtime only) on ARTIFACTS/steps (make_steps compiled them), which checks one
step against the CPU and times N more; then bench/gpt_step_peer.py on cuda
for each model, with float32 matmuls and with tf32 allowed (Nova's bf16
setting on a GPU), AdamW fused. Prints one table: tokens/s each side and
Nova / PyTorch; writes it to $OUT/device_steps.tsv when $OUT is set.
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def nccl_library():
    """NCCL for the dp1_* step: the system's, else the one PyTorch's wheels bring."""
    for candidate in ("/usr/lib/x86_64-linux-gnu/libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2",
                      "/usr/local/cuda/lib/libnccl.so.2"):
        if os.path.exists(candidate):
            return candidate
    try:
        import nvidia.nccl  # PyTorch's pip wheels
        for root in nvidia.nccl.__path__:
            path = os.path.join(root, "lib", "libnccl.so.2")
            if os.path.exists(path):
                return path
    except ImportError:
        pass
    return None


def main():
    art = sys.argv[1]
    n = sys.argv[2] if len(sys.argv) > 2 else "20"
    # NOVA_EXPLAIN: the runtime says whether each step's kernels came from
    # its cubin or from its PTX (compiled by the driver), and how long that took.
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(art, "lib") + ":" + os.environ.get("LD_LIBRARY_PATH", ""),
               NOVA_EXPLAIN="1")
    nccl = nccl_library()
    if nccl and "NOVA_NCCL_LIBRARY" not in env:
        env["NOVA_NCCL_LIBRARY"] = nccl
    print(f"# NCCL for the data-parallel step: {nccl or 'none found (the dp1 row will say so)'}", flush=True)
    run = subprocess.run([os.path.join(art, "bin", "run_steps"), os.path.join(art, "steps"), n], env=env,
                         capture_output=True, text=True)
    print(run.stdout + run.stderr, flush=True)
    nova = {}
    for m in re.finditer(r"^RESULT nova (\S+) tokens_per_s=(\S+) ok=(\d)", run.stdout, re.M):
        nova[m.group(1)] = (float(m.group(2)), m.group(3) == "1")
    rows = []
    for name, (tokens, ok) in sorted(nova.items()):
        _, size, precision = name.split("_")
        peer_env = dict(os.environ, NOVA_MATMUL_PRECISION=precision)
        peer = subprocess.run([sys.executable, os.path.join(HERE, "..", "gpt_step_peer.py"), size, n, "eager", "cuda"],
                              env=peer_env, capture_output=True, text=True)
        print(peer.stdout + peer.stderr, flush=True)
        m = re.search(r"RESULT torch tokens_per_s=(\S+) step_mib=(\S+)", peer.stdout)
        torch_tokens = float(m.group(1)) if m else float("nan")
        rows.append((name, "ok" if ok else "MISMATCH", tokens, torch_tokens, tokens / torch_tokens))
    header = "step\tcheck\tnova tokens/s\ttorch eager tokens/s\tnova/torch"
    lines = [header] + [f"{r[0]}\t{r[1]}\t{r[2]:.0f}\t{r[3]:.0f}\t{r[4]:.3f}" for r in rows]
    print("\n".join(lines))
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "device_steps.tsv"), "w") as f:
            f.write("\n".join(lines) + "\n")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
