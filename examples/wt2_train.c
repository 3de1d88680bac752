/* wt2_train - train a small language model on WikiText-2 with any attnkit mechanism.

     build/wt2_train                      # the tiny preset (what `make run` does)
     build/wt2_train --preset paper       # seed 000 §7 (d 510, 12 layers, context 768, ...)
     build/wt2_train --preset tiny --prior none --controller none --swa 0 --cg 0
     build/wt2_train --attn polar --memory gdelta --max-steps 100 --json
     build/wt2_train --resume runs/wt2/ckpt.safetensors   # continue bit-exactly
     build/wt2_train --help               # every option with its current default

   Data: --data-dir, else $WT2_DIR, else the directory compiled in (ATTNKIT_DATA_DIR,
   ../shared/data). With the three WikiText-2 splits it trains on train, evaluates on
   validation during and after training and reports test at the end. Without the train
   split (../shared/data has only validation and test) it trains on validation minus a
   held-out tail (--holdout), evaluates on that tail during training and reports test at the
   end: the output says so.

   Output (--out-dir, default runs/wt2): metrics.jsonl (one JSON object per log step and
   per evaluation), loss.png (training CE and evaluation CE against steps),
   ckpt.safetensors (weights, optimizer, RNG, data-loader and controller state; written
   atomically every --ckpt-every steps, at the end and on Ctrl-C). Progress goes to stderr;
   with --json one line of results goes to stdout at the end.
   License: MIT. */
#define _POSIX_C_SOURCE 200809L
#include "common/data.h"
#include "common/model.h"
#include "common/plot.h"
#include "common/train.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef ATTNKIT_DATA_DIR
#define ATTNKIT_DATA_DIR "../shared/data"
#endif

static volatile sig_atomic_t g_stop = 0;
static void on_sigint(int sig)
{
    (void)sig;
    g_stop = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int mkdirs(const char *path)
{
    char buf[TRN_PATH_MAX];
    size_t i, n = strlen(path);
    if (n == 0 || n >= sizeof buf) return -1;
    memcpy(buf, path, n + 1);
    for (i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
            buf[i] = c;
        }
    }
    return 0;
}

static void usage(const trn_config *c, FILE *f)
{
    fprintf(f,
            "usage: wt2_train [--preset tiny|paper|baseline|tiny-baseline] [--json]\n"
            "                 [--resume PATH] [options]\n\n"
            "Trains a decoder-only LM on WikiText-2 (GPT-2 BPE) with the attnkit mechanisms\n"
            "and reports validation / test cross-entropy and perplexity.\n\n"
            "  --preset NAME      start from a preset (default tiny); later flags override it\n"
            "  --json             print one JSON line of results on stdout at the end\n"
            "  --resume PATH      continue a run from its checkpoint (same options)\n"
            "  --help             this text\n\n"
            "Options (defaults shown are those of preset '%s'):\n",
            c->preset);
    trn_print_help(c, f);
}

/* Read back metrics.jsonl for the loss plot (covers resumed runs too). */
static void plot_metrics(const char *dir)
{
    char path[TRN_PATH_MAX + 32], line[2048];
    double *tx = NULL, *ty = NULL, *vx = NULL, *vy = NULL;
    size_t nt = 0, nv = 0, ct = 0, cv = 0;
    FILE *f;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        const char *s = strstr(line, "\"step\":");
        const char *c;
        int train = strstr(line, "\"type\":\"train\"") != NULL;
        int eval = strstr(line, "\"type\":\"eval\"") != NULL;
        double x, y;
        if (!s || (!train && !eval)) continue;
        c = strstr(line, train ? "\"ce\":" : "\"val_ce\":");
        if (!c) continue;
        x = atof(s + 7);
        y = atof(c + (train ? 5 : 9));
        if (train) {
            if (nt == ct) {
                size_t nc = ct ? 2 * ct : 256;
                double *a = (double *)realloc(tx, nc * sizeof *a), *b;
                if (!a) break;
                tx = a;
                b = (double *)realloc(ty, nc * sizeof *b);
                if (!b) break;
                ty = b;
                ct = nc;
            }
            tx[nt] = x;
            ty[nt++] = y;
        } else {
            if (nv == cv) {
                size_t nc = cv ? 2 * cv : 64;
                double *a = (double *)realloc(vx, nc * sizeof *a), *b;
                if (!a) break;
                vx = a;
                b = (double *)realloc(vy, nc * sizeof *b);
                if (!b) break;
                vy = b;
                cv = nc;
            }
            vx[nv] = x;
            vy[nv++] = y;
        }
    }
    fclose(f);
    if (nt + nv > 0) {
        plot_series s[2];
        int ns = 0;
        if (nt) { s[ns].label = "train CE"; s[ns].x = tx; s[ns].y = ty; s[ns].n = (int)nt; ns++; }
        if (nv) { s[ns].label = "eval CE"; s[ns].x = vx; s[ns].y = vy; s[ns].n = (int)nv; ns++; }
        snprintf(path, sizeof path, "%s/loss.png", dir);
        if (plot_lines_png(path, 900, 540, "wt2_train: cross-entropy", "step", "CE (nats)", s, ns, 0) != 0)
            fprintf(stderr, "wt2_train: could not write %s\n", path);
    }
    free(tx);
    free(ty);
    free(vx);
    free(vy);
}

int main(int argc, char **argv)
{
    trn_config cfg;
    const char *preset = "tiny", *resume = NULL, *env;
    int json = 0, i, rc, train_split, eval_split, have_full;
    char err[1024], msg[512], dir[TRN_PATH_MAX], path[TRN_PATH_MAX + 64];
    wt2_inventory inv;
    wt2_tokens tok_train, tok_eval, tok_test;
    const uint16_t *train_ids, *val_ids;
    size_t n_train, n_val;
    trn *t = NULL;
    FILE *metrics = NULL;
    double t0, t_train = 0, val_ce, test_ce = NAN;
    long long val_tok = 0, test_tok = 0, steps0, limit, tokens = 0;
    int used, wsel;

    memset(&tok_train, 0, sizeof tok_train);
    memset(&tok_eval, 0, sizeof tok_eval);
    memset(&tok_test, 0, sizeof tok_test);
    /* pass 1: the preset, so that later flags override it whatever their order */
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--preset") && i + 1 < argc) preset = argv[++i];
        else if (!strncmp(argv[i], "--preset=", 9)) preset = argv[i] + 9;
    }
    if (trn_preset(preset, &cfg) != TRN_OK) {
        fprintf(stderr, "wt2_train: unknown preset '%s' (tiny, paper, baseline, tiny-baseline)\n", preset);
        return 2;
    }
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(&cfg, stdout); return 0; }
        if (!strcmp(a, "--preset")) { i++; continue; }
        if (!strncmp(a, "--preset=", 9)) continue;
        if (!strcmp(a, "--json")) { json = 1; continue; }
        if (!strcmp(a, "--resume")) {
            if (i + 1 >= argc) { fprintf(stderr, "wt2_train: --resume needs a path\n"); return 2; }
            resume = argv[++i];
            continue;
        }
        if (!strncmp(a, "--resume=", 9)) { resume = a + 9; continue; }
        rc = trn_parse_flag(&cfg, argc, argv, i, err, sizeof err);
        if (rc < 0) { fprintf(stderr, "wt2_train: %s\n", err); return 2; }
        if (rc == 0) {
            fprintf(stderr, "wt2_train: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        i += rc - 1;
    }
    if (trn_config_validate(&cfg, err, sizeof err) != TRN_OK) {
        fprintf(stderr, "wt2_train: %s\n", err);
        return 2;
    }
#ifdef _OPENMP
    if (cfg.threads > 0) omp_set_num_threads(cfg.threads);
#endif

    /* data */
    if (cfg.data_dir[0]) snprintf(dir, sizeof dir, "%s", cfg.data_dir);
    else if ((env = getenv("WT2_DIR")) && *env) snprintf(dir, sizeof dir, "%s", env);
    else snprintf(dir, sizeof dir, "%s", ATTNKIT_DATA_DIR);
    if (wt2_scan(dir, &inv) <= 0) {
        fprintf(stderr, "wt2_train: no WikiText-2 data in '%s'.\n"
                        "  Point --data-dir or WT2_DIR at a WikiText-2 directory holding wt2.{valid,test}.gpt2.u16\n"
                        "  (or wiki.{train,valid,test}.raw[.xz] and gpt2/encoder.json + gpt2/vocab.bpe).\n", dir);
        return 1;
    }
    if (wt2_choose_splits(&inv, &train_split, &eval_split, msg, sizeof msg) != 0) {
        fprintf(stderr, "wt2_train: the data directory '%s' does not hold enough of WikiText-2:\n", dir);
        wt2_describe(&inv, dir, stderr);
        return 1;
    }
    have_full = train_split == WT2_TRAIN;
    if (wt2_load_split(dir, train_split, NULL, &tok_train, err, sizeof err) != 0 ||
        wt2_load_split(dir, have_full ? WT2_VALID : eval_split, NULL, &tok_test, err, sizeof err) != 0) {
        fprintf(stderr, "wt2_train: %s\n", err);
        wt2_tokens_free(&tok_train);
        wt2_tokens_free(&tok_test);
        return 1;
    }
    if (have_full) {
        /* standard protocol: train / validation (during and after) / test (at the end) */
        tok_eval = tok_test;
        memset(&tok_test, 0, sizeof tok_test);
        if (wt2_load_split(dir, WT2_TEST, NULL, &tok_test, err, sizeof err) != 0) {
            fprintf(stderr, "wt2_train: %s (test split: reported as NaN)\n", err);
            memset(&tok_test, 0, sizeof tok_test);
        }
        train_ids = tok_train.ids;
        n_train = tok_train.n;
        val_ids = tok_eval.ids;
        n_val = tok_eval.n;
        fprintf(stderr, "wt2_train: data %s: training on train (%zu tokens), validating on valid (%zu), testing on test (%zu)\n",
                dir, n_train, n_val, tok_test.n);
    } else {
        size_t cut = (size_t)((double)tok_train.n * (1.0 - (double)cfg.holdout));
        train_ids = tok_train.ids;
        n_train = cut;
        val_ids = tok_train.ids + cut;
        n_val = tok_train.n - cut;
        if (cfg.holdout <= 0) { val_ids = tok_test.ids; n_val = tok_test.n; }
        fprintf(stderr, "wt2_train: %s\n", msg);
        fprintf(stderr, "wt2_train: no train split in %s: training on the first %.0f%% of %s (%zu tokens), "
                        "evaluating during training on its last %.0f%% (%zu tokens), final test on %s (%zu tokens)\n",
                dir, 100.0 * (1.0 - cfg.holdout), wt2_split_name(train_split), n_train,
                100.0 * cfg.holdout, n_val, wt2_split_name(eval_split), tok_test.n);
    }

    if (mkdirs(cfg.out_dir) != 0) {
        fprintf(stderr, "wt2_train: cannot create the output directory '%s': %s\n", cfg.out_dir, strerror(errno));
        rc = 1;
        goto out;
    }
    rc = trn_create(&t, &cfg, train_ids, n_train, val_ids, n_val, err, sizeof err);
    if (rc != TRN_OK) {
        fprintf(stderr, "wt2_train: %s\n", err);
        rc = 1;
        goto out;
    }
    if (resume) {
        rc = trn_load(t, resume, err, sizeof err);
        if (rc != TRN_OK) {
            fprintf(stderr, "wt2_train: %s\n", err);
            rc = 1;
            goto out;
        }
        fprintf(stderr, "wt2_train: resumed from %s at step %lld\n", resume, trn_steps_done(t));
    }
    snprintf(path, sizeof path, "%s/metrics.jsonl", cfg.out_dir);
    metrics = fopen(path, resume ? "a" : "w");
    if (!metrics) fprintf(stderr, "wt2_train: cannot write %s: %s (continuing without metrics)\n", path, strerror(errno));
    trn_set_metrics(t, metrics);
    if (metrics) {
        char *js = (char *)malloc(16384);
        if (js && trn_config_json(&cfg, js, 16384) == TRN_OK)
            fprintf(metrics, "{\"type\":\"config\",\"step\":%lld,\"params\":%zu,\"config\":%s}\n",
                    trn_steps_done(t), mdl_num_params(trn_model(t)), js);
        free(js);
        fflush(metrics);
    }
    fprintf(stderr, "wt2_train: preset %s, %zu parameters, %lld steps (%lld per epoch), %d tokens/step%s\n",
            cfg.preset, mdl_num_params(trn_model(t)), trn_total_steps(t), trn_steps_per_epoch(t),
            cfg.batch * cfg.context, cfg.max_steps ? " (stopping early at --max-steps)" : "");

    signal(SIGINT, on_sigint);
    steps0 = trn_steps_done(t);
    limit = trn_total_steps(t);
    if (cfg.max_steps > 0 && cfg.max_steps < limit) limit = cfg.max_steps;
    t0 = now_s();
    {
        double last_print = 0, ema_loss = NAN;
        while (trn_steps_done(t) < limit && !g_stop) {
            trn_step_info in;
            double el;
            rc = trn_step(t, &in);
            if (rc != TRN_OK) {
                fprintf(stderr, "\nwt2_train: training step failed: %s\n", trn_strerror(rc));
                rc = 1;
                goto out;
            }
            tokens += (long long)in.T * in.B;
            ema_loss = isnan(ema_loss) ? in.ce : 0.9 * ema_loss + 0.1 * in.ce;
            el = now_s() - t0;
            if (el - last_print > 0.5 || trn_steps_done(t) == limit || in.evaluated) {
                double tps = tokens / (el > 0 ? el : 1e-9);
                double left = (double)(limit - trn_steps_done(t)) * (el / (double)(trn_steps_done(t) - steps0));
                int w = 24, k, fill = (int)((double)w * (double)trn_steps_done(t) / (double)limit);
                fprintf(stderr, "\r[");
                for (k = 0; k < w; k++) fputc(k < fill ? '#' : '.', stderr);
                fprintf(stderr, "] step %lld/%lld ce %.3f %.0f tok/s ETA %.0fs", trn_steps_done(t), limit,
                        ema_loss, tps, left);
                if (in.evaluated) fprintf(stderr, " | eval CE %.4f (PPL %.1f)\n", in.val_ce, exp(in.val_ce));
                last_print = el;
            }
            if (cfg.ckpt_every > 0 && trn_steps_done(t) % cfg.ckpt_every == 0) {
                snprintf(path, sizeof path, "%s/ckpt.safetensors", cfg.out_dir);
                if (trn_save(t, path, err, sizeof err) != TRN_OK) fprintf(stderr, "\nwt2_train: %s\n", err);
            }
        }
        fprintf(stderr, "\n");
    }
    t_train = now_s() - t0;
    snprintf(path, sizeof path, "%s/ckpt.safetensors", cfg.out_dir);
    if (trn_save(t, path, err, sizeof err) != TRN_OK) fprintf(stderr, "wt2_train: %s\n", err);
    else fprintf(stderr, "wt2_train: checkpoint %s (step %lld)\n", path, trn_steps_done(t));
    if (g_stop) {
        fprintf(stderr, "wt2_train: interrupted at step %lld; resume with --resume %s and the same options\n",
                trn_steps_done(t), path);
        plot_metrics(cfg.out_dir);
        rc = 130;
        goto out;
    }

    /* final evaluation: sequential, non-overlapping chunks of the training context */
    wsel = cfg.final_weights >= 0 ? cfg.final_weights : trn_final_weights(t);
    rc = trn_evaluate(t, val_ids, n_val, cfg.context, wsel, cfg.final_max_chunks, &val_ce, &val_tok, &used);
    if (rc == TRN_OK && tok_test.n > 1)
        rc = trn_evaluate(t, tok_test.ids, tok_test.n, cfg.context, wsel, cfg.final_max_chunks, &test_ce, &test_tok, &used);
    if (rc != TRN_OK) {
        fprintf(stderr, "wt2_train: evaluation failed: %s\n", trn_strerror(rc));
        rc = 1;
        goto out;
    }
    if (metrics) {
        fprintf(metrics, "{\"type\":\"final\",\"step\":%lld,\"weights\":\"%s\",\"val_ce\":%.6f,\"val_ppl\":%.4f,"
                         "\"val_tokens\":%lld,\"test_ce\":%.6f,\"test_ppl\":%.4f,\"test_tokens\":%lld}\n",
                trn_steps_done(t), trn_weights_name(used), val_ce, exp(val_ce), val_tok, test_ce,
                exp(test_ce), test_tok);
        fflush(metrics);
    }
    plot_metrics(cfg.out_dir);
    fprintf(stderr, "wt2_train: %lld steps, %lld tokens in %.1f s (%.0f tok/s); evaluated with %s weights\n",
            trn_steps_done(t), tokens, t_train, tokens / (t_train > 0 ? t_train : 1e-9), trn_weights_name(used));
    fprintf(stderr, "wt2_train: %s CE %.4f  PPL %.2f  (%lld tokens, context %d, stride %d)\n",
            have_full ? "validation" : "held-out validation tail", val_ce, exp(val_ce), val_tok, cfg.context, cfg.context);
    fprintf(stderr, "wt2_train: test CE %.4f  PPL %.2f  (%lld tokens)\n", test_ce, exp(test_ce), test_tok);
    if (json)
        printf("{\"val_ce\":%.6f,\"val_ppl\":%.4f,\"test_ce\":%.6f,\"test_ppl\":%.4f,\"tokens\":%lld,"
               "\"tokens_per_s\":%.1f,\"params\":%zu,\"steps\":%lld,\"weights\":\"%s\",\"train_split\":\"%s\","
               "\"val_split\":\"%s\",\"preset\":\"%s\",\"seed\":%llu}\n",
               val_ce, exp(val_ce), test_ce, exp(test_ce), tokens, tokens / (t_train > 0 ? t_train : 1e-9),
               mdl_num_params(trn_model(t)), trn_steps_done(t), trn_weights_name(used),
               have_full ? "train" : "valid (head)", have_full ? "valid" : "valid (held-out tail)", cfg.preset,
               (unsigned long long)cfg.seed);
    rc = 0;
out:
    if (metrics) fclose(metrics);
    trn_destroy(t);
    wt2_tokens_free(&tok_train);
    wt2_tokens_free(&tok_eval);
    wt2_tokens_free(&tok_test);
    return rc;
}
