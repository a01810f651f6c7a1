#!/usr/bin/env python3
"""Nova's generated GPU matmul kernels against cuBLAS, on a real GPU.

Reads artifacts/manifest.tsv (written by nova-gpu-kernels), loads each PTX
through the CUDA driver (ctypes; the module JIT-assembles it for the GPU),
launches it on PyTorch's stream with PyTorch's buffers (a TMA + wgmma
kernel takes A and B as tensor maps, which this script encodes with
cuTensorMapEncodeTiled as the manifest says and copies to device memory),
and:
  - checks it against a float64 product of the same inputs: the error
    relative to sum_k |a_ik b_kj| must be at most 2 (k 2^-24 + 2^-9 for tf32;
    3k 2^-24 + 5 2^-22 for 3xtf32, f32 operands at about f32's accuracy);
  - times it and torch.matmul (cuBLAS; TF32 allowed for tf32 cases, not for
    3xtf32 ones, whose peer is cuBLAS's f32 product; bf16/f16
    products return bf16/f16 there, f32 from Nova but in the `_bf16out`
    rows (manifest column 17), whose kernels round C to bf16 as cuBLAS
    does) with CUDA events, best of
    the median of 3 groups, and prints TFLOP/s and the ratio.
Probes (`_probeshared`, `_probemma`: the mma.sync kernel without its
global loads, or without any loads; nova-gpu-kernels' MmaSyncProbe) do not
compute A x B: their rows say "probe" where the others say whether the
error is within bound, and their time bounds what the kernel can reach.
The kernel is loaded from its cubin (ptxas on the preparing machine) where
prepare.sh made one and the driver takes it, else from its PTX.

The cases run in a child process that the parent watches: a kernel that
hangs (a wait that never completes) or faults (which poisons the CUDA
context) costs its own row, "HUNG" or "FAILED", and a fresh child goes on
with the next case, so one broken kernel cannot take the rest of the table
or the device's minutes with it.
"""
import ctypes
import os
import re
import select
import statistics
import subprocess
import sys
import tempfile
import time

torch = None  # imported by the child only: the supervising parent needs no PyTorch

# NOVA_CHECK_ONLY=<regex>: only the kernels whose names it matches
# (re.search), e.g. a short run of the targets (check.sh's header).
ONLY = os.environ.get("NOVA_CHECK_ONLY")


def selected(name):
    return not ONLY or re.search(ONLY, name) is not None


# Seconds a case may take (the first one also starts CUDA and PyTorch).
CASE_TIMEOUT_S = float(os.environ.get("NOVA_CASE_TIMEOUT_S", "60"))
START_TIMEOUT_S = 180.0
HEADER = ("kernel", "max_rel_err", "bound", "ok", "nova_ms", "cublas_ms", "nova_TFLOPs", "cublas_TFLOPs",
          "nova/cublas", "config")


def check(result, what):
    if result != 0:
        raise RuntimeError(f"{what} failed: CUDA error {result}")


# CUtensorMapDataType and CUtensorMapSwizzle (cuda.h); tf32 operands are f32 in memory.
TMA_DATA_TYPE = {"f16": 6, "tf32": 7, "bf16": 9, "3xtf32": 7}
TMA_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}


def tensor_map(cuda, spec, tensor, typ, dev):
    """Encodes one manifest map ("operand;dims;strides;box;swizzle") over
    `tensor`'s memory; returns the 128-byte map in device memory."""
    _, dims, strides, box, swizzle = spec.split(";")
    dims = [int(x) for x in dims.split(",")]
    strides = [int(x) for x in strides.split(",")] if strides else []
    box = [int(x) for x in box.split(",")]
    rank = len(dims)
    raw = (ctypes.c_uint8 * 192)()  # a CUtensorMap is 128 bytes, 64-byte aligned
    offset = (-ctypes.addressof(raw)) % 64
    host = ctypes.c_void_p(ctypes.addressof(raw) + offset)
    fn = cuda.cuTensorMapEncodeTiled
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                   ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                   ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                   ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    check(fn(host, TMA_DATA_TYPE[typ], rank, ctypes.c_void_p(tensor.data_ptr()),
             (ctypes.c_uint64 * rank)(*dims), (ctypes.c_uint64 * max(1, rank - 1))(*(strides or [0])),
             (ctypes.c_uint32 * rank)(*box), (ctypes.c_uint32 * rank)(*([1] * rank)),
             0, TMA_SWIZZLE[int(swizzle)], 2, 0),  # no interleave, L2 promotion 128B, zero fill
          "cuTensorMapEncodeTiled")
    data = bytes(raw)[offset:offset + 128]
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).to(dev)


class LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute: an id, padding, a 64-byte value
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint32 * 16)]


class LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(LaunchAttribute)), ("numAttrs", ctypes.c_uint)]


CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4


def timed(fn, iters):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(3):
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / iters)
    return statistics.median(samples) / 1e3  # seconds


def load_module(cuda, art, ptx):
    """The case's cubin where there is one and the driver takes it, else its PTX; and which."""
    module = ctypes.c_void_p()
    cubin = os.path.join(art, ptx[:-len(".ptx")] + ".cubin")
    if os.path.exists(cubin) and cuda.cuModuleLoadData(ctypes.byref(module), open(cubin, "rb").read()) == 0:
        return module, "cubin"
    data = open(os.path.join(art, ptx), "rb").read() + b"\0"
    check(cuda.cuModuleLoadData(ctypes.byref(module), data), f"cuModuleLoadData({ptx})")
    return module, "ptx"


def run_cases(art, first):
    """The child: the manifest's cases from `first` on, each announced
    ("START i") and reported ("ROW i ...") on stdout; an error ends it."""
    global torch
    import torch
    torch.manual_seed(int(os.environ.get("NOVA_TEST_SEED", "20261201")) + first)
    dev = torch.device("cuda")
    torch.zeros(1, device=dev)  # the primary context, current on this thread
    cuda = ctypes.CDLL("libcuda.so.1")
    check(cuda.cuInit(0), "cuInit")
    if first == 0:
        print(f"# {torch.cuda.get_device_name()} | torch {torch.__version__} | CUDA {torch.version.cuda} | "
              f"seed {os.environ.get('NOVA_TEST_SEED', '20261201')} | at most {CASE_TIMEOUT_S:.0f} s a case",
              flush=True)
    for i, line in enumerate(open(os.path.join(art, "manifest.tsv")).read().splitlines()):
        if i < first or not selected(line.split("\t")[0]):
            continue
        print(f"START\t{i}", flush=True)
        f = line.split("\t")
        name, ptx, typ, layout = f[0], f[1], f[2], f[3]
        m, n, k, gx, gy, gz, bx, smem = (int(x) for x in f[4:12])
        config = f[12]
        tma = f[13] if len(f) > 13 else "-"
        parts = int(f[14]) if len(f) > 14 else 1  # split-K: C is the parts' partial products
        cluster = int(f[15]) if len(f) > 15 else 1  # CTAs a cluster along x (TMA multicast)
        out = f[16] if len(f) > 16 else "f32"  # C's element type (bf16: rounded in the kernel's epilogue)
        func = ctypes.c_void_p()
        module, source = load_module(cuda, art, ptx)
        check(cuda.cuModuleGetFunction(ctypes.byref(func), module, name.encode()), "cuModuleGetFunction")
        # The registers a thread is launched with (CU_FUNC_ATTRIBUTE_NUM_REGS = 4): a kernel with
        # setmaxnreg must have all it may (168 at 384 threads), or its consumers' inc would hang.
        regs = ctypes.c_int(0)
        if cuda.cuFuncGetAttribute(ctypes.byref(regs), 4, func) == 0:
            source += f", {regs.value} registers"
        # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
        check(cuda.cuFuncSetAttribute(func, 8, smem), "cuFuncSetAttribute(dynamic shared memory)")
        dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "tf32": torch.float32, "3xtf32": torch.float32}[typ]
        a_stored = torch.randn((k, m) if layout[0] == "T" else (m, k), device=dev).to(dtype)
        b_stored = torch.randn((n, k) if layout[1] == "T" else (k, n), device=dev).to(dtype)
        a = a_stored.t() if layout[0] == "T" else a_stored
        b = b_stored.t() if layout[1] == "T" else b_stored
        partials = torch.zeros((parts, m, n), device=dev, dtype=torch.bfloat16 if out == "bf16" else torch.float32)
        c = partials[0] if parts == 1 else torch.zeros((m, n), device=dev, dtype=torch.float32)
        operands = [a_stored, b_stored]
        if tma != "-":
            # The kernel reads A and B through tensor maps passed in their place.
            operands = [tensor_map(cuda, spec, (a_stored, b_stored)[int(spec.split(";")[0])], typ, dev)
                        for spec in tma.split("|")]
        ptrs = [ctypes.c_uint64(t.data_ptr()) for t in (*operands, partials)]
        params = (ctypes.c_void_p * 3)(*[ctypes.cast(ctypes.byref(p), ctypes.c_void_p) for p in ptrs])
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

        # A kernel of clusters is launched with the cluster attribute (MLIR 19
        # puts no .reqnctapercluster in the PTX).
        attribute = LaunchAttribute(id=CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
        attribute.value[0], attribute.value[1], attribute.value[2] = cluster, 1, 1
        launch = LaunchConfig(gx, gy, gz, bx, 1, 1, smem, stream, ctypes.pointer(attribute), 1)
        if cluster > 1:
            # How many clusters the device holds at once: fewer than the
            # kernel's (persistent) ones and the rest wait for a second round.
            resident = ctypes.c_int(0)
            held = ("?" if cuda.cuOccupancyMaxActiveClusters(ctypes.byref(resident), func, ctypes.byref(launch)) != 0
                    else str(resident.value))
            source += f", clusters of {cluster} ({gx // cluster} launched, {held} resident at most)"

        def nova():
            if cluster > 1:
                check(cuda.cuLaunchKernelEx(ctypes.byref(launch), func, params, None), "cuLaunchKernelEx")
            else:
                check(cuda.cuLaunchKernel(func, gx, gy, gz, bx, 1, 1, smem, stream, params, None), "cuLaunchKernel")
            if parts > 1:  # the parts summed in order, as a step's sum kernel does (timed with the kernel)
                torch.sum(partials, 0, out=c)

        nova()
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        scale = a.double().abs() @ b.double().abs()
        err = ((c.double() - ref).abs() / scale.clamp_min(1e-30)).max().item()
        if typ == "3xtf32":
            bound = 2 * (3 * k * 2.0**-24 + 5 * 2.0**-22)
        else:
            bound = 2 * (k * 2.0**-24 + (2.0**-9 if typ == "tf32" else 0.0))
        if out == "bf16":
            bound += 2 * 2.0**-9  # C rounded once more, by at most 2^-9 of it
        torch.backends.cuda.matmul.allow_tf32 = typ == "tf32"
        peer = lambda: torch.matmul(a, b)
        flops = 2.0 * m * n * k
        iters = max(3, min(50, int(0.05 / max(flops / 300e12, 1e-6))))
        for fn in (nova, peer):
            fn()
        t_nova, t_peer = timed(nova, iters), timed(peer, iters)
        ok = "probe" if "_probe" in name else "yes" if err <= bound else "NO"
        row = (name, f"{err:.3e}", f"{bound:.3e}", ok, f"{t_nova * 1e3:.3f}",
               f"{t_peer * 1e3:.3f}", f"{flops / t_nova / 1e12:.1f}", f"{flops / t_peer / 1e12:.1f}",
               f"{t_peer / t_nova:.3f}", f"{config} ({source})")
        print("ROW\t" + str(i) + "\t" + "\t".join(row), flush=True)
        check(cuda.cuModuleUnload(module), "cuModuleUnload")
    return 0


def supervise(names, report, child_command, case_timeout=CASE_TIMEOUT_S, start_timeout=START_TIMEOUT_S):
    """Runs the cases in children (child_command(first): the command running
    them from case `first` on) until every case is reported; `report(i, row)`
    gets each child's row, or a HUNG / FAILED string for the case a child
    hung or died on."""

    def last_error(err):
        err.seek(0)
        lines = err.read().strip().splitlines()
        return "FAILED: " + (lines[-1][-160:] if lines else "no message")

    first = 0
    while first < len(names):
        with tempfile.TemporaryFile(mode="w+") as err:
            child = subprocess.Popen(child_command(first), stdout=subprocess.PIPE, stderr=err)
            fd = child.stdout.fileno()
            pending = b""  # read, not yet a whole line (select sees the pipe, not Python's buffers)
            current, deadline, ended = first, time.monotonic() + start_timeout, False
            while not ended:
                ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:  # the case (or the start) took too long: a hang
                    child.kill()
                    child.wait()
                    if current is not None:
                        report(current, f"HUNG (> {case_timeout:.0f} s)")
                        first = current + 1
                    break
                chunk = os.read(fd, 65536)
                ended = not chunk
                *lines, pending = (pending + chunk).split(b"\n")
                for raw in lines:
                    f = raw.decode(errors="replace").split("\t")
                    if f[0] == "START":
                        current, deadline = int(f[1]), time.monotonic() + case_timeout
                    elif f[0] == "ROW":
                        # Reported: a failure before the next START (its module's
                        # unload, say) costs no case; the next child starts after it.
                        report(int(f[1]), tuple(f[2:]))
                        current, first, deadline = None, int(f[1]) + 1, time.monotonic() + case_timeout
                    else:
                        print(raw.decode(errors="replace"), flush=True)
                if ended:  # the child ended: done, or an error on its case
                    if child.wait() == 0:
                        first = len(names)
                    elif current is not None:
                        report(current, last_error(err))
                        first = current + 1
            child.stdout.close()

def main():
    art = sys.argv[1] if len(sys.argv) > 1 else "artifacts"
    if len(sys.argv) > 3 and sys.argv[2] == "--from":
        return run_cases(art, int(sys.argv[3]))
    names = [line.split("\t")[0] for line in open(os.path.join(art, "manifest.tsv")).read().splitlines()]
    rows = [HEADER]
    print("\t".join(HEADER), flush=True)
    failures = 0

    def report(i, result):
        nonlocal failures
        row = result if isinstance(result, tuple) else (names[i], "-", "-", result) + ("-",) * 6
        failures += 0 if row[3] in ("yes", "probe") else 1
        rows.append(row)
        print("\t".join(row), flush=True)

    supervise(names, report, lambda first: [sys.executable, os.path.abspath(__file__), art, "--from", str(first)])
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "device_check.tsv"), "w") as fh:
            fh.write("\n".join("\t".join(r) for r in rows) + "\n")
    print(f"# {len(rows) - 1} kernels{f' (NOVA_CHECK_ONLY={ONLY})' if ONLY else ''}, {failures} outside their "
          f"error bound, hung or failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
