"""PyTorch reference for examples/fashion_mlp.net inference: the same MLP
784-1024-1024-10 in f32, eager and torch.compile (CUDA graphs), median latency
of many calls after warm-up, synchronised. Prints JSON lines."""
import json, sys, time
import torch

def mlp():
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 1024), torch.nn.ReLU(),
                               torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()

def median_us(fn, x, iters=200):
    for _ in range(20): fn(x)
    torch.cuda.synchronize()
    lat = []
    for _ in range(iters):
        t = time.perf_counter(); fn(x); torch.cuda.synchronize(); lat.append((time.perf_counter() - t) * 1e6)
    lat.sort()
    return lat[len(lat) // 2]

@torch.no_grad()
def main():
    torch.backends.cuda.matmul.allow_tf32 = False   # netc's f32 matmul is exact f32
    m = mlp().eval()
    compiled = torch.compile(m, mode="reduce-overhead")
    for b in [int(a) for a in sys.argv[1:]] or [1, 512]:
        x = torch.randint(0, 256, (b, 28, 28), dtype=torch.uint8, device="cuda")
        eager = lambda x: m(x.float() / 255.0)
        comp = lambda x: compiled(x.float() / 255.0)
        print(json.dumps({"impl": "torch_eager", "batch": b, "median_us": round(median_us(eager, x), 2)}))
        print(json.dumps({"impl": "torch_compile_cudagraphs", "batch": b, "median_us": round(median_us(comp, x), 2)}))

main()
