"""examples/fashion_vit.net against a hand-written PyTorch ViT: the losses of
the first training steps from the same initial weights (written here as
safetensors with netc's names and layouts, weights [in, out]) on the same
Fashion-MNIST batches, AdamW (betas 0.9, 0.999, eps 1e-8, weight decay 0.01)
at a constant learning rate, all in f32. netc's side is the module's training
step (`netc build --entry train`) run through libnetrt with ctypes, so no C
driver is needed. Prints one JSON line per step and implementation, then a
summary with the largest relative difference; exits 1 past the tolerance.

Usage: vit_losses.py [--steps 10] [--batch 32] [--lr 1e-3] [--device cpu|gpu]
                     [--netc build/netc] [--lib build/libnetrt.so]
                     [--data /usr/share/datasets/fashion-mnist] [--out DIR]"""
import argparse
import ctypes
import gzip
import json
import math
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

from safetensors_write import write_adamw_start

TOLERANCE = 1e-5   # relative, per step: f32 on both sides, only summation orders differ
S, P, C, HEADS, L, HIDDEN = 28, 4, 64, 4, 2, 128
N = (S // P) ** 2


def init_params(seed):
    g = torch.Generator().manual_seed(seed)
    p = {}

    def linear(name, n_in, n_out):
        bound = math.sqrt(6.0 / (n_in + n_out))
        p[name + ".weight"] = (torch.rand(n_in, n_out, generator=g) * 2 - 1) * bound
        p[name + ".bias"] = torch.randn(n_out, generator=g) * 0.02   # not zero: their gradients show

    def norm(name):
        p[name + ".weight"] = 1 + torch.randn(C, generator=g) * 0.1
        p[name + ".bias"] = torch.randn(C, generator=g) * 0.1

    linear("patch_embed", P * P, C)
    p["cls_token"] = torch.randn(1, 1, C, generator=g) * 0.02
    p["pos_embed"] = torch.randn(N + 1, C, generator=g) * 0.02
    for i in range(L):
        b = f"blocks.{i}."
        norm(b + "norm1")
        linear(b + "attn.qkv", C, 3 * C)
        linear(b + "attn.proj", C, C)
        norm(b + "norm2")
        linear(b + "mlp.fc1", C, HIDDEN)
        linear(b + "mlp.fc2", HIDDEN, C)
    norm("norm")
    linear("head", C, 10)
    return p




def read_idx(path, count, header):
    with gzip.open(path, "rb") as f:
        f.read(header)
        return f.read(count)


def forward(p, images):
    """PyTorch's ViT, written from the model's description, not from netc's IR."""
    B = images.shape[0]
    x = images.float() / 255.0
    x = x.view(B, S // P, P, S // P, P).permute(0, 1, 3, 2, 4).reshape(B, N, P * P)
    x = x @ p["patch_embed.weight"] + p["patch_embed.bias"]
    x = torch.cat([p["cls_token"].expand(B, 1, C), x], dim=1) + p["pos_embed"]
    for i in range(L):
        b = f"blocks.{i}."
        a = F.layer_norm(x, (C,), p[b + "norm1.weight"], p[b + "norm1.bias"])
        qkv = a @ p[b + "attn.qkv.weight"] + p[b + "attn.qkv.bias"]
        q, k, v = (z.view(B, N + 1, HEADS, C // HEADS).transpose(1, 2) for z in qkv.split(C, dim=2))
        y = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, N + 1, C)
        x = x + (y @ p[b + "attn.proj.weight"] + p[b + "attn.proj.bias"])
        m = F.layer_norm(x, (C,), p[b + "norm2.weight"], p[b + "norm2.bias"])
        m = F.gelu(m @ p[b + "mlp.fc1.weight"] + p[b + "mlp.fc1.bias"])
        x = x + (m @ p[b + "mlp.fc2.weight"] + p[b + "mlp.fc2.bias"])
    h = F.layer_norm(x[:, 0], (C,), p["norm.weight"], p["norm.bias"])
    return h @ p["head.weight"] + p["head.bias"]


def torch_losses(params, images, labels, a):
    p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    opt = torch.optim.AdamW(p.values(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    losses = []
    for s in range(a.steps):
        loss = F.cross_entropy(forward(p, images[s]), labels[s].long())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        print(json.dumps({"impl": "torch", "step": s + 1, "loss": round(losses[-1], 9)}), flush=True)
    return losses


class Error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("message", ctypes.c_char * 1024)]


class Opts(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int), ("dim_names", ctypes.POINTER(ctypes.c_char_p)),
                ("dim_values", ctypes.POINTER(ctypes.c_int64)), ("ndims", ctypes.c_int), ("seed", ctypes.c_uint64),
                ("gpu_index", ctypes.c_int), ("use_cuda_graph", ctypes.c_int)]


NRT_F32, NRT_I32, NRT_U8 = 0, 3, 4


def netc_losses(a, weights, images, labels):
    module = os.path.join(a.out, "vit_train.netm")
    subprocess.run([a.netc, "build", a.source, "--entry", "train", "--dim", f"B={a.batch}", "-o", module,
                    "--target", "" if a.device == "cpu" else "sm_90a"], check=True)
    lib = ctypes.CDLL(a.lib)
    lib.nrt_session_defaults.restype = Opts
    e = Error()

    def check(status, what):
        if status:
            sys.exit(f"vit_losses: {what}: {e.message.decode()}")

    m, s = ctypes.c_void_p(), ctypes.c_void_p()
    check(lib.nrt_module_load_entry(module.encode(), b"train", ctypes.byref(m), ctypes.byref(e)), module)
    o = lib.nrt_session_defaults()
    o.device = 1 if a.device == "cpu" else 2
    check(lib.nrt_session_create(m, ctypes.byref(o), ctypes.byref(s), ctypes.byref(e)), "session")
    check(lib.nrt_session_load_weights(s, weights.encode(), ctypes.byref(e)), weights)

    def set_input(name, dtype, t):
        shape = (ctypes.c_int64 * t.dim())(*t.shape)
        data = t.contiguous().numpy()
        check(lib.nrt_session_set_input(s, name, dtype, t.dim(), shape, data.ctypes.data_as(ctypes.c_void_p),
                                        ctypes.byref(e)), name.decode())

    losses = []
    for step in range(1, a.steps + 1):
        set_input(b"images", NRT_U8, images[step - 1])
        set_input(b"labels", NRT_I32, labels[step - 1])
        for name, v in ((b"@lr", a.lr), (b"@bias1", 1 - 0.9 ** step), (b"@bias2", 1 - 0.999 ** step)):
            set_input(name, NRT_F32, torch.tensor(v, dtype=torch.float32))
        check(lib.nrt_session_run(s, ctypes.byref(e)), f"step {step}")
        loss = ctypes.c_float()
        check(lib.nrt_session_get_output(s, b"loss", ctypes.byref(loss), 4, ctypes.byref(e)), "loss")
        losses.append(loss.value)
        print(json.dumps({"impl": "netc", "step": step, "loss": round(loss.value, 9)}), flush=True)
    lib.nrt_session_free(s)
    lib.nrt_module_free(m)
    return losses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--tolerance", type=float, default=TOLERANCE)
    ap.add_argument("--netc", default="build/netc")
    ap.add_argument("--lib", default="build/libnetrt.so")
    ap.add_argument("--source", default="examples/fashion_vit.net")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--out", default="/tmp/vit-losses")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(1)
    params = init_params(seed=1)
    weights = os.path.join(a.out, "init.safetensors")
    write_adamw_start(weights, params)
    count = a.steps * a.batch
    pixels = read_idx(os.path.join(a.data, "train-images-idx3-ubyte.gz"), count * S * S, 16)
    images = torch.frombuffer(bytearray(pixels), dtype=torch.uint8).view(a.steps, a.batch, S, S)
    labels = torch.frombuffer(bytearray(read_idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz"), count, 8)),
                              dtype=torch.uint8).to(torch.int32).view(a.steps, a.batch)
    ours = netc_losses(a, weights, images, labels)
    ref = torch_losses(params, images, labels, a)
    worst = max(abs(x - y) / max(abs(y), 1e-6) for x, y in zip(ours, ref))
    ok = len(ours) == len(ref) == a.steps and worst <= a.tolerance
    print(json.dumps({"bench": "vit_losses", "steps": a.steps, "batch": a.batch, "lr": a.lr, "device": a.device,
                      "first_loss": ref[0], "last_loss": ref[-1], "max_rel_diff": float(f"{worst:.3g}"),
                      "tolerance": a.tolerance, "pass": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
