"""PyTorch reference for examples/fashion_mlp.net inference: the same MLP
784-1024-1024-10 in f32, eager and torch.compile (CUDA graphs), median latency
of many calls after warm-up, synchronised. Prints JSON lines. --device cpu:
the same on the CPU (no CUDA graphs there), a rehearsal (bench/torch_device.py).
Usage: torch_infer.py [--device cuda|cpu] [BATCH...]   (default 1 512)"""
import argparse, json, time
import torch
from torch_device import add_device_arg, device_of, sync

def mlp(device):
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 1024), torch.nn.ReLU(),
                               torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).to(device)

def median_us(device, fn, x, iters=200):
    for _ in range(20): fn(x)
    sync(device)
    lat = []
    for _ in range(iters):
        t = time.perf_counter(); fn(x); sync(device); lat.append((time.perf_counter() - t) * 1e6)
    lat.sort()
    return lat[len(lat) // 2]

@torch.no_grad()
def main():
    ap = argparse.ArgumentParser(description="fashion_mlp's inference latency in PyTorch, eager and torch.compile")
    add_device_arg(ap)
    ap.add_argument("batches", nargs="*", type=int, default=[1, 512], metavar="BATCH")
    a = ap.parse_args()
    dev = device_of(a)
    torch.backends.cuda.matmul.allow_tf32 = False   # netc's f32 matmul is exact f32
    m = mlp(dev).eval()
    compiled = torch.compile(m, mode="reduce-overhead")
    for b in a.batches:
        x = torch.randint(0, 256, (b, 28, 28), dtype=torch.uint8, device=dev)
        eager = lambda x: m(x.float() / 255.0)
        comp = lambda x: compiled(x.float() / 255.0)
        print(json.dumps({"impl": "torch_eager", "batch": b, "median_us": round(median_us(dev, eager, x), 2)}))
        print(json.dumps({"impl": "torch_compile_cudagraphs", "batch": b, "median_us": round(median_us(dev, comp, x), 2)}))

main()
