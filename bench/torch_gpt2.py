"""PyTorch reference for issue 6: the GPT-2 124M training step of
examples/gpt2.net (vocab 50304, context 1024, 12 layers, 12 heads, width 768,
tied output projection, bf16 autocast over f32 master weights, fused AdamW
lr 6e-4 betas (0.9, 0.95) weight decay 0.1, gradient clipping at 1.0, flash
attention through scaled_dot_product_attention), at batch B x T tokens of
random bytes. Eager and torch.compile; ms per step (median of the steps after
the warm-up), tokens/s and the CUDA allocator's peak. Prints JSON lines.
--device cpu with a small model (--layers 1 --vocab 512 --width 64 --heads 2
--maxt T, bench/run_gpt2.sh's TINY=1): the same steps on the CPU, a rehearsal
(bench/torch_device.py).
Usage: torch_gpt2.py [--device cuda|cpu] [--layers L] [--vocab V] [--width C]
                     [--heads H] [--maxt MAXT] [B] [T] [STEPS]"""
import argparse, json, statistics, time
import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_device import add_device_arg, device_of, peak_gib, reset_peak, sync

V, MAXT, C, L, H = 50304, 1024, 768, 12, 12


class Block(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.c_attn, self.c_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.c_fc, self.c_fc_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.c_fc_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, vocab=V, maxt=MAXT, width=C, layers=L, heads=H):
        super().__init__()
        self.vocab = vocab
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(maxt, width)
        self.h = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)

    def forward(self, tokens, targets):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().reshape(-1, self.vocab), targets.reshape(-1))   # targets: a strided slice


def add_size_args(ap):
    """The model's size: GPT-2 124M unless told (examples/gpt2.net's --set V C L H MAXT)."""
    for name, default in (("vocab", V), ("maxt", MAXT), ("width", C), ("layers", L), ("heads", H)):
        ap.add_argument("--" + name, type=int, default=default)


def size_of(a):
    return dict(vocab=a.vocab, maxt=a.maxt, width=a.width, layers=a.layers, heads=a.heads)


def run(device, size, compiled, batch, length, steps):
    torch.manual_seed(0)
    model = GPT2(**size).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    step_fn = model
    if compiled:
        step_fn = torch.compile(model)
    data = torch.randint(0, 256, (steps + 1, batch, length + 1), device=device)
    times = []
    reset_peak(device)
    for s in range(steps):
        sync(device)
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = step_fn(data[s, :, :-1], data[s, :, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        times.append(time.perf_counter() - t0)
    warm = times[5:] if len(times) > 10 else times[1:]
    ms = statistics.median(warm) * 1e3
    row = {"bench": "gpt2_train_step", "impl": "torch.compile" if compiled else "eager", "batch": batch,
           "T": length, "ms_per_step": round(ms, 2), "tokens_per_s": round(batch * length / ms * 1e3),
           "peak_gib": None, "first_step_s": round(times[0], 1), "last_loss": round(loss.item(), 4)}
    print(json.dumps(peak_gib(device, row, "peak_gib")), flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="GPT-2's training step in PyTorch, eager and torch.compile")
    add_device_arg(ap)
    add_size_args(ap)
    ap.add_argument("batch", nargs="?", type=int, default=16)
    ap.add_argument("T", nargs="?", type=int, default=1024)
    ap.add_argument("steps", nargs="?", type=int, default=20)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = device_of(a)
    run(dev, size_of(a), False, a.batch, a.T, a.steps)
    run(dev, size_of(a), True, a.batch, a.T, a.steps)
