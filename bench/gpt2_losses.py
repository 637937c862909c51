"""Issue 6's correctness check: the losses of the first training steps of
examples/gpt2.net in netc and in PyTorch, from the same initial weights
(written here as safetensors with netc's names and layouts) on the same
token batches, at the same constant learning rate (AdamW betas (0.9, 0.95),
eps 1e-8, weight decay 0.1 on every parameter, gradient clipping at 1.0,
bf16 compute over f32 master weights). netc runs build/bench/gpt2_losses
(bench/gpt2_losses.c) on a module built with `netc build --entry train`.
Prints one JSON line per step and implementation, then a summary with the
largest relative difference; exits 1 when it exceeds the tolerance.
--f32 computes in f32 on both sides (the model without its `precision bf16`
line, PyTorch without autocast) against a tolerance of 1e-5 instead of 0.02:
the check that sees errors bf16's rounding hides.

Usage: gpt2_losses.py [--steps 10] [--batch 4] [--T 256] [--layers 12] [--vocab 50304]
                      [--width 768] [--heads 12] [--maxt 1024] [--device cuda] [--f32] [--tolerance X]
                      [--build-arg=--no-fuse ...] [--netc build/netc] [--out DIR]"""
import argparse
import json
import math
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

from safetensors_write import write_adamw_start

TOLERANCE = 0.02   # relative, per step: bf16 compute, summation orders differ
TOLERANCE_F32 = 1e-5   # f32: only summation orders differ


def init_params(L, V, MAXT, C, seed):
    """netc's parameter names and layouts (weights [in, out]), a GPT-2-like init."""
    g = torch.Generator().manual_seed(seed)
    p = {"wte": torch.randn(V, C, generator=g) * 0.02, "wpe": torch.randn(MAXT, C, generator=g) * 0.01}

    def linear(name, n_in, n_out):
        bound = math.sqrt(6.0 / (n_in + n_out))
        p[name + ".weight"] = (torch.rand(n_in, n_out, generator=g) * 2 - 1) * bound
        p[name + ".bias"] = torch.zeros(n_out)

    for i in range(L):
        h = f"h.{i}."
        for ln in ("ln_1", "ln_2"):
            p[h + ln + ".weight"], p[h + ln + ".bias"] = torch.ones(C), torch.zeros(C)
        linear(h + "attn.c_attn", C, 3 * C)
        linear(h + "attn.c_proj", C, C)
        linear(h + "mlp.c_fc", C, 4 * C)
        linear(h + "mlp.c_proj", 4 * C, C)
    p["ln_f.weight"], p["ln_f.bias"] = torch.ones(C), torch.zeros(C)
    return p




def forward(p, tokens, targets, L, H):
    B, T = tokens.shape
    C = p["wte"].shape[1]
    x = p["wte"][tokens] + p["wpe"][:T]
    for i in range(L):
        h = f"h.{i}."
        a = F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"])
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]
        q, k, v = (z.view(B, T, H, C // H).transpose(1, 2) for z in qkv.split(C, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + (y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"])
        m = F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"])
        m = F.gelu(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"], approximate="tanh")
        x = x + (m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"])
    logits = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"]) @ p["wte"].t()
    return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def torch_losses(params, tokens, a):
    dev = torch.device(a.device)
    p = {k: v.clone().to(dev).requires_grad_(True) for k, v in params.items()}
    opt = torch.optim.AdamW(p.values(), lr=a.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    losses = []
    for s in range(a.steps):
        batch = tokens[s].to(dev).long()
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=not a.f32):
            loss = forward(p, batch[:, :-1], batch[:, 1:], a.layers, a.heads)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(p.values(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        print(json.dumps({"impl": "torch", "device": a.device, "step": s + 1, "loss": round(losses[-1], 9)}), flush=True)
    return losses


def f32_source(a):
    """The model without its bf16 precision line: every op in f32, as PyTorch without autocast."""
    with open(a.source) as f:
        lines = f.readlines()
    kept = [line for line in lines if line.split() != ["precision", "bf16"]]
    if len(kept) == len(lines):
        sys.exit(f"gpt2_losses: --f32: {a.source} has no 'precision bf16' line to drop")
    path = os.path.join(a.out, "gpt2_f32.net")   # imports resolve through netc's stdlib path, not the file's folder
    with open(path, "w") as f:
        f.writelines(kept)
    return path


def netc_losses(a, weights, tokens_path):
    module = os.path.join(a.out, "gpt2_train.netm")
    sets = [f"L={a.layers}", f"V={a.vocab}", f"C={a.width}", f"H={a.heads}", f"MAXT={a.maxt}"]
    cmd = [a.netc, "build", f32_source(a) if a.f32 else a.source, "--entry", "train", "--dim", f"B={a.batch}", "--dim", f"T={a.T}", "-o", module]
    for s in sets:
        cmd += ["--set", s]
    cmd += a.build_args
    if a.device == "cpu":   # the module's kernels go unused: one NVRTC target instead of three cuts the cold build
        cmd += ["--target", "sm_80"]
    subprocess.run(cmd, check=True)
    run = [a.losses_tool, module, weights, tokens_path, str(a.steps), str(a.batch), str(a.T), "--lr", str(a.lr),
           "--device", "gpu" if a.device == "cuda" else "cpu"]
    out = subprocess.run(run, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    for r in rows:
        print(json.dumps(r), flush=True)
    return [r["loss"] for r in rows]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--T", type=int, default=256)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--maxt", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--f32", action="store_true", help="compute in f32 on both sides, at a tighter tolerance")
    ap.add_argument("--tolerance", type=float, default=None,
                    help=f"largest relative loss difference (default {TOLERANCE}, {TOLERANCE_F32} with --f32)")
    ap.add_argument("--build-arg", dest="build_args", action="append", default=[], metavar="ARG",
                    help="one more argument to `netc build` (repeatable): --build-arg=--no-fuse; --build-arg=--loss-slices --build-arg=4")
    ap.add_argument("--netc", default="build/netc")
    ap.add_argument("--losses-tool", dest="losses_tool", default="build/bench/gpt2_losses")
    ap.add_argument("--source", default="examples/gpt2.net")
    ap.add_argument("--out", default="/tmp/gpt2-losses")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    params = init_params(a.layers, a.vocab, a.maxt, a.width, seed=1)
    weights = os.path.join(a.out, "init.safetensors")
    write_adamw_start(weights, params)
    g = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, a.vocab, (a.steps, a.batch, a.T + 1), generator=g, dtype=torch.int32)
    tokens_path = os.path.join(a.out, "tokens.i32")
    tokens.numpy().astype("<i4").tofile(tokens_path)
    ours = netc_losses(a, weights, tokens_path)
    ref = torch_losses(params, tokens, a)
    if len(ours) != len(ref):
        print(json.dumps({"bench": "gpt2_losses", "error": f"netc gave {len(ours)} losses, torch {len(ref)}"}))
        return 1
    worst = max(abs(x - y) / max(abs(y), 1e-6) for x, y in zip(ours, ref))
    tolerance = a.tolerance if a.tolerance is not None else TOLERANCE_F32 if a.f32 else TOLERANCE
    ok = worst <= tolerance
    print(json.dumps({"bench": "gpt2_losses", "steps": a.steps, "batch": a.batch, "T": a.T, "layers": a.layers,
                      "width": a.width, "heads": a.heads, "vocab": a.vocab, "device": a.device,
                      "compute": "f32" if a.f32 else "bf16", "max_rel_diff": float(f"{worst:.3g}"),
                      "tolerance": tolerance, "pass": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
