"""What a Python peer computes with, as it reports it, and how it times its
steps: shared by the bench peers."""
import ctypes
import os
import time


def openblas_core():
    """", OpenBLAS <config> core <name> (<path>)" for the libopenblas this process mapped, else ""."""
    with open("/proc/self/maps") as f:
        for line in f:
            if "libopenblas" in line:
                path = line.split()[-1]
                lib = ctypes.CDLL(path)
                lib.openblas_get_corename.restype = ctypes.c_char_p
                lib.openblas_get_config.restype = ctypes.c_char_p
                return f", OpenBLAS {lib.openblas_get_config().decode()} core {lib.openblas_get_corename().decode()} ({path})"
    return ""


def allocator():
    """", allocator <name> (<path>)" for a malloc this process mapped (tcmalloc,
    jemalloc, mimalloc: preloaded), else ", allocator glibc malloc"."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) > 5 else ""
            for name in ("tcmalloc", "jemalloc", "mimalloc"):
                if name in path:
                    return f", allocator {name} ({path})"
    return ", allocator glibc malloc"


def mkl_vendor():
    """", MKL told the CPU is Intel's (<path>)" where peer_env.sh preloaded its
    answer to MKL's vendor check (AMD CPUs), else ""."""
    with open("/proc/self/maps") as f:
        for line in f:
            if "mkl-intel-cpu" in line:
                return f", MKL told the CPU is Intel's ({line.split()[-1]})"
    return ""


def torch_loaded(torch):
    config = torch.__config__.show()
    blas = "MKL" if "BLAS_INFO=mkl" in config else "OpenBLAS" if "open" in config.lower() else "?"
    capability = next((l.split(":", 1)[1].strip() for l in config.splitlines() if "CPU capability" in l), "?")
    core = openblas_core() if blas == "OpenBLAS" else mkl_vendor()
    return f"torch {torch.__version__}, BLAS {blas}, CPU kernels {capability}, {torch.get_num_threads()} threads{core}{allocator()}"


def numpy_loaded(np):
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            name = line.split()[-1] if len(line.split()) > 5 else ""
            for key in ("openblas", "mkl_rt", "libblas", "blis"):
                if key in name:
                    libs.add(name)
    return f"numpy {np.__version__}, BLAS {', '.join(sorted(libs)) or '?'}{openblas_core()}"


def rss_mib(field="VmRSS"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return -1.0


def time_steps(torch, step, steps, warmup, cuda):
    """`warmup` calls of `step` (compiles happen there), then `steps` timed:
    (seconds a step, peak MiB, MiB after initialisation). The memory: on
    cuda the GPU's allocated bytes (peak over the timed steps, and before
    them), else the process's peak RSS and its RSS before the warm-up."""
    base = rss_mib()
    for _ in range(warmup):
        step()
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
    peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else rss_mib("VmHWM")
    return secs, peak, base


def train_step(torch, model, forward, x, y, cuda):
    """Nova's train step in PyTorch: AdamW(lr 1e-3, 0.9, 0.95, eps 1e-8, wd
    0.1), fused where this torch has it, gradient clipping 1.0, and the
    matmul precision NOVA_MATMUL_PRECISION asks for: bf16 (Nova's bf16
    matmuls: both operands rounded to bf16, float32 sums) as the peer's own
    bf16 mode, autocast (matmuls and linear layers in bf16: on the CPU
    through oneDNN, AMX where the CPU has it; on a GPU its tensor cores; the
    rest float32); tf32 (Nova's tensor cores read float32 operands as tf32;
    a CPU runs float32) on a GPU as allow_tf32. `forward(x, y)` gives the
    loss. Returns (step, what it runs: "AdamW fused, autocast bf16, ...")."""
    adamw = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    try:  # the fused update (one kernel for all parameters) where this torch has it
        opt = torch.optim.AdamW(model.parameters(), fused=True, **adamw)
        fused = True
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(model.parameters(), **adamw)
        fused = False
    precision = os.environ.get("NOVA_MATMUL_PRECISION", "fp32")
    bf16 = precision == "bf16"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = forward(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    what = (f"AdamW {'fused' if fused else 'for-each'}{', autocast bf16' if bf16 else ''}"
            f"{', cuda tf32' if cuda and torch.backends.cuda.matmul.allow_tf32 else ''}")
    return step, what
