/* generate.c - text from a wt2_train checkpoint, token by token (model.h mdl_decode_*,
   issue 42).

     build/generate --ckpt runs/wt2/ckpt.safetensors --prompt "The history of"

   Loads the checkpoint (its architecture from the "attnkit.config" metadata, as mcqa does),
   the GPT-2 tokenizer (--data-dir, else $WT2_DIR, else the compiled-in ../shared/data:
   <dir>/gpt2/encoder.json and vocab.bpe), encodes each --prompt (several prompts are decoded
   together as a batch, one cache slot each), prefills, then samples one token per live
   prompt per step: temperature (0: greedy), top-k, top-p (nucleus), from one random stream
   per prompt seeded by --seed (the same flags give the same text, whatever the batch or
   thread count). A prompt stops at <|endoftext|>, after --max-new tokens, or when the
   model's context (max_T) is full.
   Output: one prompt: its text, then each new token's text as it is produced (stdout,
   flushed per token); several prompts: each prompt's text and continuation as a block
   "[i] ..." when it finishes. --json: nothing else on stdout but one JSON line at the end
   (per prompt: tokens, text, stop reason; per step: milliseconds; a summary).
   Every architecture wt2_train builds decodes (model.h mdl_decode_supports: softmax
   attention with or without a prior, polar attention, the gated-delta memory, the
   convolution; one refusal, the value gate beyond 256 heads, named with the reason); a
   run without an RPA prior whose guardian / scripted
   controller set per-layer temperatures (kept in the trainer's state, not restored here;
   with the RPA prior they are its tau_att parameters, restored with the weights).
   With a prior (RPA, ERA, sinusoid, relative) the decoding window is the model's context
   max_T whatever --max-new says: every token at position t gets row t of B(max_T), what an
   evaluation forward of max_T tokens gives it (model.h, "Priors"), RPA's built from the
   checkpoint's running statistics (state.prior_stats) at full strength (a checkpoint
   saved during the prior's warm-in evaluates with a weaker prior in wt2_train).
   --device cuda (the GPU build, `make build/cuda/generate`): the checkpoint is loaded into
   a host model and moved to a device model of the same architecture, which decodes
   (model.h, "On a device"; what the device model does not build is refused with the
   reason). The device decode is checked only in the CUDA simulation
   (tests/parity_model.cu's decoding cases); this program has never run on a GPU.
   Exit status: 0 generated; 1 an input (checkpoint, tokenizer, prompt) or the model failed;
   2 a bad flag or value. Writes no files.
   License: MIT. */
#define _POSIX_C_SOURCE 200809L
#include "common/bpe.h"
#include "common/ckpt.h"
#include "common/exio.h"
#include "common/mcqa.h"
#include "common/model.h"
#include "common/sample.h"
#include "common/train.h"
#include "common/ckptcfg.h"
#include "tensor.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef ATTNKIT_DATA_DIR
#define ATTNKIT_DATA_DIR "../shared/data"
#endif

#define MAX_PROMPTS 64

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: generate --ckpt PATH --prompt TEXT [--prompt TEXT ...] [options]\n\n"
            "Samples a continuation of each prompt from a wt2_train checkpoint, token by token\n"
            "(a key/value cache; several prompts are one batch).\n\n"
            "  --ckpt PATH        wt2_train checkpoint (e.g. runs/wt2/ckpt.safetensors)\n"
            "  --prompt TEXT      prompt (repeatable, at most %d; not empty)\n"
            "  --max-new N        new tokens per prompt, 0..1048576 (default 64; the model's\n"
            "                     context max_T bounds prompt + continuation)\n"
            "  --temperature T    sampling temperature, 0..100 (default 0.8; 0: greedy)\n"
            "  --top-k K          sample among the K most likely tokens, 0..1048576 (default 40;\n"
            "                     0: all)\n"
            "  --top-p P          nucleus: the smallest set of tokens with probability >= P,\n"
            "                     (0, 1] (default 0.95; 1: off)\n"
            "  --seed S           random seed, 0..2^63-1 (default 1)\n"
            "  --weights W        auto|raw|ema|swa (default auto: the EMA weights when the checkpoint\n"
            "                     keeps them, as wt2_train evaluates, else raw; a run whose SWA-select\n"
            "                     averaged weights evaluates those: --weights swa); ema / swa on a\n"
            "                     checkpoint without them is refused\n"
            "  --threads N        OpenMP threads, 0..1024 (0: default)\n"
            "  --device D         cpu|cuda (default cpu): cuda decodes on the GPU (the GPU build,\n"
            "                     build/cuda/generate; what it refuses is listed below)\n"
            "  --data-dir DIR     the GPT-2 tokenizer's directory's parent (DIR/gpt2/encoder.json,\n"
            "                     vocab.bpe; default $WT2_DIR, else %s)\n"
            "  --json             one JSON line on stdout at the end (texts, per-step timings,\n"
            "                     summary) instead of the text\n"
            "  --help             this text\n\n"
            "Supported architectures: softmax attention with or without a prior (RPA, ERA,\n"
            "sinusoid, relative: the window is the model's context), polar attention, the\n"
            "gated-delta memory, the causal convolution, learned or rotary positions,\n"
            "LayerNorm/RMSNorm, GELU / squared-ReLU MLP or fuzzy MoE, residual and value gates\n"
            "(every preset); refused:",
            MAX_PROMPTS, ATTNKIT_DATA_DIR);
    {
        int i;
        for (i = 0; mdl_decode_limit(i); i++) fprintf(f, "%s %s", i ? ";" : "", mdl_decode_limit(i));
        for (i = 0; mdl_decode_device_limit(i); i++)
            fprintf(f, "%s%s", i ? "; " : ";\nwith --device cuda also ", mdl_decode_device_limit(i));
        fprintf(f, ";\nwith --device cuda, what the device model does not build (mdl_device_supports)");
    }
    fprintf(f, ".\n\nExit status: 0 generated; 1 an input or the model failed; 2 a bad flag or value.\n");
}

/* JSON string of len bytes: escapes, and U+FFFD for each byte of an ill-formed UTF-8
   sequence (a token may end inside a character) */
static void json_bytes(FILE *f, const unsigned char *s, size_t len)
{
    size_t i = 0;
    fputc('"', f);
    while (i < len) {
        unsigned c = s[i];
        size_t k, need = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : 9;
        if (c < 0x80) {
            if (c == '"' || c == '\\') fprintf(f, "\\%c", (int)c);
            else if (c == '\n') fputs("\\n", f);
            else if (c == '\t') fputs("\\t", f);
            else if (c == '\r') fputs("\\r", f);
            else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
            else fputc((int)c, f);
            i++;
            continue;
        }
        {
            int ok = need <= 3 && need < len - i; /* the lead byte and need more fit */
            uint32_t cp = 0;
            for (k = 1; ok && k <= need; k++)
                if ((s[i + k] & 0xC0) != 0x80) ok = 0;
            if (ok) {
                cp = need == 1 ? (c & 0x1F) : need == 2 ? (c & 0x0F) : (c & 0x07);
                for (k = 1; k <= need; k++) cp = (cp << 6) | (s[i + k] & 0x3F);
                if ((need == 1 && cp < 0x80) || (need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000) ||
                    cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                    ok = 0;
            }
            if (ok) {
                fwrite(s + i, 1, need + 1, f);
                i += need + 1;
            } else {
                fputs("\\ufffd", f);
                i++;
            }
        }
    }
    fputc('"', f);
}

typedef struct {
    const char *text;
    bpe_ids ids;            /* prompt, then the generated tokens */
    int nprompt, ngen, live;
    const char *stop;       /* "eot", "max_new", "context" */
    uint64_t rng;
} seqst;

int main(int argc, char **argv)
{
    const char *ckpt_path = NULL, *prompts[MAX_PROMPTS], *wname = "auto", *env;
    int np = 0, max_new = 64, topk = 40, threads = 0, json = 0, i, rc = 1, eot, V, maxT, steps = 0;
    int device = MDL_DEVICE_CPU;
    long long seed = 1;
    double temp = 0.8, topp = 0.95, t_load, t_pre = 0.0, t_dec = 0.0;
    char dir[1024], err[1024], path[1200];
    ckpt_file *ck = NULL;
    trn_config cfg;
    mdl_model *m = NULL;
    bpe_tokenizer *tok = NULL;
    seqst sq[MAX_PROMPTS];
    float *lg = NULL;
    smp_cand *cd = NULL;
    double *step_ms = NULL;
    size_t cache = 0;
    long long ntok_gen = 0;

    ex_wait_policy(argv);
    memset(sq, 0, sizeof sq);
    dir[0] = 0;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        const char *want = "";
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        if (!strcmp(a, "--json")) { json = 1; continue; }
        if (!v) { fprintf(stderr, "generate: unknown option or missing value: '%s' (see --help)\n", a); return 2; }
        if (!strcmp(a, "--ckpt")) ckpt_path = v;
        else if (!strcmp(a, "--prompt")) {
            if (np == MAX_PROMPTS) { fprintf(stderr, "generate: at most %d prompts\n", MAX_PROMPTS); return 2; }
            prompts[np++] = v;
        } else if (!strcmp(a, "--max-new")) { bad = ex_parse_int(v, 0, 1 << 20, &max_new); want = "an integer 0..1048576"; }
        else if (!strcmp(a, "--temperature")) { bad = ex_parse_double(v, 0.0, 100.0, &temp); want = "a number in [0, 100]"; }
        else if (!strcmp(a, "--top-k")) { bad = ex_parse_int(v, 0, 1 << 20, &topk); want = "an integer 0..1048576"; }
        else if (!strcmp(a, "--top-p")) {
            bad = ex_parse_double(v, 0.0, 1.0, &topp) || !(topp > 0.0);
            want = "a number in (0, 1]";
        } else if (!strcmp(a, "--seed")) { bad = ex_parse_ll(v, 0, 0x7FFFFFFFFFFFFFFFLL, &seed); want = "an integer >= 0"; }
        else if (!strcmp(a, "--threads")) { bad = ex_parse_int(v, 0, 1024, &threads); want = "an integer 0..1024"; }
        else if (!strcmp(a, "--weights")) {
            wname = v;
            bad = strcmp(v, "auto") && strcmp(v, "raw") && strcmp(v, "ema") && strcmp(v, "swa");
            want = "auto, raw, ema or swa";
        } else if (!strcmp(a, "--device")) {
            bad = strcmp(v, "cpu") && strcmp(v, "cuda");
            device = strcmp(v, "cuda") ? MDL_DEVICE_CPU : MDL_DEVICE_CUDA;
            want = "cpu or cuda";
        } else if (!strcmp(a, "--data-dir")) {
            bad = strlen(v) >= sizeof dir - 32 || !*v;
            if (!bad) snprintf(dir, sizeof dir, "%s", v);
            want = "a directory path";
        } else { fprintf(stderr, "generate: unknown option '%s' (see --help)\n", a); return 2; }
        if (bad) { fprintf(stderr, "generate: bad value for %s: '%s' (%s)\n", a, v, want); return 2; }
        i++;
    }
    if (!ckpt_path || np == 0) {
        fprintf(stderr, "generate: %s is required (see --help)\n", !ckpt_path ? "--ckpt PATH" : "--prompt TEXT");
        return 2;
    }
    for (i = 0; i < np; i++)
        if (!prompts[i][0]) { fprintf(stderr, "generate: --prompt %d is empty (nothing to continue)\n", i + 1); return 2; }
#ifdef _OPENMP
    if (threads > 0) omp_set_num_threads(threads);
#endif
    if (device == MDL_DEVICE_CUDA) {
        /* before any file is read or written: say what is missing, with the runtime's words */
        char why[512];
        const int cu = ex_cuda_probe(why, sizeof why);
        if (cu == EX_CUDA_NOT_BUILT) {
            fprintf(stderr, "generate: --device cuda: this binary was built without CUDA; build the GPU generate "
                            "with nvcc (`make build/cuda/generate`) and run build/cuda/generate\n");
            return 2;
        }
        if (cu != EX_CUDA_USABLE) {
            fprintf(stderr, "generate: --device cuda: no usable CUDA device found (CUDA build; the CUDA runtime says: "
                            "%s)\n", why[0] ? why : "cudaGetDeviceCount reports 0 devices");
            return 2;
        }
    }
    if (!dir[0]) snprintf(dir, sizeof dir, "%s", (env = getenv("WT2_DIR")) && *env ? env : ATTNKIT_DATA_DIR);
    t_load = now_s();

    /* the checkpoint: architecture first (a refused one fails before any weight is read) */
    if (ex_check_input(ckpt_path, err, sizeof err)) { fprintf(stderr, "generate: --ckpt: %s\n", err); goto out; }
    if (ckpt_open(&ck, ckpt_path, err, sizeof err) != CKPT_OK) { fprintf(stderr, "generate: %s\n", err); goto out; }
    if (ex_config_from_ckpt(ck, &cfg, "generate", err, sizeof err) != 0) { fprintf(stderr, "generate: %s: %s\n", ckpt_path, err); goto out; }
    if (mdl_decode_supports_on(&cfg.model, device, err, sizeof err) != MDL_OK ||
        (device == MDL_DEVICE_CUDA && mdl_device_supports(&cfg.model, err, sizeof err) != MDL_OK)) {
        fprintf(stderr, "generate: %s: %s\n", ckpt_path, err);
        goto out;
    }
    if ((cfg.controller == TRN_CTRL_GUARDIAN || cfg.controller == TRN_CTRL_SCRIPTED) &&
        cfg.model.prior != MDL_PRIOR_RPA) {
        /* without a tau_att tensor (the RPA prior's) these controllers set per-layer
           attention temperatures kept in the trainer's state, not restored here */
        fprintf(stderr, "generate: %s: a run with the %s controller and no attention prior evaluates with the "
                        "controller's per-layer temperatures, which generate does not restore yet\n", ckpt_path,
                cfg.controller == TRN_CTRL_GUARDIAN ? "guardian" : "scripted");
        goto out;
    }
    if (mdl_create(&m, &cfg.model, 1, err, sizeof err) != MDL_OK) { fprintf(stderr, "generate: %s: %s\n", ckpt_path, err); goto out; }
    {
        float *P = mdl_params(m);
        int nt = mdl_num_tensors(m), k, d;
        int64_t sh[4];
        for (k = 0; k < nt; k++) {
            const mdl_tensor *te = mdl_tensor_at(m, k);
            for (d = 0; d < 4; d++) sh[d] = d < te->ndim ? te->shape[d] : 0;
            if (ckpt_read_into(ck, te->name, CKPT_F32, te->ndim, sh, P + te->offset, err, sizeof err) != CKPT_OK) {
                fprintf(stderr, "generate: %s: %s\n", ckpt_path, err);
                goto out;
            }
        }
        if (!strcmp(wname, "auto")) {
            ckpt_entry e;
            wname = ckpt_find(ck, "optim.ema", &e) == CKPT_OK ? "ema" : "raw";
        }
        if (strcmp(wname, "raw")) {
            const char *nm = !strcmp(wname, "ema") ? "optim.ema" : "optim.swa";
            ckpt_entry e;
            sh[0] = (int64_t)mdl_num_params(m);
            if (ckpt_find(ck, nm, &e) != CKPT_OK) {
                fprintf(stderr, "generate: --weights %s: %s has no %s weights (%s)\n", wname, ckpt_path, wname, nm);
                goto out;
            }
            if (ckpt_read_into(ck, nm, CKPT_F32, 1, sh, P, err, sizeof err) != CKPT_OK) {
                fprintf(stderr, "generate: %s: %s\n", ckpt_path, err);
                goto out;
            }
        }
        if (cfg.maxent_pi) {
            /* --maxent-pi: the GELU gains a_l the run ended with (model state, not weights) */
            float g[MDL_MAX_LAYERS];
            sh[0] = cfg.model.n_layers;
            if (ckpt_read_into(ck, "state.act_gain", CKPT_F32, 1, sh, g, err, sizeof err) != CKPT_OK) {
                fprintf(stderr, "generate: %s: %s\n", ckpt_path, err);
                goto out;
            }
            if (mdl_act_gain_set(m, g, cfg.model.n_layers) != MDL_OK) {
                fprintf(stderr, "generate: %s: %s\n", ckpt_path, mdl_last_error(m));
                goto out;
            }
        }
        for (k = 0; k < (int)(mdl_num_params(m) > 0x7FFFFFFF ? 0x7FFFFFFF : mdl_num_params(m)); k++)
            if (!isfinite(P[k])) {
                fprintf(stderr, "generate: %s: the %s weights hold non-finite values (parameter %d)\n", ckpt_path, wname, k);
                goto out;
            }
    }
    if (cfg.model.prior == MDL_PRIOR_RPA) {
        /* the running statistics the cached prior is built from, as the trainer saved them */
        size_t n = 0;
        int64_t sh[1];
        ckpt_entry e;
        float *ps;
        (void)mdl_prior_stats(m, &n);
        if (ckpt_find(ck, "state.prior_stats", &e) != CKPT_OK) {
            fprintf(stderr, "generate: %s: an RPA model without its running statistics (state.prior_stats): its "
                            "prior cannot be rebuilt\n", ckpt_path);
            goto out;
        }
        ps = (float *)malloc(sizeof(float) * (n ? n : 1));
        sh[0] = (int64_t)n;
        if (!ps) { fprintf(stderr, "generate: out of memory\n"); goto out; }
        if (ckpt_read_into(ck, "state.prior_stats", CKPT_F32, 1, sh, ps, err, sizeof err) != CKPT_OK) {
            fprintf(stderr, "generate: %s: %s\n", ckpt_path, err);
            free(ps);
            goto out;
        }
        if (mdl_prior_stats_set(m, ps, n) != MDL_OK) {
            fprintf(stderr, "generate: %s: state.prior_stats: %s\n", ckpt_path, mdl_last_error(m));
            free(ps);
            goto out;
        }
        free(ps);
    }
    if (device == MDL_DEVICE_CUDA) {
        /* the loaded model (weights, gains, running statistics) onto the device: a device
           model of the same architecture takes the host model's parameters and state */
        mdl_model *md = NULL;
        float g[MDL_MAX_LAYERS];
        size_t n = 0;
        const float *ps = mdl_prior_stats(m, &n);
        if (mdl_create_on(&md, &cfg.model, 1, MDL_DEVICE_CUDA, err, sizeof err) != MDL_OK) {
            fprintf(stderr, "generate: --device cuda: %s\n", err);
            goto out;
        }
        if (tk_copy(mdl_params(md), mdl_params(m), sizeof(float) * mdl_num_params(m)) != TK_OK ||
            (cfg.maxent_pi && (mdl_act_gain_get(m, g, cfg.model.n_layers) != MDL_OK ||
                               mdl_act_gain_set(md, g, cfg.model.n_layers) != MDL_OK)) ||
            (cfg.model.prior == MDL_PRIOR_RPA && ps && mdl_prior_stats_set(md, ps, n) != MDL_OK)) {
            fprintf(stderr, "generate: --device cuda: moving the model to the device failed (%s)\n", mdl_last_error(md));
            mdl_destroy(md);
            goto out;
        }
        mdl_destroy(m);
        m = md;
    }
    V = cfg.model.vocab;
    maxT = cfg.model.max_T;

    /* the tokenizer and the prompts */
    snprintf(path, sizeof path, "%s/gpt2", dir);
    if (bpe_load_dir(&tok, path, err, sizeof err) != BPE_OK) {
        fprintf(stderr, "generate: %s\n  (the GPT-2 vocabulary, %s/encoder.json and vocab.bpe: point --data-dir or "
                        "WT2_DIR at the data; README, section \"Data\", says where to get it)\n", err, path);
        goto out;
    }
    eot = bpe_eot(tok);
    if (bpe_vocab_size(tok) < V) V = bpe_vocab_size(tok); /* sample only ids the tokenizer can print */
    for (i = 0; i < np; i++) {
        size_t k;
        sq[i].text = prompts[i];
        if (bpe_encode(tok, prompts[i], strlen(prompts[i]), &sq[i].ids) != BPE_OK) {
            fprintf(stderr, "generate: cannot encode --prompt %d (out of memory)\n", i + 1);
            goto out;
        }
        for (k = 0; k < sq[i].ids.n; k++)
            if (sq[i].ids.data[k] >= V) {
                fprintf(stderr, "generate: --prompt %d: token %d is outside the model's vocabulary (%d)\n", i + 1,
                        (int)sq[i].ids.data[k], V);
                goto out;
            }
        if ((long long)sq[i].ids.n > maxT) {
            fprintf(stderr, "generate: --prompt %d is %zu tokens; the model's context is %d tokens\n", i + 1,
                    sq[i].ids.n, maxT);
            goto out;
        }
        sq[i].nprompt = (int)sq[i].ids.n;
        sq[i].live = 1;
        sq[i].rng = (uint64_t)seed * 0x100000001B3ULL + (uint64_t)i * 0x9E3779B97F4A7C15ULL + 1;
    }
    {
        int ml = 0;
        for (i = 0; i < np; i++) {
            long long want = (long long)sq[i].nprompt + max_new;
            if (want > ml) ml = want > maxT ? maxT : (int)want;
        }
        if (cfg.model.prior != MDL_PRIOR_NONE) ml = maxT; /* the window of B(T): the model's context */
        if (mdl_decode_init(m, np, ml, &cache) != MDL_OK) { fprintf(stderr, "generate: %s\n", mdl_last_error(m)); goto out; }
    }
    if (cfg.controller == TRN_CTRL_CEAS) {
        /* per-head temperatures from CEAS's beta, as wt2_train's evaluation uses them */
        ckpt_entry e;
        ceas_state cs;
        ceas_config cc = ceas_config_default();
        static float temps[MDL_MAX_LAYERS * 256];
        int L = cfg.model.n_layers, H = cfg.model.n_heads, D = cfg.model.d_model / cfg.model.n_heads, k;
        memset(&cs, 0, sizeof cs);
        if (L * H > MDL_MAX_LAYERS * 256 || ckpt_find(ck, "state.ceas", &e) != CKPT_OK || e.dtype != CKPT_U8 ||
            ceas_init(&cs, &cc, L, H, D) != CEAS_OK) {
            fprintf(stderr, "generate: %s: the checkpoint has no usable CEAS state\n", ckpt_path);
            goto out;
        }
        if (ceas_state_load(&cs, e.data, (size_t)e.shape[0]) != CEAS_OK) {
            ceas_free(&cs);
            fprintf(stderr, "generate: %s: the checkpoint's CEAS state is corrupted\n", ckpt_path);
            goto out;
        }
        for (k = 0; k < L * H; k++) temps[k] = ceas_beta_to_temp(cs.beta[k], D);
        ceas_free(&cs);
        if (mdl_decode_set_temp(m, temps, 1.0f) != MDL_OK) { fprintf(stderr, "generate: %s\n", mdl_last_error(m)); goto out; }
    }
    ckpt_close(ck);
    ck = NULL;
    lg = (float *)malloc(sizeof(float) * (size_t)np * (size_t)cfg.model.vocab);
    cd = (smp_cand *)malloc(sizeof(smp_cand) * (size_t)cfg.model.vocab);
    step_ms = (double *)malloc(sizeof(double) * ((size_t)max_new + 1));
    if (!lg || !cd || !step_ms) { fprintf(stderr, "generate: out of memory\n"); goto out; }
    t_load = now_s() - t_load;
    fprintf(stderr, "generate: %s: %zu parameters, %s weights, context %d, %d prompt%s, K/V cache %.2f MB\n", ckpt_path,
            mdl_num_params(m), wname, maxT, np, np > 1 ? "s" : "", (double)cache / 1e6);

    /* prefill, then one step per new token of every live prompt */
    {
        double t0 = now_s();
        for (i = 0; i < np; i++) {
            if (mdl_decode_prefill(m, i, sq[i].ids.data, sq[i].nprompt, lg + (size_t)i * cfg.model.vocab, 0) != MDL_OK) {
                fprintf(stderr, "generate: prompt %d: %s\n", i + 1, mdl_last_error(m));
                goto out;
            }
        }
        t_pre = now_s() - t0;
    }
    if (!json && np == 1) {
        fputs(sq[0].text, stdout);
        fflush(stdout);
    }
    for (;;) {
        int slots[MAX_PROMPTS], toks[MAX_PROMPTS], ns = 0;
        double t0;
        /* sample from the last logits of each live prompt */
        for (i = 0; i < np; i++) {
            int id;
            if (!sq[i].live) continue;
            if (sq[i].ngen >= max_new) { sq[i].live = 0; sq[i].stop = "max_new"; }
            else if ((int)sq[i].ids.n >= maxT) { sq[i].live = 0; sq[i].stop = "context"; }
            if (!sq[i].live) continue;
            id = smp_pick(lg + (size_t)i * cfg.model.vocab, V, temp, topk, topp, &sq[i].rng, cd);
            if (id < 0) {
                fprintf(stderr, "generate: prompt %d: the model's logits are not finite\n", i + 1);
                goto out;
            }
            sq[i].ngen++;
            ntok_gen++;
            if (id == eot) { sq[i].live = 0; sq[i].stop = "eot"; continue; }
            if (bpe_ids_push(&sq[i].ids, id) != BPE_OK) { fprintf(stderr, "generate: out of memory\n"); goto out; }
            if (!json && np == 1) {
                size_t len = 0;
                const unsigned char *b = bpe_token_bytes(tok, id, &len);
                if (b && len) fwrite(b, 1, len, stdout);
                fflush(stdout);
            }
            if (sq[i].ngen >= max_new) { sq[i].live = 0; sq[i].stop = "max_new"; continue; }
            if ((int)sq[i].ids.n >= maxT) { sq[i].live = 0; sq[i].stop = "context"; continue; }
            slots[ns] = i;
            toks[ns] = id;
            ns++;
        }
        if (!json && np > 1)
            for (i = 0; i < np; i++)
                if (!sq[i].live && sq[i].stop && sq[i].ngen >= 0 && sq[i].nprompt >= 0 && sq[i].text) {
                    bpe_bytes out = {0};
                    if (bpe_decode(tok, sq[i].ids.data, sq[i].ids.n, &out) != BPE_OK) {
                        fprintf(stderr, "generate: out of memory\n");
                        goto out;
                    }
                    printf("[%d] ", i + 1);
                    fwrite(out.data, 1, out.n, stdout);
                    printf("\n");
                    fflush(stdout);
                    bpe_bytes_free(&out);
                    sq[i].text = NULL; /* printed */
                }
        if (ns == 0) break;
        t0 = now_s();
        if (mdl_decode_step(m, slots, toks, ns, lg) != MDL_OK) {
            fprintf(stderr, "generate: %s\n", mdl_last_error(m));
            goto out;
        }
        /* the step's logits are in slot order of slots[]: move them to their prompts */
        for (i = ns - 1; i >= 0; i--)
            if (slots[i] != i)
                memcpy(lg + (size_t)slots[i] * cfg.model.vocab, lg + (size_t)i * cfg.model.vocab,
                       sizeof(float) * (size_t)cfg.model.vocab);
        step_ms[steps++] = 1e3 * (now_s() - t0);
        t_dec += now_s() - t0;
    }
    if (!json && np == 1) {
        printf("\n");
        fflush(stdout);
    }
    if (json) {
        char nb[64];
        printf("{\"ckpt\":");
        json_bytes(stdout, (const unsigned char *)ckpt_path, strlen(ckpt_path));
        printf(",\"weights\":\"%s\",\"seed\":%lld,\"temperature\":%s", wname, seed, trn_json_gnum(nb, sizeof nb, 6, temp));
        printf(",\"top_k\":%d,\"top_p\":%s,\"max_new\":%d,\"context\":%d,\"cache_bytes\":%zu", topk,
               trn_json_gnum(nb, sizeof nb, 6, topp), max_new, maxT, cache);
        printf(",\"prompts\":[");
        for (i = 0; i < np; i++) {
            bpe_bytes out = {0};
            size_t k;
            if (bpe_decode(tok, sq[i].ids.data + sq[i].nprompt, sq[i].ids.n - (size_t)sq[i].nprompt, &out) != BPE_OK) {
                fprintf(stderr, "generate: out of memory\n");
                goto out;
            }
            printf("%s{\"prompt\":", i ? "," : "");
            json_bytes(stdout, (const unsigned char *)prompts[i], strlen(prompts[i]));
            printf(",\"prompt_tokens\":%d,\"generated\":%d,\"stop\":\"%s\",\"text\":", sq[i].nprompt, sq[i].ngen,
                   sq[i].stop ? sq[i].stop : "max_new");
            json_bytes(stdout, out.data ? out.data : (const unsigned char *)"", out.n);
            printf(",\"tokens\":[");
            for (k = (size_t)sq[i].nprompt; k < sq[i].ids.n; k++)
                printf("%s%d", k > (size_t)sq[i].nprompt ? "," : "", (int)sq[i].ids.data[k]);
            printf("]}");
            bpe_bytes_free(&out);
        }
        printf("],\"step_ms\":[");
        for (i = 0; i < steps; i++) printf("%s%s", i ? "," : "", trn_json_num(nb, sizeof nb, 4, step_ms[i]));
        printf("],\"load_s\":%s", trn_json_num(nb, sizeof nb, 4, t_load));
        printf(",\"prefill_ms\":%s", trn_json_num(nb, sizeof nb, 4, 1e3 * t_pre));
        printf(",\"decode_s\":%s,\"steps\":%d,\"new_tokens\":%lld", trn_json_num(nb, sizeof nb, 4, t_dec), steps,
               ntok_gen);
        printf(",\"tokens_per_s\":%s}\n", trn_json_num(nb, sizeof nb, 2, t_dec > 0 ? (double)ntok_gen / t_dec : 0.0));
        if (fflush(stdout) != 0 || ferror(stdout)) { fprintf(stderr, "generate: cannot write stdout\n"); goto out; }
    }
    fprintf(stderr, "generate: %lld new tokens in %d steps, %.1f ms prefill, %.1f tokens/s\n", ntok_gen, steps,
            1e3 * t_pre, t_dec > 0 ? (double)ntok_gen / t_dec : 0.0);
    if (fflush(stdout) != 0 || ferror(stdout)) { fprintf(stderr, "generate: cannot write stdout\n"); goto out; }
    rc = 0;
out:
    for (i = 0; i < np; i++) bpe_ids_free(&sq[i].ids);
    free(lg);
    free(cd);
    free(step_ms);
    bpe_free(tok);
    mdl_destroy(m);
    ckpt_close(ck);
    return rc;
}
