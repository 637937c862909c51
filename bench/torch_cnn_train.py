"""PyTorch reference for `netc train examples/fashion_cnn.net`: the same CNN, f32
(TF32 off in cuDNN and in products, as netc computes), channels last, cuDNN
(benchmark mode: it times its convolution algorithms once per shape), Adam lr
1e-3 with the same cosine schedule and warm-up, on Fashion-MNIST read from the
same IDX files, kept on the GPU as u8 and scaled there, as netc does.
Milliseconds per training step (the median over windows of 10 steps after the
first 20), eager and torch.compile (mode=reduce-overhead: CUDA graphs). Prints
JSON lines. --device cpu: the same on the CPU (no cuDNN nor CUDA graphs
there), a rehearsal (bench/torch_device.py); give it a few images and 30
steps (one window). Usage: torch_cnn_train.py [--device cuda|cpu] DATA_DIR
[STEPS] [BATCH...]

The model is the same function as netc's, layer for layer:
  conv 3x3 1 -> 32, padding 1, ReLU, max pool 2; conv 3x3 32 -> 64, padding 1,
  ReLU, max pool 2; linear 7*7*64 -> 128, ReLU; linear 128 -> 10.
Weights' layouts (netc's names from examples/fashion_cnn.net, nn.conv2d and
nn.linear): netc keeps a convolution's weight as [kh, kw, in, out] (HWIO: its
windows are channels-last pixel rows times the weight) and PyTorch's Conv2d as
[out, in, kh, kw] (OIHW): torch_w = netc_w.permute(3, 2, 0, 1). nn.linear's
weight is [in, out] (x @ w) and torch's Linear [out, in]: torch_w = netc_w.T.
netc flattens the pooled (B, 7, 7, 64) channels-last tensor in (h, w, c) order;
PyTorch's tensors are NCHW by their logical shape even in channels-last memory,
so the model flattens x.permute(0, 2, 3, 1) (a view of channels-last memory,
no copy), the same (h, w, c) order: fc1's weight then maps by the transpose
alone. Biases are the same vectors. The initial values differ (each framework
draws its own); the step's cost does not depend on them."""
import argparse, json, math, os, statistics, time
import numpy as np
import torch
import torch.nn.functional as F

from idx_files import idx, find
from torch_device import add_device_arg, device_of, sync

class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(1, 32, 3, padding=1)
        self.c2 = torch.nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = torch.nn.Linear(7 * 7 * 64, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, images):   # u8 (B, 28, 28)
        x = (images.float() / 255.0).unsqueeze(1).contiguous(memory_format=torch.channels_last)
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        x = x.permute(0, 2, 3, 1).flatten(1)   # (h, w, c), as netc's reshape of channels-last
        return self.fc2(F.relu(self.fc1(x)))

def run(device, compiled, data, steps, batch):
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    xtr, ytr = data
    model = Cnn().to(device).to(memory_format=torch.channels_last)
    # compiled: lr as a tensor filled in place (a float recompiles Adam's step for each value)
    lr = torch.tensor(1e-3, device=device) if compiled else 1e-3
    # the CPU: a tensor lr without capturable (PyTorch's Adam captures CUDA graphs' steps only on devices with them)
    opt = torch.optim.Adam(model.parameters(), lr=lr, capturable=compiled and device.type == "cuda")
    total = xtr.shape[0] // batch; warmup = 100
    def set_lr(s):
        v = 1e-3 * ((s + 1) / warmup if s < warmup else
                    0.5 * (1 + math.cos(math.pi * min(1.0, (s - warmup) / max(1, total - warmup)))))
        if compiled: lr.fill_(v)
        else: opt.param_groups[0]["lr"] = v
    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
        return loss
    f = torch.compile(step, mode="reduce-overhead") if compiled else step
    perm = torch.randperm(xtr.shape[0], device=device)
    window, ms = 10, []
    sync(device); t = time.perf_counter()
    for s in range(steps):
        b = s % total
        i = perm[b * batch:(b + 1) * batch]
        set_lr(s); f(xtr[i], ytr[i])
        if (s + 1) % window == 0:
            sync(device); now = time.perf_counter()
            if s + 1 > 20: ms.append((now - t) / window * 1e3)   # the first 20: compilation, cuDNN's timing
            t = now
    return {"bench": "cnn_train_step", "impl": "torch_compile" if compiled else "torch_eager", "batch": batch,
            "steps": steps, "ms_per_step": round(statistics.median(ms), 3) if ms else None,
            "ms_windows": [round(x, 3) for x in ms]}

def main():
    ap = argparse.ArgumentParser(description="fashion_cnn's training step in PyTorch, eager and torch.compile")
    add_device_arg(ap)
    ap.add_argument("data")
    ap.add_argument("steps", nargs="?", type=int, default=200)
    ap.add_argument("batches", nargs="*", type=int, default=[128, 512], metavar="BATCH")
    a = ap.parse_args()
    dev = device_of(a)
    xtr = torch.from_numpy(idx(find(a.data, "train-images-idx3-ubyte")).copy()).to(dev)
    ytr = torch.from_numpy(idx(find(a.data, "train-labels-idx1-ubyte")).astype(np.int64)).to(dev)
    for batch in a.batches:
        for compiled in (False, True):
            print(json.dumps(run(dev, compiled, (xtr, ytr), a.steps, batch)), flush=True)

main()
