"""PyTorch references for issue 5's kernel measurements (bench/run_kernels.sh):
the device copy bandwidth, the elementwise chain gelu(x * 1.5 + 0.25) * 0.5
over 64M bf16 values (tanh GELU), layernorm over bf16 [16384, 768], and
examples/cast_chain.net's forward in its own op order, each eager and with
torch.compile, and causal attention at GPT-2's shape
(scaled_dot_product_attention). Device time of one call by CUDA events,
median of many. Prints JSON lines. --device cpu --tiny (bench/run_kernels.sh's
TINY=1): each at a size the CPU runs in seconds, the host's clock for CUDA
events, a rehearsal (bench/torch_device.py); the names keep the real sizes.
Usage: torch_kernels.py [--device cuda|cpu] [--tiny]"""
import argparse
import contextlib
import json
import torch
import torch.nn.functional as F

from torch_device import add_device_arg, device_of, call_us, sync

DEV = torch.device("cuda")
# the sizes: GPT-2's attention, the chain's values, layernorm's rows, cast_chain's batch, the timed calls
SIZES = {"attn": (16, 12, 1024, 64), "n": 64 << 20, "rows": 16384, "cast_b": 64, "iters": 100}
TINY = {"attn": (1, 2, 64, 64), "n": 4096, "rows": 8, "cast_b": 2, "iters": 5}


def median_us(fn, *args, iters=None):
    for _ in range(10):
        fn(*args)
    sync(DEV)
    times = sorted(call_us(DEV, lambda: fn(*args)) for _ in range(iters or SIZES["iters"]))
    return times[len(times) // 2]


def report(name, impl, us, nbytes=None):
    row = {"bench": name, "impl": impl, "median_us": round(us, 2)}
    if nbytes:
        row["tb_per_s"] = round(nbytes / us / 1e6, 3)
    print(json.dumps(row), flush=True)


def chain(x):
    return F.gelu(x * 1.5 + 0.25, approximate="tanh") * 0.5


def cast_chain(x, rows, w, table, gain):
    p = x.float() @ w.float()   # f16 values multiplied in f32, as the .net asks
    t = p.transpose(1, 2)
    r = t.reshape(x.shape[0], 4, 256, 256)
    h = r[:, 0:1].reshape(x.shape[0], 64, 1024).half()
    y = torch.relu(h) * gain + 0.5
    e = torch.relu(table[rows].half())
    return y, e


def attention():
    """Causal attention at GPT-2's shape (16 x 12 heads of 64 over 1024, bf16):
    forward, and the backward alone, by scaled_dot_product_attention with the
    backend PyTorch picks and with flash attention forced."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v, g = (torch.randn(*SIZES["attn"], device=DEV, dtype=torch.bfloat16) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)
    batch, heads, t, d = SIZES["attn"]
    fwd_flops = 4 * batch * heads * t ** 2 * d / 2
    for impl, backends in (("torch_sdpa", None), ("torch_sdpa_flash", [SDPBackend.FLASH_ATTENTION])):
        with sdpa_kernel(backends) if backends else contextlib.nullcontext():
            with torch.no_grad():
                us = median_us(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
            print(json.dumps({"bench": "attention_B16_T1024", "impl": impl, "median_us": round(us, 2),
                              "model_tflops": round(fwd_flops / us / 1e6, 1)}), flush=True)
            with torch.enable_grad():
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                us = median_us(lambda: torch.autograd.grad(o, (q, k, v), g, retain_graph=True))
            print(json.dumps({"bench": "attention_train_B16_T1024", "impl": impl + "_backward", "median_us": round(us, 2),
                              "model_tflops": round(2.5 * fwd_flops / us / 1e6, 1)}), flush=True)


@torch.no_grad()
def main():
    torch.backends.cuda.matmul.allow_tf32 = False   # netc's f32 matmul is exact f32
    n = SIZES["n"]
    x = torch.randn(n, device=DEV, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    report("copy_64M_bf16", "torch", median_us(lambda: y.copy_(x)), 2 * 2 * n)
    report("chain_64M_bf16", "torch_eager", median_us(chain, x), 2 * 2 * n)
    report("chain_64M_bf16", "torch_compile", median_us(torch.compile(chain), x), 2 * 2 * n)

    xl = torch.randn(SIZES["rows"], 768, device=DEV, dtype=torch.bfloat16)
    w = torch.ones(768, device=DEV, dtype=torch.bfloat16)
    b = torch.zeros(768, device=DEV, dtype=torch.bfloat16)
    ln = lambda t: F.layer_norm(t, (768,), w, b)
    report("layernorm_16384x768_bf16", "torch_eager", median_us(ln, xl), 2 * 2 * xl.numel())
    report("layernorm_16384x768_bf16", "torch_compile", median_us(torch.compile(ln), xl), 2 * 2 * xl.numel())

    attention()

    B = SIZES["cast_b"]
    args = (torch.randn(B, 256, 512, device=DEV, dtype=torch.float16), torch.randint(0, 4096, (B, 64), device=DEV),
            torch.randn(512, 1024, device=DEV, dtype=torch.float16), torch.randn(4096, 512, device=DEV) * 0.02,
            torch.ones(1024, device=DEV, dtype=torch.float16))
    report("cast_chain_B64", "torch_eager", median_us(cast_chain, *args))
    report("cast_chain_B64", "torch_compile", median_us(torch.compile(cast_chain), *args))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="PyTorch's side of bench/run_kernels.sh")
    add_device_arg(ap)
    ap.add_argument("--tiny", action="store_true", help="sizes the CPU runs in seconds (a rehearsal)")
    a = ap.parse_args()
    DEV = device_of(a)
    if a.tiny:
        SIZES = TINY
    main()
