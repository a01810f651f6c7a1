#!/usr/bin/env python3
"""Recompute Nova's tiny-GPT loss and gradients in PyTorch float64.

Usage: gpt_vs_torch.py FILE.safetensors (written by gpt_reference). The
model below is an independent implementation of the GPT-2 equations Nova's
nn/gpt.hpp documents; parameters and batch come from the file, the result
must match Nova's to 1e-10 relative: both sides compute in float64, so
only summation order differs (in practice ~1e-13).
"""
import json
import math
import struct
import sys

import torch
import torch.nn.functional as F

DTYPES = {"F64": torch.float64, "F32": torch.float32, "I32": torch.int32, "I64": torch.int64}


def load(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"]).clone()
    return out, meta


def layer_norm(x, g, b):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + 1e-5) * g + b


def gpt_loss(p, x, y, layers, heads):
    B, T = x.shape
    d = p["wte"].shape[1]
    hd = d // heads
    h = p["wte"][x.long()] + p["wpe"][:T]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    for i in range(layers):
        w = lambda n: p[f"blocks.{i}.{n}"]
        a = layer_norm(h, w("ln1.gamma"), w("ln1.beta"))
        qkv = a @ w("attn.w_qkv") + w("attn.b_qkv")
        q, k, v = (qkv[..., j * d:(j + 1) * d].reshape(B, T, heads, hd).transpose(1, 2) for j in range(3))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd) + mask, dim=-1)
        o = (att @ v).transpose(1, 2).reshape(B, T, d)
        h = h + o @ w("attn.w_out") + w("attn.b_out")
        m = layer_norm(h, w("ln2.gamma"), w("ln2.beta"))
        gelu = F.gelu(m @ w("mlp.w_fc") + w("mlp.b_fc"), approximate="tanh")
        h = h + gelu @ w("mlp.w_proj") + w("mlp.b_proj")
    logits = layer_norm(h, p["ln_f.gamma"], p["ln_f.beta"]) @ p["lm_head"]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1).long())


BOUND = 1e-10


def main():
    t, meta = load(sys.argv[1])
    params = {k[len("param."):]: v.requires_grad_(True) for k, v in t.items() if k.startswith("param.")}
    loss = gpt_loss(params, t["x"], t["y"], int(meta["layers"]), int(meta["heads"]))
    loss.backward()
    worst = abs(loss.item() - t["loss"].item()) / abs(loss.item())
    print(f"torch loss {loss.item():.15f}, nova loss {t['loss'].item():.15f}, relative {worst:.2e}")
    for name, p in params.items():
        nova_grad = t["grad." + name]
        err = ((p.grad - nova_grad).abs().max() / p.grad.abs().max().clamp_min(1e-300)).item()
        worst = max(worst, err)
        if err > BOUND:
            print(f"MISMATCH {name}: relative error {err:.2e}")
    print(f"{len(params)} parameters; worst relative error {worst:.2e} (bound {BOUND:.0e})")
    sys.exit(0 if worst <= BOUND else 1)


main()
