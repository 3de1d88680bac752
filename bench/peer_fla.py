"""FLA peer for bench/bench_gdelta_cuda.cu (GPU machines only; never imported by tests).

Times flash-linear-attention's chunk_gated_delta_rule (the fla-core wheel; tools/fetch_peers.sh
downloads it into .whl/, tools/gpu_check.sh puts it on PYTHONPATH) forward + backward on the
same device, in the same run as our kernels.

usage: python3 bench/peer_fla.py DTYPE B:T:H:D [B:T:H:D ...]
  DTYPE  bf16 | fp32   q, k, v, beta and the output gradient in this dtype; the log-gates
                       g in fp32 (as FLA's GatedDeltaNet layer feeds them)
  B:T:H:D              one shape per argument, FLA's layout (B, T, H, D), Dk = Dv = D
The problem is the one bench_gdelta_cuda times: log-gates log(U(0.9, 1)), beta U(0.1, 0.9),
q, k, v U(-1, 1), q and k L2-normalised inside (use_qk_l2norm_in_kernel, our
cfg.normalize_qk), scale 1/sqrt(D) (the bench sets cfg.scale to match), no initial state,
chunk 64 (FLA's fixed chunk). Forward + backward with grads to q, k, v, g, beta; timed with
CUDA events, best of 10 after 3 warm-ups (the first calls also run Triton's compile and
autotune, outside the timing).

Prints, one line per shape (the C bench parses these):
  peer_ms B T H D <fwd+bwd ms> <fwd ms>
and at the start `peer_info fla-core <version> torch <version> triton <version> <device>
backend <triton | flash_qla-if-eligible>` (FLA runs its FlashQLA backend on sm_90 only when
the flash_qla package is importable; the GPU image has none, so its Triton kernels run).
When it cannot run it prints `peer_missing <why>` (one line) and exits 3; a bad argument
prints usage and exits 2. Nothing is printed on stdout but these lines."""
import os
import sys


def usage(msg):
    sys.stderr.write("peer_fla.py: %s\n%s" % (msg, __doc__))
    sys.exit(2)


def parse(argv):
    if len(argv) < 2:
        usage("need DTYPE and at least one B:T:H:D")
    if argv[0] not in ("bf16", "fp32"):
        usage("DTYPE must be bf16 or fp32, got %r" % argv[0])
    shapes = []
    for a in argv[1:]:
        p = a.split(":")
        try:
            s = tuple(int(x) for x in p)
        except ValueError:
            s = ()
        if len(s) != 4 or min(s) < 1:
            usage("bad shape %r (want B:T:H:D, positive integers)" % a)
        shapes.append(s)
    return argv[0], shapes


def missing(why):
    print("peer_missing %s" % " ".join(str(why).split())[:300])
    sys.stdout.flush()
    sys.exit(3)


def main(argv):
    dtname, shapes = parse(argv)
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means no peer
        missing("torch not importable: %s" % e)
    if not torch.cuda.is_available():
        missing("torch sees no CUDA device")
    try:
        import triton
        import fla
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    except Exception as e:  # noqa: BLE001
        missing("fla (fla-core wheel) not importable: %s: %s (run tools/fetch_peers.sh, carry .whl)"
                % (type(e).__name__, e))
    from importlib import metadata
    try:
        fv = metadata.version("fla-core")
    except Exception:  # noqa: BLE001
        fv = getattr(fla, "__version__", "?")
    import importlib.util
    # FLA dispatches chunk_gated_delta_rule to its FlashQLA (TileLang) backend on sm_90 when
    # the flash_qla package is importable and FLA_FLASH_QLA is not 0; else its Triton kernels
    qla = importlib.util.find_spec("flash_qla") is not None and os.environ.get("FLA_FLASH_QLA", "1") != "0"
    print("peer_info fla-core %s torch %s triton %s %s backend %s" % (
        fv, torch.__version__, triton.__version__, torch.cuda.get_device_name(0).replace(" ", "_"),
        "flash_qla-if-eligible" if qla else "triton"))
    sys.stdout.flush()
    dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtname]
    dev = "cuda"
    for (B, T, H, D) in shapes:
        gen = torch.Generator(device=dev).manual_seed(0)

        def u(shape, lo, hi, dtype):
            return (torch.rand(shape, device=dev, generator=gen, dtype=torch.float32) * (hi - lo) + lo).to(dtype)

        q = u((B, T, H, D), -1, 1, dt).requires_grad_()
        k = u((B, T, H, D), -1, 1, dt).requires_grad_()
        v = u((B, T, H, D), -1, 1, dt).requires_grad_()
        g = torch.log(u((B, T, H), 0.9, 1.0, torch.float32)).requires_grad_()
        beta = u((B, T, H), 0.1, 0.9, dt).requires_grad_()
        do = u((B, T, H, D), -1, 1, dt)
        scale = D ** -0.5

        def fwd():
            o, _ = chunk_gated_delta_rule(q, k, v, g, beta, scale=scale, initial_state=None,
                                          output_final_state=False, use_qk_l2norm_in_kernel=True)
            return o

        def step():
            for t in (q, k, v, g, beta):
                t.grad = None
            fwd().backward(do)

        try:
            for _ in range(3):
                step()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            missing("chunk_gated_delta_rule failed at B=%d T=%d H=%d D=%d %s: %s: %s"
                    % (B, T, H, D, dtname, type(e).__name__, e))
        best_fb = best_f = float("inf")
        for _ in range(10):
            a, m, b = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            for t in (q, k, v, g, beta):
                t.grad = None
            a.record()
            o = fwd()
            m.record()
            o.backward(do)
            b.record()
            torch.cuda.synchronize()
            best_fb = min(best_fb, a.elapsed_time(b))
            best_f = min(best_f, a.elapsed_time(m))
        print("peer_ms %d %d %d %d %.4f %.4f" % (B, T, H, D, best_fb, best_f))
        sys.stdout.flush()
        del q, k, v, g, beta, do
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
