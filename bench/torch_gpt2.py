"""PyTorch reference for issue 6: the GPT-2 124M training step of
examples/gpt2.net (vocab 50304, context 1024, 12 layers, 12 heads, width 768,
tied output projection, bf16 autocast over f32 master weights, fused AdamW
lr 6e-4 betas (0.9, 0.95) weight decay 0.1, gradient clipping at 1.0, flash
attention through scaled_dot_product_attention), at batch B x T tokens of
random bytes. Eager and torch.compile; ms per step (median of the steps after
the warm-up), tokens/s and the CUDA allocator's peak. Prints JSON lines.
Usage: torch_gpt2.py [B] [T] [STEPS]"""
import json, statistics, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

V, MAXT, C, L, H = 50304, 1024, 768, 12, 12


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.c_fc_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (z.view(b, t, H, C // H).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, C))
        return x + self.c_fc_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(MAXT, C)
        self.h = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, tokens, targets):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().reshape(-1, V), targets.reshape(-1))   # targets: a strided slice


def run(compiled, batch, length, steps):
    torch.manual_seed(0)
    model = GPT2().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    step_fn = model
    if compiled:
        step_fn = torch.compile(model)
    data = torch.randint(0, 256, (steps + 1, batch, length + 1), device="cuda")
    times = []
    torch.cuda.reset_peak_memory_stats()
    for s in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(data[s, :, :-1], data[s, :, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    warm = times[5:] if len(times) > 10 else times[1:]
    ms = statistics.median(warm) * 1e3
    print(json.dumps({"bench": "gpt2_train_step", "impl": "torch.compile" if compiled else "eager", "batch": batch,
                      "T": length, "ms_per_step": round(ms, 2), "tokens_per_s": round(batch * length / ms * 1e3),
                      "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2), "first_step_s": round(times[0], 1),
                      "last_loss": round(loss.item(), 4)}), flush=True)


if __name__ == "__main__":
    b = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    t = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    torch.backends.cuda.matmul.allow_tf32 = True
    run(False, b, t, n)
    run(True, b, t, n)
