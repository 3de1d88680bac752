"""PyTorch SDPA peer for bench/bench_attn_cuda.cu (GPU machines only; never imported by tests).

usage: python3 bench/peer_sdpa.py B H T D mode dtype
  mode  flash : causal SDPA, no mask (the flash backend, FA2)
        mask  : SDPA given a (T,T) float additive mask (causal folded in as -inf), what a
                PyTorch user writes for a prior; SDPA then leaves the flash backend
  dtype bf16 | fp32
Prints one line: `peer_ms <forward+backward milliseconds, best of 10 after 3 warm-ups>`."""
import sys
import torch
import torch.nn.functional as F

B, H, T, D = (int(x) for x in sys.argv[1:5])
mode, dt = sys.argv[5], {"bf16": torch.bfloat16, "fp32": torch.float32}[sys.argv[6]]
dev = "cuda"
g = torch.Generator(device=dev).manual_seed(0)
q, k, v = (torch.randn(B, H, T, D, device=dev, dtype=dt, generator=g, requires_grad=True) for _ in range(3))
do = torch.randn(B, H, T, D, device=dev, dtype=dt, generator=g)
mask = None
if mode == "mask":
    bias = torch.randn(T, T, device=dev, dtype=dt, generator=g) * 0.5
    mask = bias.masked_fill(torch.ones(T, T, device=dev, dtype=torch.bool).triu(1), float("-inf"))


def step():
    if mask is None:
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    o.backward(do)


for _ in range(3):
    step()
torch.cuda.synchronize()
best = float("inf")
for _ in range(10):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    step()
    b.record()
    torch.cuda.synchronize()
    best = min(best, a.elapsed_time(b))
print("peer_ms %.4f" % best)
