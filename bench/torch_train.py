#!/usr/bin/env python3
"""bench/torch_train.py - the PyTorch peer of bench/bench_train.c.

The same decoder-only LM as examples/common/model.h's softmax baseline, trained on random
tokens, fp32, CPU:
  token embedding + learned positions; N pre-norm blocks (LayerNorm; causal multi-head
  attention with one qkv Linear(C,3C)+bias and an output Linear(C,C)+bias, the attention
  materialised: matmul, causal mask, softmax, matmul; GELU(tanh) MLP C->4C->C with
  biases); final LayerNorm; head tied to the token embedding (no bias); cross-entropy;
  AdamW (lr 3e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the matrices: wte, wpe
  and the Linear weights, as model.c's decay flags); dropout 0.

Configs: S (d 128, 4 layers, 4 heads, context 256, batch 8, vocab 50257)
         M (d 384, 6 layers, 6 heads, context 512, batch 4, vocab 50257)

Each config: `--warmup` untimed steps, then `--steps` timed steps (one step = zero_grad,
forward, loss, backward, AdamW). tok_per_s = B*T / median step time (the median resists
the other jobs of a shared machine); tok_per_s_best uses the fastest step.
Prints one JSON line per config:
  {"config":"S","tok_per_s":...,"tok_per_s_best":...,"step_ms":[...],"params":...,
   "peak_rss_mb":...,"threads":...,"torch":"1.13..."}
peak_rss_mb is the process's ru_maxrss after the config (run one config per process
for a per-config figure: --config S).

Best set-up on a 2-core machine (what bench_train runs):
  LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 OMP_WAIT_POLICY=passive \
      /usr/bin/python3 bench/torch_train.py --threads 2
Default set-up: /usr/bin/python3 bench/torch_train.py   (torch's own thread count)
"""
import argparse
import json
import math
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    "S": dict(C=128, L=4, H=4, T=256, B=8, V=50257),
    "M": dict(C=384, L=6, H=6, T=512, B=4, V=50257),
}


class Block(nn.Module):
    def __init__(self, C, H, T):
        super().__init__()
        self.H = H
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.fc_proj = nn.Linear(4 * C, C)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        H, D = self.H, C // self.H
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, H, D).transpose(1, 2)
        k = k.view(B, T, H, D).transpose(1, 2)
        v = v.view(B, T, H, D).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = att.masked_fill(self.mask[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        x = x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return x


class LM(nn.Module):
    def __init__(self, C, L, H, T, V):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList([Block(C, H, T) for _ in range(L)])
        self.lnf = nn.LayerNorm(C)
        std, pstd = 0.02, 0.02 / math.sqrt(2 * L)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, pstd if name.endswith("proj.weight") else std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        logits = F.linear(self.lnf(x), self.wte.weight)
        return F.cross_entropy(logits.view(B * T, -1), targets.reshape(B * T))


def run(name, steps, warmup, foreach):
    c = CONFIGS[name]
    torch.manual_seed(0)
    model = LM(c["C"], c["L"], c["H"], c["T"], c["V"])
    decay = [p for p in model.parameters() if p.dim() >= 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    kw = {} if foreach is None else {"foreach": foreach}
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
        lr=3e-4, betas=(0.9, 0.95), eps=1e-8, **kw)
    g = torch.Generator().manual_seed(1)
    B, T, V = c["B"], c["T"], c["V"]
    nparams = sum(p.numel() for p in model.parameters())
    times = []
    for i in range(warmup + steps):
        data = torch.randint(0, V, (B, T + 1), generator=g)
        x, y = data[:, :T].contiguous(), data[:, 1:].contiguous()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if i >= warmup:
            times.append(dt)
    if not math.isfinite(loss.item()):
        raise SystemExit("torch_train: non-finite loss")
    st = sorted(times)
    med = st[len(st) // 2] if len(st) % 2 else 0.5 * (st[len(st) // 2 - 1] + st[len(st) // 2])
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {
        "config": name,
        "tok_per_s": B * T / med,
        "tok_per_s_best": B * T / st[0],
        "step_ms": [round(1e3 * t, 1) for t in times],
        "params": nparams,
        "peak_rss_mb": round(rss, 1),
        "threads": torch.get_num_threads(),
        "loss": round(loss.item(), 4),
        "torch": torch.__version__,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="all", help="S, M or all (default)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads(N); 0 keeps torch's default")
    ap.add_argument("--steps", type=int, default=0, help="timed steps (default S 10, M 5)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first (2)")
    ap.add_argument("--foreach", choices=["default", "on", "off"], default="default",
                    help="AdamW foreach implementation (torch's default)")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    foreach = {"default": None, "on": True, "off": False}[a.foreach]
    names = ["S", "M"] if a.config == "all" else [a.config]
    for n in names:
        if n not in CONFIGS:
            raise SystemExit("torch_train: unknown config %r (S or M)" % n)
        steps = a.steps or (10 if n == "S" else 5)
        print(json.dumps(run(n, steps, a.warmup, foreach)), flush=True)


if __name__ == "__main__":
    main()
