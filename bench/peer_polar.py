"""Peers for bench/bench_polar_cuda.cu (GPU machines only; never imported by tests).

Times a peer's attention forward + backward on the same device, in the same run as our
polar kernels, at the shapes the C bench passes.

usage: python3 bench/peer_polar.py PEER DTYPE B:H:HKV:T:D [B:H:HKV:T:D ...]
  PEER  sdpa : PyTorch scaled_dot_product_attention, causal, restricted to the flash
               backend (sdpa_kernel(SDPBackend.FLASH_ATTENTION): FA2; it raises rather than
               fall back to another backend). GQA through enable_gqa=True (K/V stay HKV
               heads, nothing repeated); if this torch refuses that, K/V are repeated to H
               heads once outside the timing, and peer_info says gqa=repeated.
        atma : kreasof-ai/atma's Triton polar kernel (kernel/polar_triton.py,
               polar_attention(): forward kernel, PyTorch row preamble + two Triton
               backward kernels). Not part of this repository: tools/fetch_peers.sh atma
               copies it into peers/ (git-ignored), and the device call carries peers/.
               This driver imports it from $PYTHONPATH or, failing that, <repo>/peers.
               Its kernels take K/V with H heads ("GQA KV-heads already expanded"): the
               headline time (peer_ms) has K/V repeated to H heads once outside the
               timing (kernel against kernel); peer_ms_gqa times the repeat_interleave of
               HKV-head K/V and its backward (the group sum) inside the step, as atma's
               model pays it. Its module imports atma's model.blocks (a diagnostic probe,
               off by default) inside the forward: a stub with the probe off stands in.
  DTYPE bf16 | fp32   q, k, v and the output gradients (sdpa: bf16 only; the flash backend
               has no fp32). atma's per-head parameters are fp32 (as ours).
  B:H:HKV:T:D  one shape per argument, layout (B, H, T, D), HKV dividing H.
The problem matches bench_polar_cuda's: q, k, v U(-1, 1), output gradients U(-0.5, 0.5);
atma: len_gain_raw = null_base = null_slope_raw = mag_beta_raw = 0, v_null U(-0.1, 0.1),
n_keys = 1..T (full causal), grads wanted for q, k, v and every parameter. Timed with CUDA
events, best of 10 after 3 warm-ups (the first calls also run Triton's compile, untimed).

Prints, one line per shape (the C bench parses these):
  peer_ms B H HKV T D <fwd+bwd ms> <fwd ms>
  peer_ms_gqa B H HKV T D <fwd+bwd ms> <fwd ms>      (atma only)
and first `peer_info <peer> <details> torch <version> [triton <version>] <device>`.
When it cannot run it prints `peer_missing <why>` (one line) and exits 3; a bad argument
prints usage and exits 2. Nothing else goes to stdout."""
import os
import sys
import types


def usage(msg):
    sys.stderr.write("peer_polar.py: %s\n%s" % (msg, __doc__))
    sys.exit(2)


def parse(argv):
    if len(argv) < 3:
        usage("need PEER, DTYPE and at least one B:H:HKV:T:D")
    peer, dtname = argv[0], argv[1]
    if peer not in ("sdpa", "atma"):
        usage("PEER must be sdpa or atma, got %r" % peer)
    if dtname not in ("bf16", "fp32") or (peer == "sdpa" and dtname != "bf16"):
        usage("DTYPE must be bf16 (sdpa) or bf16 / fp32 (atma), got %r" % dtname)
    shapes = []
    for a in argv[2:]:
        p = a.split(":")
        try:
            s = tuple(int(x) for x in p)
        except ValueError:
            s = ()
        if len(s) != 5 or min(s) < 1 or s[1] % s[2] != 0:
            usage("bad shape %r (want B:H:HKV:T:D, positive integers, HKV dividing H)" % a)
        shapes.append(s)
    return peer, dtname, shapes


def missing(why):
    print("peer_missing %s" % " ".join(str(why).split())[:300])
    sys.stdout.flush()
    sys.exit(3)


def best_of(torch, fwd, bwd, zero, n=10):
    """best fwd+bwd and fwd milliseconds of n timed steps (zero() runs outside the timing)"""
    best_fb = best_f = float("inf")
    for _ in range(n):
        zero()
        a, m, b = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        a.record()
        out = fwd()
        m.record()
        bwd(out)
        b.record()
        torch.cuda.synchronize()
        best_fb = min(best_fb, a.elapsed_time(b))
        best_f = min(best_f, a.elapsed_time(m))
    return best_fb, best_f


def load_atma():
    """import atma's polar_triton (from sys.path, else <repo>/peers); returns (module, commit)"""
    peers = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "peers")
    if os.path.isdir(peers) and peers not in sys.path:
        sys.path.append(peers)
    # polar_triton's forward runs `from model import blocks` for an off-by-default probe;
    # atma's model package is not carried, so a stub with the probe off stands in
    if "model" not in sys.modules:
        blocks = types.ModuleType("model.blocks")
        blocks._PROBE = None
        blocks._probe_emit = lambda *a, **k: None
        model = types.ModuleType("model")
        model.blocks = blocks
        sys.modules["model"] = model
        sys.modules["model.blocks"] = blocks
    try:
        import polar_triton
    except Exception as e:  # noqa: BLE001 - any import failure means no peer
        missing("atma's polar_triton not importable: %s: %s (run tools/fetch_peers.sh atma on the "
                "session machine and carry peers/)" % (type(e).__name__, e))
    if not getattr(polar_triton, "HAS_TRITON", False):
        missing("atma's polar_triton reports no Triton/CUDA (HAS_TRITON false)")
    commit = "?"
    cpath = os.path.join(os.path.dirname(os.path.abspath(polar_triton.__file__)), "polar_triton.commit")
    if os.path.exists(cpath):
        commit = open(cpath).read().strip()[:12] or "?"
    return polar_triton, commit


def main(argv):
    peer, dtname, shapes = parse(argv)
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001
        missing("torch not importable: %s" % e)
    if not torch.cuda.is_available():
        missing("torch sees no CUDA device")
    dev = "cuda"
    dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtname]
    devname = torch.cuda.get_device_name(0).replace(" ", "_")
    if peer == "sdpa":
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
        except Exception as e:  # noqa: BLE001
            missing("torch.nn.attention.sdpa_kernel not available: %s" % e)
        gqa_native = True
        info_done = False
    else:
        pt, commit = load_atma()
        import triton
        print("peer_info atma polar_triton@%s torch %s triton %s %s"
              % (commit, torch.__version__, triton.__version__, devname))
        sys.stdout.flush()

    for (B, H, HKV, T, D) in shapes:
        G = H // HKV
        gen = torch.Generator(device=dev).manual_seed(0)

        def u(shape, lo, hi, dtype=dt):
            return (torch.rand(shape, device=dev, generator=gen, dtype=torch.float32) * (hi - lo) + lo).to(dtype)

        q = u((B, H, T, D), -1, 1).requires_grad_()
        kg = u((B, HKV, T, D), -1, 1).requires_grad_()
        vg = u((B, HKV, T, D), -1, 1).requires_grad_()
        # K/V repeated to H heads once, outside any timing (query head h reads kv head h // G)
        kx = kg.detach().repeat_interleave(G, dim=1).requires_grad_()
        vx = vg.detach().repeat_interleave(G, dim=1).requires_grad_()
        what = "B=%d H=%d HKV=%d T=%d D=%d %s" % (B, H, HKV, T, D, dtname)

        if peer == "sdpa":
            do = u((B, H, T, D), -0.5, 0.5)
            leaves = (q, kg, vg, kx, vx)

            def zero():
                for t in leaves:
                    t.grad = None

            def fwd_native():
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    return F.scaled_dot_product_attention(q, kg, vg, is_causal=True, enable_gqa=True)

            def fwd_repeated():
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    return F.scaled_dot_product_attention(q, kx, vx, is_causal=True)

            def bwd(o):
                o.backward(do)

            fwd = fwd_native if gqa_native else fwd_repeated
            try:
                for _ in range(3):
                    zero()
                    bwd(fwd())
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                if not gqa_native:
                    missing("SDPA flash failed at %s: %s: %s" % (what, type(e).__name__, e))
                # this torch's flash backend refused enable_gqa: repeat K/V outside the timing
                sys.stderr.write("peer_polar.py: SDPA flash with enable_gqa failed (%s: %s); "
                                 "K/V repeated to H heads instead\n" % (type(e).__name__, e))
                gqa_native = False
                fwd = fwd_repeated
                try:
                    for _ in range(3):
                        zero()
                        bwd(fwd())
                    torch.cuda.synchronize()
                except Exception as e2:  # noqa: BLE001
                    missing("SDPA flash failed at %s: %s: %s" % (what, type(e2).__name__, e2))
            if not info_done:
                print("peer_info sdpa flash(FA2) gqa=%s torch %s %s"
                      % ("enable_gqa" if gqa_native else "repeated", torch.__version__, devname))
                info_done = True
            fb, f = best_of(torch, fwd, bwd, zero)
            print("peer_ms %d %d %d %d %d %.4f %.4f" % (B, H, HKV, T, D, fb, f))
            sys.stdout.flush()
            del q, kg, vg, kx, vx, do
        else:
            def par(shape, lo, hi):
                return u(shape, lo, hi, torch.float32).requires_grad_()

            prm = dict(v_null=par((H, D), -0.1, 0.1),
                       null_base=par((H,), 0, 0), null_slope_raw=par((H,), 0, 0),
                       len_gain_raw=par((H,), 0, 0), mag_beta_raw=par((H,), 0, 0))
            n_keys = torch.arange(1, T + 1, device=dev, dtype=torch.float32)
            gc = u((B, H, T, D), -0.5, 0.5)
            gm = u((B, H, T), -0.5, 0.5)
            leaves = (q, kg, vg, kx, vx) + tuple(prm.values())

            def zero():
                for t in leaves:
                    t.grad = None

            def fwd_expanded():
                return pt.polar_attention(q, kx, vx, n_keys, is_causal=True, **prm)

            def fwd_gqa():
                return pt.polar_attention(q, kg.repeat_interleave(G, dim=1), vg.repeat_interleave(G, dim=1),
                                          n_keys, is_causal=True, **prm)

            def bwd(out):
                torch.autograd.backward(out, (gc, gm))

            try:
                for fwd in (fwd_expanded, fwd_gqa):
                    for _ in range(3):
                        zero()
                        bwd(fwd())
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                missing("atma polar_attention failed at %s: %s: %s" % (what, type(e).__name__, e))
            fb, f = best_of(torch, fwd_expanded, bwd, zero)
            print("peer_ms %d %d %d %d %d %.4f %.4f" % (B, H, HKV, T, D, fb, f))
            fb, f = best_of(torch, fwd_gqa, bwd, zero)
            print("peer_ms_gqa %d %d %d %d %d %.4f %.4f" % (B, H, HKV, T, D, fb, f))
            sys.stdout.flush()
            del q, kg, vg, kx, vx, gc, gm, prm, n_keys
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
