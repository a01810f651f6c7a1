#!/usr/bin/env python3
"""Nova's GPT training steps on the GPU against PyTorch eager on the same GPU.

Usage: steps_check.py ARTIFACTS [N]. Runs ARTIFACTS/bin/run_steps (the
runtime only) on each step of ARTIFACTS/steps (make_steps compiled them), in
a process of its own with a timeout, which checks one step against the CPU
and times N more; then bench/gpt_step_peer.py on cuda for each model and
precision (fp32: float32 matmuls; bf16: autocast bf16, as Nova's bf16 rounds
both operands; tf32: allow_tf32), AdamW fused, eager, and with
NOVA_DEVICE_COMPILE_PEER=1 also torch.compile (off by default: its compiles
take minutes of the device's few). Prints one table: tokens/s each side and
Nova / PyTorch, the step's time copying its parameters and optimizer state
every call over its time keeping them on the device, and device memory:
Nova's (its arena and its inputs' and outputs' buffers: everything it
allocates) against PyTorch eager's peak allocated memory over its timed
steps (parameters, gradients, optimizer state, activations); writes it to
$OUT/device_steps.tsv when $OUT is set. Then,
for each step that ran, where its time goes: run_steps again with
NOVA_PROFILE (each kernel timed between two events, no CUDA graph: the
times add up to more than a graph replay's step), its time by kernel class
and its slowest kernels with GFLOP/s and GB/s; written to
$OUT/device_profile.txt; with NOVA_DEVICE_PEER_PROFILE=1 also the eager
peer's GPT steps by class (torch.profiler's CUDA time of its aten ops).
Last, the data-parallel step's timeline (NOVA_TIMELINE) as
$OUT/<step>_timeline.json.
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# Seconds one step's check (load, one checked step, N timed) and one peer may take.
STEP_TIMEOUT_S = float(os.environ.get("NOVA_STEP_TIMEOUT_S", "120"))
PEER_TIMEOUT_S = 300.0
# torch.compile as a second peer (its compiles take minutes).
COMPILE_PEER = os.environ.get("NOVA_DEVICE_COMPILE_PEER") == "1"
# Steps each profiled run times, and the kernels its report lists.
PROFILE_STEPS = os.environ.get("NOVA_PROFILE_STEPS", "5")
PROFILE_TOP = os.environ.get("NOVA_PROFILE_TOP", "30")
# The eager peer's step by class too (torch.profiler's CUDA time of its aten
# ops, NOVA_PROFILE's classes): off by default, its profiled runs take
# device time.
PEER_PROFILE = os.environ.get("NOVA_DEVICE_PEER_PROFILE") == "1"


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


def run(command, env, timeout):
    """(stdout, stderr, what went wrong or None): a command that hangs is
    killed at `timeout` seconds, so one broken step costs only its row."""
    try:
        r = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        return r.stdout, r.stderr, None if r.returncode in (0, 1) else f"exit {r.returncode}"
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return out, err, f"HUNG (> {timeout:.0f} s)"


# The peer's profiles (PEER_PROFILE), for device_profile.txt.
PEER_PROFILES = []


def peer(cache, size, precision, mode, n):
    """PyTorch's tokens/s for the GPT step of `size` (or the MLP step, size
    "mlp") at `precision` in `mode` (eager or compile) on cuda:
    bench/gpt_step_peer.py or bench/mlp_step_peer.py, run once a key."""
    key = (size, precision, mode)
    if key not in cache:
        env = dict(os.environ, NOVA_MATMUL_PRECISION=precision)
        if PEER_PROFILE and mode == "eager" and size != "mlp":
            env["NOVA_PROFILE"] = "1"
        command = ([os.path.join(HERE, "..", "mlp_step_peer.py"), n, mode, "cuda"] if size == "mlp" else
                   [os.path.join(HERE, "..", "gpt_step_peer.py"), size, n, mode, "cuda"])
        out, err, trouble = run([sys.executable] + command, env, PEER_TIMEOUT_S)
        print(out + err + (f"# peer {size} {precision} {mode}: {trouble}\n" if trouble else ""), flush=True)
        m = re.search(r"RESULT torch tokens_per_s=(\S+) step_mib=(\S+) peak_mib=(\S+)", out)
        cache[key] = (float(m.group(1)), float(m.group(3))) if m else (float("nan"), float("nan"))
        profiled = [line for line in out.splitlines() if line.startswith("peer profile")]
        if profiled:
            PEER_PROFILES.append(f"# torch {mode} {size} {precision}: by class\n" + "\n".join(profiled))
    return cache[key]


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
    # NOVA_CHECK_ONLY=<regex>: only the steps whose names it matches (as matmul_check.py's kernels).
    only = os.environ.get("NOVA_CHECK_ONLY")
    names = sorted(f[:-len(".nexe")] for f in os.listdir(os.path.join(art, "steps"))
                   if f.endswith(".nexe") and (not only or re.search(only, f[:-len(".nexe")])))
    rows, peers, failures, hung = [], {}, 0, 0
    for name in names:
        # Two steps in a row that hang say the kernels they share hang (each
        # would take the whole timeout of the device's few minutes): the
        # rest are skipped, each a row saying so.
        if hung >= 2:
            rows.append((name, "SKIPPED (two steps before it hung)") + (float("nan"),) * 9)
            print(f"# {name}: skipped: the two steps before it hung", flush=True)
            failures += 1
            continue
        # Each step in its own process: a step that hangs or faults (which
        # poisons the CUDA context) costs its own row.
        out, err, trouble = run([os.path.join(art, "bin", "run_steps"), os.path.join(art, "steps"), n, name], env,
                                STEP_TIMEOUT_S)
        print(out + err, flush=True)
        m = re.search(r"^RESULT nova (\S+) tokens_per_s=(\S+) ok=(\d) device_mib=(\S+)", out, re.M)
        if not m:
            last = (err.strip().splitlines() or ["no message"])[-1][-160:]
            rows.append((name, trouble or "FAILED") + (float("nan"),) * 9)
            print(f"# {name}: {trouble or 'FAILED'}: {last}", flush=True)
            # A kernel's fault is reported at the step's end without its
            # name, a hang not at all: once more, waiting after each launch
            # (NOVA_GPU_SYNC=<s>), so the error names the launch that
            # faulted, its kernel and grid, or stderr the one still running
            # after 5 s (the first hung step only: each costs its timeout).
            first_hang = bool(trouble) and trouble.startswith("HUNG") and hung == 0
            if "NOVA_GPU_SYNC=1" in err or first_hang:
                _, err1, trouble1 = run([os.path.join(art, "bin", "run_steps"), os.path.join(art, "steps"), "1",
                                         name], dict(env, NOVA_GPU_SYNC="5", NOVA_EXPLAIN="0"),
                                        20.0 if first_hang else STEP_TIMEOUT_S)
                named = [line[line.find("launch "):] for line in err1.splitlines()
                         if "): launch " in line or line.startswith("nova: NOVA_GPU_SYNC: launch ")]
                print(f"# {name}: with NOVA_GPU_SYNC=5: " +
                      (named[-1][:400] if named else trouble1 or (err1.strip()[-400:] or "no message")), flush=True)
            failures += 1
            hung = hung + 1 if trouble and trouble.startswith("HUNG") else 0
            continue
        hung = 0
        tokens, ok, device_mib = float(m.group(2)), m.group(3) == "1", float(m.group(4))
        # The same step copying its parameters and optimizer state every
        # call (NOVA_GPU_RESIDENT=0): its time over the resident step's.
        c = re.search(r"copying parameters and optimizer state every call: \S+ ms a step \((\S+)x the time\)", out)
        copying = float(c.group(1)) if c else float("nan")
        # And without programmatic dependent launches (NOVA_GPU_PDL=0):
        # its time over the step's (above 1: they pay).
        p = re.search(r"without programmatic dependent launches: \S+ ms a step \((\S+)x the time\)", out)
        serial = float(p.group(1)) if p else float("nan")
        failures += 0 if ok else 1
        # gpt_<size>_<precision>[_cluster|_act], dp1_<size>_<precision>, mlp_<precision>.
        parts = name.split("_")
        size, precision = ("mlp", parts[1]) if parts[0] == "mlp" else (parts[1], parts[2])
        torch_tokens, torch_peak = peer(peers, size, precision, "eager", n)
        compiled_tokens = peer(peers, size, precision, "compile", n)[0] if COMPILE_PEER else float("nan")
        rows.append((name, "ok" if ok else "MISMATCH", tokens, torch_tokens, tokens / torch_tokens, compiled_tokens,
                     tokens / compiled_tokens, copying, device_mib, torch_peak, serial))
    header = "step\tcheck\tnova tokens/s\ttorch eager tokens/s\tnova/torch"
    if COMPILE_PEER:
        header += "\ttorch.compile tokens/s\tnova/compile"
    header += ("\tcopying every call / resident time\tnova device MiB\ttorch eager peak MiB\tnova/torch memory"
               "\twithout / with programmatic launches time")
    lines = [header] + [f"{r[0]}\t{r[1]}\t{r[2]:.0f}\t{r[3]:.0f}\t{r[4]:.3f}" +
                        (f"\t{r[5]:.0f}\t{r[6]:.3f}" if COMPILE_PEER else "") +
                        f"\t{r[7]:.3f}\t{r[8]:.1f}\t{r[9]:.1f}\t{r[8] / r[9]:.3f}\t{r[10]:.3f}" for r in rows]
    print("\n".join(lines))
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "device_steps.tsv"), "w") as f:
            f.write("\n".join(lines) + "\n")
    profiles = []
    for row in rows:
        if row[1] not in ("ok", "MISMATCH"):
            continue
        out, err, trouble = run([os.path.join(art, "bin", "run_steps"), os.path.join(art, "steps"), PROFILE_STEPS,
                                 row[0]], dict(env, NOVA_PROFILE=PROFILE_TOP, NOVA_EXPLAIN="0"), STEP_TIMEOUT_S)
        report = "\n".join(line for line in err.splitlines() if line.startswith(("nova profile", "  ")))
        profiles.append(f"# {row[0]}: kernel by kernel, {PROFILE_STEPS} steps" + (f" ({trouble})" if trouble else "") +
                        "\n" + (report or err.strip()[-400:]))
    profiles += PEER_PROFILES
    print("\n".join(profiles), flush=True)
    if os.environ.get("OUT") and profiles:
        with open(os.path.join(os.environ["OUT"], "device_profile.txt"), "w") as f:
            f.write("\n".join(profiles) + "\n")
    # The data-parallel step's timeline (NOVA_TIMELINE: kernel by kernel,
    # its bucket's NCCL sums on their stream), a Chrome trace in $OUT.
    for row in rows:
        if os.environ.get("OUT") and row[0].startswith("dp") and row[1] in ("ok", "MISMATCH"):
            trace = os.path.join(os.environ["OUT"], row[0] + "_timeline.json")
            _, err, trouble = run([os.path.join(art, "bin", "run_steps"), os.path.join(art, "steps"), "1", row[0]],
                                  dict(env, NOVA_TIMELINE=trace, NOVA_EXPLAIN="0"), STEP_TIMEOUT_S)
            print(f"# {row[0]}: timeline {trace if os.path.exists(trace) else 'not written'}"
                  + (f" ({trouble})" if trouble else ""), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
