"""PyTorch SDPA peer for bench/bench_attn_cuda.cu (GPU machines only; never imported by tests).

usage: python3 bench/peer_sdpa.py B H T D mode dtype
  mode  flash : causal SDPA without a mask, held to the flash backend (FA2) through
                torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION)
        mask  : SDPA given a (T,T) additive float mask in the inputs' dtype with the causal
                mask folded in as -inf, broadcast over B and H, its gradient wanted (a learned
                prior, as bench_attn_cuda's dbias): what a PyTorch user writes for a prior;
                SDPA picks its backend (the flash one takes no float mask). When this torch
                cannot give the mask a gradient, the mask is timed without one and a
                peer_info line says so.
  dtype bf16 | fp32 (q, k, v, the mask and dO)
Prints `peer_info ...` lines and one `peer_ms <forward+backward milliseconds, best of 10 after
3 warm-ups>` (torch 2.x with CUDA; written for the GPU image's torch 2.11)."""
import sys

import torch
import torch.nn.functional as F

B, H, T, D = (int(x) for x in sys.argv[1:5])
mode, dt = sys.argv[5], {"bf16": torch.bfloat16, "fp32": torch.float32}[sys.argv[6]]
dev = "cuda"
g = torch.Generator(device=dev).manual_seed(0)
q, k, v = (torch.randn(B, H, T, D, device=dev, dtype=dt, generator=g).requires_grad_(True) for _ in range(3))
do = torch.randn(B, H, T, D, device=dev, dtype=dt, generator=g)
mask = None
if mode == "mask":
    bias = torch.randn(T, T, device=dev, dtype=torch.float32, generator=g) * 0.5
    causal = torch.ones(T, T, device=dev, dtype=torch.bool).triu(1)
    mask = bias.masked_fill(causal, float("-inf")).to(dt).requires_grad_(True)
elif mode != "flash":
    sys.exit("mode must be flash or mask")


def step():
    if mask is None:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    o.backward(do)


try:
    step()
except RuntimeError as e:
    if mask is None or not mask.requires_grad:
        raise
    print("peer_info the mask's gradient is not supported here (%s): timed without it" % str(e).splitlines()[0])
    mask = mask.detach()
print("peer_info torch %s, %s, dtype %s, mode %s, mask grad %s" % (
    torch.__version__, torch.cuda.get_device_name(), sys.argv[6], mode, mask is not None and mask.requires_grad))
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
