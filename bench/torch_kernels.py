"""PyTorch references for issue 5's kernel measurements (bench/run_kernels.sh):
the device copy bandwidth, the elementwise chain gelu(x * 1.5 + 0.25) * 0.5
over 64M bf16 values (tanh GELU), layernorm over bf16 [16384, 768], and
examples/cast_chain.net's forward in its own op order, each eager and with
torch.compile, and causal attention at GPT-2's shape
(scaled_dot_product_attention). Device time of one call by CUDA events,
median of many. Prints JSON lines."""
import contextlib
import json
import torch
import torch.nn.functional as F


def median_us(fn, *args, iters=100):
    for _ in range(10):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*args)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    times.sort()
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
    q, k, v, g = (torch.randn(16, 12, 1024, 64, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)
    fwd_flops = 4 * 16 * 12 * 1024 ** 2 * 64 / 2
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
    n = 64 << 20
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    report("copy_64M_bf16", "torch", median_us(lambda: y.copy_(x)), 2 * 2 * n)
    report("chain_64M_bf16", "torch_eager", median_us(chain, x), 2 * 2 * n)
    report("chain_64M_bf16", "torch_compile", median_us(torch.compile(chain), x), 2 * 2 * n)

    xl = torch.randn(16384, 768, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(768, device="cuda", dtype=torch.bfloat16)
    b = torch.zeros(768, device="cuda", dtype=torch.bfloat16)
    ln = lambda t: F.layer_norm(t, (768,), w, b)
    report("layernorm_16384x768_bf16", "torch_eager", median_us(ln, xl), 2 * 2 * xl.numel())
    report("layernorm_16384x768_bf16", "torch_compile", median_us(torch.compile(ln), xl), 2 * 2 * xl.numel())

    attention()

    B = 64
    args = (torch.randn(B, 256, 512, device="cuda", dtype=torch.float16), torch.randint(0, 4096, (B, 64), device="cuda"),
            torch.randn(512, 1024, device="cuda", dtype=torch.float16), torch.randn(4096, 512, device="cuda") * 0.02,
            torch.ones(1024, device="cuda", dtype=torch.float16))
    report("cast_chain_B64", "torch_eager", median_us(cast_chain, *args))
    report("cast_chain_B64", "torch_compile", median_us(torch.compile(cast_chain), *args))


if __name__ == "__main__":
    main()
