#!/usr/bin/env python3
"""PyTorch peer of bench/gpt_step: the same GPT, equations and optimizer.

Usage: gpt_step_peer.py small|medium|wide [steps] [eager|compile] [cpu|cuda]. Prints
"RESULT torch ..." and, first, what this PyTorch actually runs on (its BLAS,
CPU kernel set, threads; for OpenBLAS the core type it chose).
Same model as nova::nn::gpt_logits: token + position embeddings, pre-LN
blocks (eps 1e-5), fused QKV [d, 3d] with bias, causal softmax attention
scaled by 1/sqrt(hd), output projection with bias, MLP d -> 4d -> d with
tanh-GELU, final LN, lm_head without bias; AdamW(0.9, 0.95, wd 0.1), grad
clip 1.0; fp32. "wide" is medium with 4 heads of 128 columns (the device
check's gpt_wide_bf16). Step memory = peak RSS over the run - RSS after
initialisation (model, optimizer and batch exist), as for Nova.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_info  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d, eps=1e-5)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d, eps=1e-5)
        self.fc = torch.nn.Linear(d, 4 * d)
        self.proj = torch.nn.Linear(4 * d, d)

    def forward(self, x, mask):
        B, T, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (t.view(B, T, self.heads, hd).transpose(1, 2) for t in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            # torch 2: its fused causal attention (flash attention on a GPU),
            # the peer's best; torch 1.13 has none.
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(hd) + mask[:T, :T]
            y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).reshape(B, T, d)
        x = x + self.out(y)
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(torch.nn.Module):
    def __init__(self, vocab, context, d, layers, heads):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, d)
        self.wpe = torch.nn.Embedding(context, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(d, eps=1e-5)
        self.lm_head = torch.nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", torch.full((context, context), float("-inf")).triu(1))

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x, self.mask)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    size = sys.argv[1] if len(sys.argv) > 1 else "small"
    if size not in ("small", "medium", "wide"):
        sys.exit(f"gpt_step_peer.py: no size {size!r} (small, medium, wide)")
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    mode = sys.argv[3] if len(sys.argv) > 3 else "eager"
    # cuda: the device check (bench/device/check.sh); step memory is then
    # the GPU's peak allocated bytes over the steps, beyond the model's.
    device = sys.argv[4] if len(sys.argv) > 4 else "cpu"
    cuda = device == "cuda"
    vocab, context, d, layers, heads, B = {"small": (256, 128, 256, 4, 4, 16), "medium": (256, 256, 512, 8, 8, 8),
                                           "wide": (256, 256, 512, 8, 4, 8)}[size]
    layers = int(os.environ.get("NOVA_BENCH_LAYERS", layers))  # bench/gpt_fits.sh
    vocab = int(os.environ.get("NOVA_BENCH_VOCAB", vocab))  # a word-piece vocabulary (gpt_step.cpp)
    torch.set_num_threads(os.cpu_count() or 1)
    torch.manual_seed(0)
    model = GPT(vocab, context, d, layers, heads).to(device)
    forward = torch.compile(model) if mode == "compile" else model
    x = torch.randint(0, vocab, (B, context), device=device)
    y = torch.randint(0, vocab, (B, context), device=device)
    step, what = peer_info.train_step(torch, model, forward, x, y, cuda)

    print(f"peer: {peer_info.torch_loaded(torch)}, {mode}, {what}"
          f"{', attention SDPA' if hasattr(F, 'scaled_dot_product_attention') else ''}"
          f"{' on ' + torch.cuda.get_device_name() if cuda else ''}", flush=True)
    secs, peak, rss_init = peer_info.time_steps(torch, step, steps, 2 if mode == "eager" else 3, cuda)
    n = sum(p.numel() for p in model.parameters())
    print(f"torch {mode} {size}: params {n / 1e6:.2f}M, step {secs:.3f} s, "
          f"{B * context / secs:.0f} tokens/s, threads {torch.get_num_threads()}, "
          f"step memory {peak - rss_init:.1f} MiB = peak {peak:.1f} - after init {rss_init:.1f}, "
          f"torch {torch.__version__}")
    print(f"RESULT torch tokens_per_s={B * context / secs:.1f} step_mib={peak - rss_init:.1f} peak_mib={peak:.1f}")
    if os.environ.get("NOVA_PROFILE"):
        profile(step, min(steps, 5), cuda)


# aten op -> the class NOVA_PROFILE puts Nova's kernels doing that work in.
# In this model bmm and softmax are attention's only; log_softmax / nll_loss
# are the cross-entropy's.
CLASSES = [
    ("optimizer", ("_fused_adamw", "adamw", "_foreach", "norm", "clamp", "linalg_vector_norm")),
    ("attention", ("bmm", "baddbmm", "_softmax", "_softmax_backward_data", "masked_fill",
                   "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
                   "_scaled_dot_product_flash_attention_backward", "_scaled_dot_product_efficient_attention",
                   "_scaled_dot_product_efficient_attention_backward", "_scaled_dot_product_cudnn_attention",
                   "_scaled_dot_product_cudnn_attention_backward", "_flash_attention_forward",
                   "_flash_attention_backward", "_efficient_attention_forward", "_efficient_attention_backward")),
    ("matmul", ("mm", "addmm", "matmul", "linear")),
    ("row kernels", ("layer_norm", "native_layer_norm", "native_layer_norm_backward", "_log_softmax",
                     "_log_softmax_backward_data", "nll_loss", "nll_loss_forward", "nll_loss_backward",
                     "sum", "mean")),
    ("embedding", ("embedding", "embedding_backward", "embedding_dense_backward", "index_select",
                   "index_add_", "embedding_renorm_")),
    ("data movement", ("copy_", "clone", "contiguous", "transpose", "t", "view", "reshape", "_unsafe_view",
                       "permute", "expand", "zero_", "fill_", "empty", "empty_like", "zeros", "split",
                       "as_strided", "slice", "select", "unsqueeze", "squeeze", "cat", "stack")),
    ("elementwise", ("add", "add_", "mul", "mul_", "div", "div_", "gelu", "gelu_backward", "sub",
                     "sub_", "neg", "tanh", "pow", "sqrt", "rsqrt", "where", "threshold_backward")),
]


def profile(step, steps, cuda=False):
    """Self time per step of each aten op, summed into NOVA_PROFILE's
    classes: on the CPU its CPU time, on a GPU the time of the kernels it
    launched itself (the device check sets it beside Nova's
    device_profile.txt)."""
    from torch.profiler import ProfilerActivity, profile as torch_profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with torch_profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize()

    def self_us(e):
        if not cuda:
            return e.self_cpu_time_total
        # torch 2.4 renamed the CUDA times device times.
        for attr in ("self_device_time_total", "self_cuda_time_total"):
            if hasattr(e, attr):
                return getattr(e, attr)
        return 0.0

    by_class, total = {}, 0.0
    for e in prof.key_averages():
        # On a GPU each kernel is also an event of its own, its time already
        # its aten op's: only the aten ops count.
        if cuda and not e.key.startswith("aten::"):
            continue
        ms = self_us(e) / 1e3 / steps
        total += ms
        name = e.key.split("::", 1)[1] if e.key.startswith("aten::") else None
        cls = next((c for c, names in CLASSES if name in names), "other") if name else "other (not aten)"
        by_class[cls] = by_class.get(cls, 0.0) + ms
    print(f"peer profile (torch.profiler, self {'CUDA' if cuda else 'CPU'} time, {steps} steps; profiled steps "
          f"run slower): {total:.3f} ms per step")
    for cls, ms in sorted(by_class.items(), key=lambda kv: -kv[1]):
        print(f"peer profile   {cls:22s} {100 * ms / total:5.1f}%  {ms:9.3f} ms per step")


if __name__ == "__main__":
    main()
