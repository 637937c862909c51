"""PyTorch reference for GPT-2 inference (issue 3's latency beside issue 6's
model): the forward pass and loss of examples/gpt2.net (bench/torch_gpt2.py's
model) under bf16 autocast over f32 weights, no gradients, eager and
torch.compile; the median latency of many runs after a warm-up, for each
batch x length given. Autocast casts the f32 weights to bf16 in every
forward, as netc's module would without its prepare steps. --device cpu and
torch_gpt2.py's size options: the same on the CPU, a rehearsal
(bench/torch_device.py).
Usage: torch_gpt2_infer.py [--device cuda|cpu] [--layers L ...] B:T [B:T ...]   (e.g. 1:64 16:1024)"""
import argparse, json, statistics, time
import torch
from torch_device import add_device_arg, device_of, sync
from torch_gpt2 import GPT2, add_size_args, size_of


def latency(device, fn, tokens, runs):
    times = []
    for i in range(runs + 10):
        sync(device)
        t0 = time.perf_counter()
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16):
            fn(tokens, tokens)
        sync(device)
        if i >= 10:
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="GPT-2's forward pass in PyTorch, eager and torch.compile")
    add_device_arg(ap)
    add_size_args(ap)
    ap.add_argument("shapes", nargs="*", default=["1:64", "16:1024"], metavar="B:T")
    a = ap.parse_args()
    dev = device_of(a)
    torch.manual_seed(0)
    model = GPT2(**size_of(a)).to(dev).eval()
    compiled = torch.compile(model)
    for arg in a.shapes:
        b, t = (int(x) for x in arg.split(":"))
        tokens = torch.randint(0, 64, (b, t), device=dev)
        runs = 200 if b * t <= 4096 else 30
        for impl, fn in (("eager", model), ("torch.compile", compiled)):
            print(json.dumps({"bench": "gpt2_forward", "impl": impl, "batch": b, "T": t,
                              "median_us": round(latency(dev, fn, tokens, runs), 1)}), flush=True)
