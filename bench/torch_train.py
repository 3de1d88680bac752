#!/usr/bin/env python3
"""bench/torch_train.py - the PyTorch peer of bench/bench_train.c (CPU) and
bench/bench_train_cuda.cu (GPU).

The same decoder-only LM as examples/common/model.h's softmax baseline, trained on random
tokens:
  token embedding + learned positions; N pre-norm blocks (LayerNorm; causal multi-head
  attention with one qkv Linear(C,3C)+bias and an output Linear(C,C)+bias; GELU(tanh) MLP
  C->F*C->C with biases); final LayerNorm; head tied to the token embedding (no bias);
  cross-entropy; AdamW (lr 3e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the
  matrices: wte, wpe and the Linear weights, as model.c's decay flags); dropout 0.
  CPU (--device cpu, the default): fp32, the attention materialised (matmul, causal mask,
  softmax, matmul), exactly as before.
  GPU (--device cuda): the attention is F.scaled_dot_product_attention(is_causal=True)
  (torch picks its backend: flash where the head width allows it); --dtype bf16 (default
  there) runs the forward under torch.autocast(bfloat16) with fp32 master weights, fp32
  gradients and an fp32 AdamW (fused=True unless --foreach says otherwise), as attnkit's
  device model (fp32 buffers, bf16 tensor-core products); --dtype tf32 allows TF32
  matmuls; fp32 forbids them. --compile wraps the model in torch.compile (the optimiser
  stays eager); --compile both times eager, then compiled.

Configs: S (d 128, 4 layers, 4 heads, context 256, batch 8, vocab 50257, FFN 4x)
         M (d 384, 6 layers, 6 heads, context 512, batch 4, vocab 50257, FFN 4x)
         G (d 768, 12 layers, 12 heads, context 1024, batch 8, vocab 50257, FFN 4x):
           the GPT-2-small-shaped softmax baseline of bench_train_cuda
         P (d 510, 12 layers, 6 heads, context 768, batch 32, vocab 50257, FFN 2x): the
           `paper` preset's shape as a plain model (no prior, MoE, gates or dropout)
  --config takes one name, a comma list (G,P) or all (S,M on the CPU, G,P on the GPU);
  --shape NAME=C,L,H,T,B,V,F replaces (or adds) a config's shape (bench_train_cuda
  passes its shapes this way, toy ones included).

Each config: `--warmup` untimed steps (compilation happens there), then `--steps` timed
steps (one step = zero_grad, forward, loss, backward, AdamW). tok_per_s = B*T / median step
time (the median resists the other jobs of a shared machine); tok_per_s_best uses the
fastest step. On the GPU every step is timed with CUDA events (whole step, and the
forward / backward / optimiser split) and synchronised.
Prints one JSON line per config (and per mode on the GPU):
  CPU: {"config":"S","tok_per_s":...,"tok_per_s_best":...,"step_ms":[...],"params":...,
        "peak_rss_mb":...,"threads":...,"torch":"1.13..."}
  GPU: {"config":"G","mode":"eager"|"compile","device":"cuda","dtype":"bf16",
        "tok_per_s":...,"tok_per_s_best":...,"step_ms":[...],"fwd_ms":...,"bwd_ms":...,
        "opt_ms":...,"warmup_s":...,"params":...,"peak_mem_mb":...,"gpu":...,"torch":...}
        or {"config":...,"mode":...,"error":"..."} when that run failed (the traceback
        goes to stderr; the other runs go on).
peak_rss_mb is the process's ru_maxrss after the config (run one config per process
for a per-config figure: --config S).

Best set-up on a 2-core machine (what bench_train runs):
  LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 OMP_WAIT_POLICY=passive \
      /usr/bin/python3 bench/torch_train.py --threads 2
Default set-up: /usr/bin/python3 bench/torch_train.py   (torch's own thread count)
GPU (what bench_train_cuda runs):
  python3 bench/torch_train.py --device cuda --dtype bf16 --compile both --config G,P
"""
import argparse
import contextlib
import gc
import json
import math
import resource
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    "S": dict(C=128, L=4, H=4, T=256, B=8, V=50257, F=4),
    "M": dict(C=384, L=6, H=6, T=512, B=4, V=50257, F=4),
    "G": dict(C=768, L=12, H=12, T=1024, B=8, V=50257, F=4),
    "P": dict(C=510, L=12, H=6, T=768, B=32, V=50257, F=2),
}
DEFAULT_STEPS = {"S": 10, "M": 5}


class Block(nn.Module):
    def __init__(self, C, H, T, ff=4, sdpa=False):
        super().__init__()
        self.H = H
        self.sdpa = sdpa
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, ff * C)
        self.fc_proj = nn.Linear(ff * C, C)
        if not sdpa:
            mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
            self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        H, D = self.H, C // self.H
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, H, D).transpose(1, 2)
        k = k.view(B, T, H, D).transpose(1, 2)
        v = v.view(B, T, H, D).transpose(1, 2)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            att = att.masked_fill(self.mask[:T, :T], float("-inf"))
            att = F.softmax(att, dim=-1)
            y = torch.matmul(att, v)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        x = x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return x


class LM(nn.Module):
    def __init__(self, C, L, H, T, V, ff=4, sdpa=False):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList([Block(C, H, T, ff, sdpa) for _ in range(L)])
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


def median(v):
    s = sorted(v)
    return s[len(s) // 2] if len(s) % 2 else 0.5 * (s[len(s) // 2 - 1] + s[len(s) // 2])


def run(name, c, steps, warmup, foreach):
    """The CPU benchmark (unchanged)."""
    torch.manual_seed(0)
    model = LM(c["C"], c["L"], c["H"], c["T"], c["V"], c.get("F", 4))
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
    med = median(times)
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


def run_cuda(name, c, steps, warmup, foreach, dtype, mode):
    """The GPU benchmark: SDPA attention, autocast bf16 (or tf32 / fp32), CUDA events."""
    dev = "cuda"
    torch.set_float32_matmul_precision("high" if dtype == "tf32" else "highest")
    torch.backends.cudnn.allow_tf32 = dtype == "tf32"
    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats()
    model = LM(c["C"], c["L"], c["H"], c["T"], c["V"], c.get("F", 4), sdpa=True).to(dev)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}]
    hyper = dict(lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    adamw = "fused"
    if foreach is None:
        try:
            opt = torch.optim.AdamW(groups, fused=True, **hyper)
        except (TypeError, RuntimeError, ValueError):
            opt = torch.optim.AdamW(groups, **hyper)
            adamw = "default"
    else:
        opt = torch.optim.AdamW(groups, foreach=foreach, **hyper)
        adamw = "foreach" if foreach else "for-loop"
    fwd = torch.compile(model) if mode == "compile" else model
    B, T, V = c["B"], c["T"], c["V"]
    g = torch.Generator(device=dev).manual_seed(1)
    batches = []
    for _ in range(4):
        d = torch.randint(0, V, (B, T + 1), device=dev, generator=g)
        batches.append((d[:, :T].contiguous(), d[:, 1:].contiguous()))
    amp = (lambda: torch.autocast(device_type="cuda", dtype=torch.bfloat16)) if dtype == "bf16" \
        else contextlib.nullcontext
    nparams = sum(p.numel() for p in model.parameters())
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    times, tf, tb, to = [], [], [], []
    torch.cuda.synchronize()
    w0 = time.perf_counter()
    warmup_s = 0.0
    for i in range(warmup + steps):
        x, y = batches[i % len(batches)]
        ev[0].record()
        opt.zero_grad(set_to_none=True)
        with amp():
            loss = fwd(x, y)
        ev[1].record()
        loss.backward()
        ev[2].record()
        opt.step()
        ev[3].record()
        torch.cuda.synchronize()
        if i == warmup - 1 or (warmup == 0 and i == 0):
            warmup_s = time.perf_counter() - w0
        if i >= warmup:
            times.append(ev[0].elapsed_time(ev[3]) * 1e-3)
            tf.append(ev[0].elapsed_time(ev[1]))
            tb.append(ev[1].elapsed_time(ev[2]))
            to.append(ev[2].elapsed_time(ev[3]))
    lv = loss.item()
    if not math.isfinite(lv):
        raise RuntimeError("non-finite loss")
    med = median(times)
    return {
        "config": name,
        "mode": mode,
        "device": "cuda",
        "dtype": dtype,
        "tok_per_s": B * T / med,
        "tok_per_s_best": B * T / min(times),
        "step_ms": [round(1e3 * t, 3) for t in times],
        "fwd_ms": round(median(tf), 3),
        "bwd_ms": round(median(tb), 3),
        "opt_ms": round(median(to), 3),
        "warmup_s": round(warmup_s, 2),
        "params": nparams,
        "peak_mem_mb": round(torch.cuda.max_memory_allocated() / 1048576.0, 1),
        "loss": round(lv, 4),
        "attn": "sdpa",
        "adamw": adamw,
        "shape": {k: c[k] for k in ("C", "L", "H", "T", "B", "V", "F")},
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
    }


def parse_shape(s):
    try:
        name, vals = s.split("=", 1)
        v = [int(x) for x in vals.split(",")]
        if len(v) != 7 or min(v) <= 0 or v[0] % v[2]:
            raise ValueError
    except ValueError:
        raise SystemExit("torch_train: --shape wants NAME=C,L,H,T,B,V,F (positive, C %% H == 0): %r" % s)
    return name, dict(zip(("C", "L", "H", "T", "B", "V", "F"), v))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="all",
                    help="S, M, G, P, a comma list, or all (default: S,M on the CPU, G,P on the GPU)")
    ap.add_argument("--shape", action="append", default=[], metavar="NAME=C,L,H,T,B,V,F",
                    help="replace or add a config's shape (repeatable)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads(N); 0 keeps torch's default")
    ap.add_argument("--steps", type=int, default=0, help="timed steps (default S 10, M 5, others 10)")
    ap.add_argument("--warmup", type=int, default=-1, help="untimed steps first (CPU 2, GPU 3)")
    ap.add_argument("--foreach", choices=["default", "on", "off"], default="default",
                    help="AdamW foreach implementation (torch's default; on the GPU default means fused)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cpu (default: the fp32 benchmark, unchanged) or cuda")
    ap.add_argument("--dtype", choices=["fp32", "tf32", "bf16"], default=None,
                    help="GPU arithmetic: bf16 autocast (default on cuda), tf32 or fp32; the CPU runs fp32")
    ap.add_argument("--compile", nargs="?", const="on", default="off", choices=["off", "on", "both"],
                    help="torch.compile the model (cuda only): on, or both (eager then compiled)")
    a = ap.parse_args()
    for s in a.shape:
        n, c = parse_shape(s)
        CONFIGS[n] = c
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    foreach = {"default": None, "on": True, "off": False}[a.foreach]
    cuda = a.device == "cuda"
    dtype = a.dtype or ("bf16" if cuda else "fp32")
    if not cuda and (dtype != "fp32" or a.compile != "off"):
        raise SystemExit("torch_train: --dtype other than fp32 and --compile need --device cuda")
    if cuda and not torch.cuda.is_available():
        raise SystemExit("torch_train: --device cuda but torch %s sees no usable GPU" % torch.__version__)
    if a.config == "all":
        names = ["G", "P"] if cuda else ["S", "M"]
    else:
        names = a.config.split(",")
    for n in names:
        if n not in CONFIGS:
            raise SystemExit("torch_train: unknown config %r (%s)" % (n, ", ".join(sorted(CONFIGS))))
    warmup = a.warmup if a.warmup >= 0 else (3 if cuda else 2)
    if not cuda:
        for n in names:
            steps = a.steps or DEFAULT_STEPS.get(n, 10)
            print(json.dumps(run(n, CONFIGS[n], steps, warmup, foreach)), flush=True)
        return
    modes = {"off": ["eager"], "on": ["compile"], "both": ["eager", "compile"]}[a.compile]
    failed = 0
    for mode in modes:  # every eager run first: the cheap figures come before any compilation
        for n in names:
            steps = a.steps or DEFAULT_STEPS.get(n, 10)
            try:
                res = run_cuda(n, CONFIGS[n], steps, warmup, foreach, dtype, mode)
            except Exception as e:  # report and go on with the next run
                traceback.print_exc(file=sys.stderr)
                msg = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
                res = {"config": n, "mode": mode, "error": "%s: %s" % (type(e).__name__, msg)}
                failed += 1
            print(json.dumps(res), flush=True)
            gc.collect()
            torch.cuda.empty_cache()
            if mode == "compile":
                torch._dynamo.reset()
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
