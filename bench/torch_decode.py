#!/usr/bin/env python3
"""bench/torch_decode.py - the PyTorch peer of bench/bench_decode.c (CPU) and of
bench/bench_decode_cuda.cu (--device cuda): token-by-token decoding of the softmax model with
a K/V cache, eager, fp32.

The model is bench/torch_train.py's (examples/common/model.h's softmax baseline):
  token embedding + learned positions; 4 pre-norm blocks (LayerNorm; causal multi-head
  attention with one qkv Linear(C,3C)+bias and an output Linear(C,C)+bias; GELU(tanh) MLP
  C->4C->C with biases); final LayerNorm; head tied to the token embedding (no bias);
  d 128, 4 heads, vocab 50257, random init (normal 0.02, residual projections
  0.02/sqrt(2L)); max_T = the context.
Decoding: K and V caches allocated once per (context, batch) as (L, B, H, context, D)
tensors; prefill = one causal forward over the prompt (matmul, mask, softmax, matmul, as
torch_train's CPU path) that writes the caches; step = one token per sequence: the block's
projections on that row, k and v written into the caches at the position, the attention
of the row over the cached positions 0..t (matmul, softmax, matmul), the tied head's
logits over the whole vocabulary. Everything under torch.inference_mode().
Before timing, each (context, batch) checks one step against the full causal forward's
last row (max |a - b| / max |b| <= 1e-4), and prints an error line and exits 1 otherwise.

Protocol (bench_decode's): per context, batch 1: prefill P = context/2 random tokens, then
--warmup untimed steps, then --steps timed steps, each timed on its own (perf_counter).
Batch --batch (32) at --batch-context: every sequence prefilled with P random tokens (one
batched forward), the same warm-up and steps, all sequences stepped together.
--rounds R repeats each measurement R times (a fresh prefill each time) and pools the steps.

--device cuda: the model, the caches and the tokens on the GPU; each timed step starts
after torch.cuda.synchronize() and ends after another (or, with --logits-to-host, after
the step's logits are copied to the host, as bench_decode_cuda's steps copy theirs).
--vocab V changes the vocabulary (a smoke run's smaller model).

Prints one JSON line per config:
  {"config": "b1", "context": 512, "batch": 1, "prefill": 256, "p50_ms": ..., "p99_ms": ...,
   "tok_per_s": ... (1 / p50), "step_ms": [...], "check": ..., "threads": 2, "torch": "..."}
  {"config": "b32", "context": 512, "batch": 32, ..., "tok_per_s": ... (32 / median step)}
  or {"config": ..., "context": ..., "error": "..."} when one failed (the others go on).

Best set-up on a 2-core machine (what bench_decode runs):
  LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 OMP_WAIT_POLICY=passive \\
      /usr/bin/python3 bench/torch_decode.py --threads 2 --contexts 128,512,2048,4096
"""
import argparse
import json
import math
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPE = dict(C=128, L=4, H=4, V=50257, F=4)


class Block(nn.Module):
    def __init__(self, C, H, ff):
        super().__init__()
        self.H = H
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, ff * C)
        self.fc_proj = nn.Linear(ff * C, C)

    def mlp(self, x):
        return self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class LM(nn.Module):
    def __init__(self, C, L, H, T, V, ff):
        super().__init__()
        self.C, self.H, self.D, self.T = C, H, C // H, T
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList([Block(C, H, ff) for _ in range(L)])
        self.lnf = nn.LayerNorm(C)
        std, pstd = 0.02, 0.02 / math.sqrt(2 * L)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, pstd if name.endswith("proj.weight") else std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
        self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1), persistent=False)


class Decoder:
    """A K/V cache for B sequences of up to T positions, allocated once."""

    def __init__(self, model, B, device="cpu"):
        m = model
        self.m, self.B = m, B
        L = len(m.blocks)
        self.kc = torch.zeros(L, B, m.H, m.T, m.D, device=device)
        self.vc = torch.zeros(L, B, m.H, m.T, m.D, device=device)
        self.scale = 1.0 / math.sqrt(m.D)

    def prefill(self, idx):
        """idx (B, P): the causal forward over the prompt, the caches filled at 0..P-1;
        returns the last position's logits (B, V)."""
        m = self.m
        B, P = idx.shape
        C, H, D = m.C, m.H, m.D
        x = m.wte(idx) + m.wpe.weight[:P]
        for l, b in enumerate(m.blocks):
            q, k, v = b.qkv(b.ln1(x)).split(C, dim=2)
            q = q.view(B, P, H, D).transpose(1, 2)
            k = k.view(B, P, H, D).transpose(1, 2)
            v = v.view(B, P, H, D).transpose(1, 2)
            self.kc[l, :, :, :P] = k
            self.vc[l, :, :, :P] = v
            att = torch.matmul(q, k.transpose(-2, -1)) * self.scale
            att = att.masked_fill(m.mask[:P, :P], float("-inf"))
            y = torch.matmul(F.softmax(att, dim=-1), v)
            x = x + b.proj(y.transpose(1, 2).reshape(B, P, C))
            x = x + b.mlp(x)
        return F.linear(m.lnf(x[:, -1]), m.wte.weight)

    def step(self, tok, t):
        """tok (B,): one new token per sequence at position t; returns logits (B, V)."""
        m = self.m
        B, C, H, D = self.B, m.C, m.H, m.D
        x = m.wte(tok) + m.wpe.weight[t]
        for l, b in enumerate(m.blocks):
            q, k, v = b.qkv(b.ln1(x)).view(B, 3, H, D).unbind(1)
            self.kc[l, :, :, t] = k
            self.vc[l, :, :, t] = v
            att = torch.matmul(q.unsqueeze(2), self.kc[l, :, :, : t + 1].transpose(-2, -1)) * self.scale
            y = torch.matmul(F.softmax(att, dim=-1), self.vc[l, :, :, : t + 1])
            x = x + b.proj(y.reshape(B, C))
            x = x + b.mlp(x)
        return F.linear(m.lnf(x), m.wte.weight)


def quantile(v, q):
    s = sorted(v)
    k = min(max(int(math.ceil(q * len(s))) - 1, 0), len(s) - 1)
    return s[k]


def run(ctx, B, steps, warmup, rounds, g, device="cpu", to_host=False):
    c = SHAPE
    cuda = device == "cuda"
    torch.manual_seed(0)
    model = LM(c["C"], c["L"], c["H"], ctx, c["V"], c["F"]).eval().to(device)
    dec = Decoder(model, B, device)
    P = ctx // 2
    V = c["V"]

    def rand(shape):  # the tokens from the CPU generator (the same stream on either device)
        return torch.randint(0, V, shape, generator=g).to(device)

    # the check: one step after a prefill of P against the causal forward of P + 1 tokens
    seq = rand((B, P + 1))
    ref = dec.prefill(seq)  # fills 0..P (overwritten below)
    dec.prefill(seq[:, :P])
    got = dec.step(seq[:, P].contiguous(), P)
    err = ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
    if not err <= 1e-4:
        raise RuntimeError("cached step differs from the full forward: %.3g" % err)
    times = []
    for _ in range(rounds):
        dec.prefill(rand((B, P)))
        for i in range(warmup + steps):
            tok = rand((B,))
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            logits = dec.step(tok, P + i)
            if to_host:
                logits = logits.cpu()
            elif cuda:
                torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            if i >= warmup:
                times.append(dt)
        if not math.isfinite(logits[0, 0].item()):
            raise RuntimeError("non-finite logits")
    p50 = quantile(times, 0.5)
    return {
        "config": "b1" if B == 1 else "b%d" % B,
        "context": ctx,
        "batch": B,
        "prefill": P,
        "p50_ms": round(1e3 * p50, 4),
        "p99_ms": round(1e3 * quantile(times, 0.99), 4),
        "tok_per_s": B / p50,
        "step_ms": [round(1e3 * t, 4) for t in times],
        "check": err,
        "threads": torch.get_num_threads(),
        "device": device,
        "logits_to_host": to_host,
        "torch": torch.__version__,
    }


def int_list(s):
    try:
        v = [int(x) for x in s.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("wants comma-separated integers: %r" % s)
    if not v or min(v) < 16 or max(v) > 65536:
        raise argparse.ArgumentTypeError("contexts must be in [16, 65536]: %r" % s)
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--contexts", type=int_list, default=[128, 512, 2048, 4096],
                    help="batch-1 contexts, comma list (default 128,512,2048,4096)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads(N); 0 keeps torch's default")
    ap.add_argument("--steps", type=int, default=48, help="timed steps per round (default 48)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps after the prefill (default 2)")
    ap.add_argument("--rounds", type=int, default=1, help="measurements pooled per config (default 1)")
    ap.add_argument("--batch", type=int, default=32, help="sequences of the batched config (default 32; 0: none)")
    ap.add_argument("--batch-context", type=int, default=512, help="its context (default 512)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where it runs (default cpu)")
    ap.add_argument("--logits-to-host", action="store_true",
                    help="each timed step ends with its logits copied to the host (bench_decode_cuda)")
    ap.add_argument("--vocab", type=int, default=SHAPE["V"], help="vocabulary (default 50257)")
    a = ap.parse_args()
    if a.threads < 0 or a.steps < 1 or a.warmup < 0 or a.rounds < 1 or a.batch < 0 or a.vocab < 2:
        ap.error("--threads >= 0, --steps >= 1, --warmup >= 0, --rounds >= 1, --batch >= 0, --vocab >= 2")
    SHAPE["V"] = a.vocab
    cfgs = [(ctx, 1) for ctx in a.contexts] + ([(a.batch_context, a.batch)] if a.batch > 0 else [])
    for ctx, _ in cfgs:
        if not 16 <= ctx <= 65536 or ctx // 2 + a.warmup + a.steps > ctx:
            ap.error("context %d does not hold a prefill of %d, %d warm-up and %d timed steps"
                     % (ctx, ctx // 2, a.warmup, a.steps))
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    if a.device == "cuda" and not torch.cuda.is_available():
        for ctx, B in cfgs:
            print(json.dumps({"config": "b1" if B == 1 else "b%d" % B, "context": ctx,
                              "error": "torch %s: torch.cuda.is_available() is False" % torch.__version__}), flush=True)
        sys.exit(1)
    g = torch.Generator().manual_seed(1)
    failed = 0
    with torch.inference_mode():
        for ctx, B in cfgs:
            try:
                res = run(ctx, B, a.steps, a.warmup, a.rounds, g, a.device, a.logits_to_host)
            except Exception as e:  # report and go on with the next config
                traceback.print_exc(file=sys.stderr)
                msg = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
                res = {"config": "b1" if B == 1 else "b%d" % B, "context": ctx,
                       "error": "%s: %s" % (type(e).__name__, msg)}
                failed += 1
            print(json.dumps(res), flush=True)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
