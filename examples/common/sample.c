/* sample.c - see sample.h. */
#include "sample.h"
#include "errf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t smp_rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

double smp_uniform(uint64_t *s) { return (double)(smp_rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }

static int smp__cmp(const void *a, const void *b)
{
    const smp_cand *x = (const smp_cand *)a, *y = (const smp_cand *)b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return x->id - y->id; /* ties: the lower id first (deterministic) */
}

int smp_pick(const float *lg, int V, double temp, int topk, double topp, uint64_t *rng, smp_cand *cd)
{
    int i, n = V, best = 0;
    double mx, sum = 0.0, u, acc = 0.0;
    if (!lg || V < 1 || !rng || !cd) return -1;
    for (i = 0; i < V; i++)
        if (!isfinite(lg[i])) return -1;
    for (i = 1; i < V; i++)
        if (lg[i] > lg[best]) best = i;
    if (temp <= 0.0) return best;
    mx = lg[best];
    for (i = 0; i < V; i++) {
        cd[i].id = i;
        cd[i].p = (float)exp(((double)lg[i] - mx) / temp);
    }
    qsort(cd, (size_t)V, sizeof *cd, smp__cmp);
    if (topk > 0 && topk < n) n = topk;
    for (i = 0; i < n; i++) sum += cd[i].p;
    if (topp < 1.0) {
        double c = 0.0;
        int k;
        for (k = 0; k < n; k++) {
            c += cd[k].p;
            if (c >= topp * sum) {
                n = k + 1;
                break;
            }
        }
        sum = 0.0;
        for (i = 0; i < n; i++) sum += cd[i].p;
    }
    u = smp_uniform(rng) * sum;
    for (i = 0; i < n; i++) {
        acc += cd[i].p;
        if (u < acc) return cd[i].id;
    }
    return cd[n - 1].id;
}

int smp_continue(mdl_model *m, const int *prompt, int n, int max_new, double temp, int topk, double topp,
                 uint64_t seed, int eot, int *out, int *nout, char *err, size_t errlen)
{
    const mdl_config *c;
    float *lg = NULL;
    smp_cand *cd = NULL;
    uint64_t rng = seed;
    int W, k = 0, rc = MDL_OK, tok;
    if (nout) *nout = 0;
    if (!m || !prompt || n < 1 || max_new < 0 || !out || !nout || !(temp == temp) || !(topp > 0.0 && topp <= 1.0) ||
        topk < 0)
        return ex_errf(err, errlen, MDL_EINVAL, "smp_continue: invalid argument");
    c = mdl_get_config(m);
    if (n > c->max_T)
        return ex_errf(err, errlen, MDL_EINVAL, "smp_continue: the prompt (%d tokens) is longer than the context %d", n,
                       c->max_T);
    if (max_new == 0) return MDL_OK;
    W = c->prior != MDL_PRIOR_NONE ? c->max_T : (n + max_new < c->max_T ? n + max_new : c->max_T);
    if (mdl_decode_init(m, 1, W, NULL) != MDL_OK)
        return ex_errf(err, errlen, MDL_EINVAL, "%s", mdl_last_error(m));
    lg = (float *)malloc(sizeof(float) * (size_t)c->vocab);
    cd = (smp_cand *)malloc(sizeof(smp_cand) * (size_t)c->vocab);
    if (!lg || !cd) {
        rc = ex_errf(err, errlen, MDL_ENOMEM, "smp_continue: out of memory");
        goto out;
    }
    if (mdl_decode_prefill(m, 0, prompt, n, lg, 0) != MDL_OK) {
        rc = ex_errf(err, errlen, MDL_EFAIL, "%s", mdl_last_error(m));
        goto out;
    }
    for (;;) {
        int slot = 0;
        tok = smp_pick(lg, c->vocab, temp, topk, topp, &rng, cd);
        if (tok < 0) {
            rc = ex_errf(err, errlen, MDL_EFAIL, "smp_continue: the model's logits are not finite");
            goto out;
        }
        out[k++] = tok;
        if (tok == eot || k == max_new || mdl_decode_len(m, 0) >= W) break;
        if (mdl_decode_step(m, &slot, &tok, 1, lg) != MDL_OK) {
            rc = ex_errf(err, errlen, MDL_EFAIL, "%s", mdl_last_error(m));
            goto out;
        }
    }
out:
    *nout = k;
    mdl_decode_free(m);
    free(lg);
    free(cd);
    return rc;
}
