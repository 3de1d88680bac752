/* sample.h - picking tokens from logits, and short continuations from the examples' model
   (issue 42): the sampling rule of examples/generate.c, shared with wt2_train --sample.
   Part of attnkit's examples/common; no globals.

   smp_pick: one token from logits (V): greedy (the lowest id among equal maxima) at
   temperature <= 0; else p_i ~ exp((l_i - max l) / temp), sorted by p (ties: lower id
   first), cut to the top k (k > 0) and then to the smallest prefix whose mass reaches
   top_p of what is left (top_p < 1), and drawn with u ~ U[0,1) from the splitmix64 stream
   *rng. -1 when a logit is not finite. scratch: V entries.
   smp_continue: up to max_new tokens after prompt[0..n) on the model, on its device (model.h's
   token-by-token decoding: on a device model the decode runs there and each step's logits
   come to the host for smp_pick; what the device decode refuses, mdl_decode_supports_on,
   fails with its reason), one slot, a window of the model's context when it has a prior,
   else n + max_new capped at max_T), stopping after eot (eot itself is kept; eot < 0: never)
   or when the window is full. out gets the new tokens (*nout of them, <= max_new). The
   decoding state is freed before it returns (mdl_decode_free): the model is left as it was.
   Errors: 0, or a negative MDL_* code with a sentence in err (the model's refusal, a
   prompt longer than the context, out of memory). License: MIT. */
#ifndef ATTNKIT_SAMPLE_H
#define ATTNKIT_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct smp_cand {
    float p;
    int id;
} smp_cand;

uint64_t smp_rng_next(uint64_t *state);     /* splitmix64 */
double smp_uniform(uint64_t *state);        /* [0, 1), 53 bits */
int smp_pick(const float *logits, int V, double temp, int top_k, double top_p, uint64_t *rng, smp_cand *scratch);
int smp_continue(mdl_model *m, const int *prompt, int n, int max_new, double temp, int top_k, double top_p,
                 uint64_t seed, int eot, int *out, int *nout, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* ATTNKIT_SAMPLE_H */
