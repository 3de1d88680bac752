/* tools/rpa_saturation.c - does the RPA prior saturate era.h's exp(S/tau_align) clamp at long
   contexts? Reads a wt2_train checkpoint's running memberships (state.prior_stats) and
   prints, per layer and T in {128, 256, 512, 768}, the clamp share, the bias std before
   the z-score and the Sinkhorn marginal error (docs/RESULTS.md, issue 18).
   Build: gcc -std=c99 -O1 -I. -isystem /usr/include/stb tools/rpa_saturation.c -o rpa_saturation -lm -llzma
   Run:   ./rpa_saturation runs/wt2/ckpt.safetensors   (a tiny-preset checkpoint: 4 layers, R 4, max_T 128)
   RPA prior at longer T from a trained tiny model's running memberships: the first 128
   rows from the checkpoint, rows beyond repeat the mean of rows 64..127 (the context
   game trains <= 128); tau_align 0.7, K = R = 4, posmix 0.1 (the tiny preset's; tau_att does not enter
   these diagnostics). */
#define STB_DS_IMPLEMENTATION
#include <stb_ds.h>
#undef STB_DS_IMPLEMENTATION
#include "examples/common/impl.c"
#include "examples/common/ckpt.c"
#include <stdio.h>
int main(int argc, char **argv)
{
    ckpt_file *f = NULL; ckpt_entry e; char err[256];
    int Ts[4] = {128, 256, 512, 768}, l, i, t, r, L = 4, R = 4, MT = 128;
    const float *ps;
    if (argc < 2 || ckpt_open(&f, argv[1], err, sizeof err)) { printf("open: %s\n", err); return 1; }
    if (ckpt_find(f, "state.prior_stats", &e) || e.dtype != CKPT_F32 || e.ndim != 1 ||
        e.shape[0] != (int64_t)L * MT * R + MT) {
        printf("no state.prior_stats of a tiny-preset model (4 layers, R 4, max_T 128) in %s\n", argv[1]);
        ckpt_close(f);
        return 1;
    }
    ps = (const float *)e.data;
    for (l = 0; l < L; l++) {
        printf("layer %d mean memberships rows 64..127:", l);
        for (r = 0; r < R; r++) { double s = 0; for (t = 64; t < 128; t++) s += ps[(l * MT + t) * R + r]; printf(" %.3f", s / 64); }
        printf("\n");
        for (i = 0; i < 4; i++) {
            int T = Ts[i];
            float *mb = (float *)malloc(sizeof(float) * T * R);
            era_rpa_config c = era_rpa_config_default(R);
            era_rpa_params p = era_rpa_params_default();
            era_rpa_state st = era_rpa_state_init();
            c.K = R; c.tau_align = 0.7f; c.posmix = 0.1f; p.tau_att = 0.68f;
            for (t = 0; t < T; t++)
                for (r = 0; r < R; r++) {
                    double s = 0; int u;
                    if (t < MT) { mb[t * R + r] = ps[(l * MT + t) * R + r]; continue; }
                    for (u = 64; u < 128; u++) s += ps[(l * MT + u) * R + r];
                    mb[t * R + r] = (float)(s / 64);
                }
            if (era_rpa_forward(&c, &p, mb, 1, T, NULL, &st, NULL)) { printf("fwd fail\n"); return 1; }
            printf("  T %4d: clamp share %.3f  std before z-score %.4g  Sinkhorn marginal error %.3g\n", T,
                   st.clamp_frac, st.std_pre, st.marginal_err);
            era_rpa_state_free(&st); free(mb);
        }
    }
    ckpt_close(f);
    return 0;
}
