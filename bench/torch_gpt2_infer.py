"""PyTorch reference for GPT-2 inference (issue 3's latency beside issue 6's
model): the forward pass and loss of examples/gpt2.net (bench/torch_gpt2.py's
model) under bf16 autocast over f32 weights, no gradients, eager and
torch.compile; the median latency of many runs after a warm-up, for each
batch x length given. Autocast casts the f32 weights to bf16 in every
forward, as netc's module would without its prepare steps.
Usage: torch_gpt2_infer.py B:T [B:T ...]   (e.g. 1:64 16:1024)"""
import json, statistics, sys, time
import torch
from torch_gpt2 import GPT2


def latency(fn, tokens, runs):
    times = []
    for i in range(runs + 10):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            fn(tokens, tokens)
        torch.cuda.synchronize()
        if i >= 10:
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


if __name__ == "__main__":
    torch.manual_seed(0)
    model = GPT2().cuda().eval()
    compiled = torch.compile(model)
    for arg in sys.argv[1:] or ["1:64", "16:1024"]:
        b, t = (int(x) for x in arg.split(":"))
        tokens = torch.randint(0, 64, (b, t), device="cuda")
        runs = 200 if b * t <= 4096 else 30
        for impl, fn in (("eager", model), ("torch.compile", compiled)):
            print(json.dumps({"bench": "gpt2_forward", "impl": impl, "batch": b, "T": t,
                              "median_us": round(latency(fn, tokens, runs), 1)}), flush=True)
