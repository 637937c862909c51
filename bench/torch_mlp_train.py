"""PyTorch reference for `netc train examples/fashion_mlp.net`: the same MLP
784-1024-1024-10, f32 (tf32 off), Adam lr 1e-3 with the same cosine schedule
and warm-up, batch 512, on Fashion-MNIST read from the same IDX files; data
kept on the GPU as u8 and converted there, as netc does. Seconds per epoch
(median over epochs after the first) and test accuracy, eager and
torch.compile (mode=reduce-overhead: CUDA graphs). Prints JSON lines.
--device cpu: the same on the CPU (no CUDA graphs there), a rehearsal
(bench/torch_device.py); give it a few images (bench/rehearse.sh's data).
Usage: torch_mlp_train.py [--device cuda|cpu] DATA_DIR [EPOCHS] [BATCH]"""
import argparse, json, math, os, time
import numpy as np
import torch

from idx_files import idx, find
from torch_device import add_device_arg, device_of, sync

def run(device, compiled, data, epochs, batch):
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    xtr, ytr, xte, yte = data
    model = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10)).to(device)
    # compiled: lr as a tensor, filled in place each step; as a float, each new value
    # recompiled Adam's step until dynamo's limit (8), after which the step ran eagerly
    lr = torch.tensor(1e-3, device=device) if compiled else 1e-3
    # the CPU: a tensor lr without capturable (PyTorch's Adam captures CUDA graphs' steps only on devices with them)
    opt = torch.optim.Adam(model.parameters(), lr=lr, capturable=compiled and device.type == "cuda")
    steps_per_epoch = xtr.shape[0] // batch; total = steps_per_epoch * epochs; warmup = 100
    def set_lr(s):   # the schedule by hand: a scheduler may put a float where the tensor was
        v = 1e-3 * ((s + 1) / warmup if s < warmup else
                    0.5 * (1 + math.cos(math.pi * min(1.0, (s - warmup) / max(1, total - warmup)))))
        if compiled: lr.fill_(v)
        else: opt.param_groups[0]["lr"] = v
    def step(x, y):
        loss = torch.nn.functional.cross_entropy(model(x.float().view(-1, 784) / 255.0), y)
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
        return loss
    f = torch.compile(step, mode="reduce-overhead") if compiled else step
    times = []
    for epoch in range(epochs):
        perm = torch.randperm(xtr.shape[0], device=device)
        sync(device); t = time.perf_counter()
        for b in range(steps_per_epoch):
            i = perm[b * batch:(b + 1) * batch]
            set_lr(epoch * steps_per_epoch + b); f(xtr[i], ytr[i])
        sync(device); times.append(time.perf_counter() - t)
    with torch.no_grad():
        acc = (model(xte.float().view(-1, 784) / 255.0).argmax(1) == yte).float().mean().item()
    med = sorted(times[1:])[len(times[1:]) // 2] if len(times) > 1 else times[0]
    return {"impl": "torch_compile" if compiled else "torch_eager", "epochs": epochs, "batch": batch,
            "epoch_seconds": [round(x, 3) for x in times], "median_epoch_s": round(med, 3), "test_accuracy": round(acc, 4)}

def main():
    ap = argparse.ArgumentParser(description="fashion_mlp's training in PyTorch, eager and torch.compile")
    add_device_arg(ap)
    ap.add_argument("data")
    ap.add_argument("epochs", nargs="?", type=int, default=5)
    ap.add_argument("batch", nargs="?", type=int, default=512)
    a = ap.parse_args()
    d, epochs, batch, dev = a.data, a.epochs, a.batch, device_of(a)
    xtr = torch.from_numpy(idx(find(d, "train-images-idx3-ubyte")).copy()).to(dev)
    ytr = torch.from_numpy(idx(find(d, "train-labels-idx1-ubyte")).astype(np.int64)).to(dev)
    xte = torch.from_numpy(idx(find(d, "t10k-images-idx3-ubyte")).copy()).to(dev)
    yte = torch.from_numpy(idx(find(d, "t10k-labels-idx1-ubyte")).astype(np.int64)).to(dev)
    for compiled in (False, True):
        print(json.dumps(run(dev, compiled, (xtr, ytr, xte, yte), epochs, batch)), flush=True)

main()
