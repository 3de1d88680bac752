/* wt2_train - train a small language model on WikiText-2 with any attnkit mechanism.

     build/wt2_train                      # the tiny preset (what `make run` does)
     build/wt2_train --preset paper       # seed 000 §7 (d 510, 12 layers, context 768, ...)
     build/wt2_train --preset tiny --prior none --controller none --swa 0 --cg 0
     build/wt2_train --attn polar --memory gdelta --max-steps 100 --json
     build/wt2_train --preset tiny-plain --maxent  # seed 004 section 6: score a catalogue of
                                          # shapes around the preset, train the selected one
                                          # (common/maxent.h; --maxent-cost flops: reproducible)
     build/wt2_train --preset tiny-plain --maxent-pi on  # seed 004 section 6 (C): a PI controller
                                          # holds each GELU layer's output entropy in a band
                                          # by moving its gain a_l of gelu(a_l u) (maxent.h)
     build/wt2_train --optimizer muon --lr-flat 0.3 --lr-floor 0  # seed 002 §4.1: Muon on the
                                          # blocks' matrices, AdamW on the rest, cosine over
                                          # the last 70 % of the steps (train.h)
     build/wt2_train --sigreg weak --sigreg-alpha 0.01  # seed 002 App. A: (1 - a) L_LM + a
                                          # SIGReg of every block's output (sigreg.h)
     build/wt2_train --resume runs/wt2/ckpt.safetensors   # continue bit-exactly
     build/wt2_train --help               # every option with its current default

   Data: --data-dir, else $WT2_DIR, else the directory compiled in (ATTNKIT_DATA_DIR,
   ../shared/data). README's "Data" section says which files are needed and where they
   come from; build/wt2_prepare --check verifies a copy (sizes and sha256). With the three WikiText-2 splits it trains on train, evaluates on
   validation during and after training and reports test at the end. Without the train
   split (../shared/data has only validation and test) it trains on validation minus a
   held-out tail (--holdout), evaluates on that tail during training and reports test at the
   end: the output says so.

   Output (--out-dir, default runs/wt2): metrics.jsonl (one JSON object per log step and
   per evaluation), loss.png (training CE and evaluation CE against steps),
   ckpt.safetensors (weights, optimizer, RNG, data-loader and controller state, and a
   periodic evaluation a stop interrupted; checkpoint format 2, ckpt.h: both the data and
   the header are checksummed; written atomically every --ckpt-every steps, every
   --ckpt-minutes of wall time (default 10), at the end of training and when stopped), and
   .lock (the directory lock; empty). Progress goes to stderr, for training and for the
   periodic and final evaluations (a redrawn bar with ETA on a terminal; otherwise plain
   lines every --progress-seconds, default 10); with --json one line of results goes to
   stdout at the end. JSON never holds NaN or infinity: such numbers are null. On
   --resume, metrics.jsonl loses its lines after the checkpoint's step (they are run
   again); temporary checkpoints left by a killed run are removed at start. loss.png is
   written to a temporary file and renamed only when every byte is on disk.

   Nothing is lost without being asked (issue 37):
   - An --out-dir that already holds a run (metrics.jsonl or ckpt.safetensors) is refused
     without --resume (continue it) or --overwrite (replace it: the earlier
     metrics.jsonl, ckpt.safetensors and loss.png are removed first): exit 2, nothing
     changed. --resume with --overwrite is refused (exit 2).
   - One run per directory: an exclusive lock on <out-dir>/.lock (fcntl, released when
     the process ends); a second run is refused with the holder's pid (exit 1).
   - Inputs first: flags, data, token ids and the --resume checkpoint are read and checked
     before the output directory is created or anything in it is written.
   - SIGINT, SIGTERM and SIGHUP stop the run in every phase: between steps, inside a
     periodic evaluation (it stays pending in the checkpoint and runs first on resume, so
     the resumed run is bit-identical to one never stopped) and inside the final
     evaluation (the checkpoint written after training is complete; --resume evaluates
     again). A second signal ends the process at once.
   - --resume refuses a checkpoint whose saved state is out of range (trn_load: counters
     beyond the run, NaN or negative controller state, non-finite weights or moments),
     one trained on other data (other token counts), and one without both checksums
     (format 1 or edited) unless --allow-no-crc.
   - Every number is parsed whole and range-checked (--threads 0..1024, --seed
     0..2^64-1, --steps/--max-steps/--warmin <= 10^12, --polar-distractor <= 65536 =
     polar.h's POLAR_MAX_DISTRACTOR_KEYS, 0/1 flags, ...).
   - Every write is checked: a metrics line that cannot be written stops the run (the
     checkpoint is still attempted), a failed checkpoint or loss.png fails the run, each
     with the file and the reason.

   Exit status: 0 only when the run trained, evaluated and wrote its final checkpoint,
   metrics and loss.png. 1 when anything failed, with the reason on stderr: the output
   directory cannot be written (checked before training) or is locked by another run, an
   input cannot be read (a directory given as --resume, an unreadable split), a token id
   is outside --vocab (checked at load, naming the file and byte offset), --resume
   refused the checkpoint, a checkpoint, metrics or loss.png write failed (a failed
   periodic checkpoint is a warning at the time and fails the run at the end), or the run
   diverged (the final loss is not finite, or more than half of this run's steps were
   skipped as non-finite; the results are still printed, with null). 2: bad options, or
   an --out-dir holding a run without --resume/--overwrite. 130 / 143 / 129: stopped by
   SIGINT / SIGTERM / SIGHUP with a checkpoint written (1 if it could not be written:
   there is nothing to resume from).
   License: MIT. */
#define _POSIX_C_SOURCE 200809L
#include "common/data.h"
#include "common/model.h"
#include "common/plot.h"
#include "common/train.h"
#include "common/maxent.h"
#include "common/exio.h"
#include "common/dist.h"
#include "common/dpnccl.h"
#include "common/sample.h"
#include "common/bpe.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef ATTNKIT_DATA_DIR
#define ATTNKIT_DATA_DIR "../shared/data"
#endif

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Create the output directory and prove that a file can be written there (EEXIST on a
   plain file, a read-only directory or mount all fail here, before any training). */
static int prepare_out_dir(const char *dir, char *err, size_t errlen)
{
    struct stat st;
    char probe[TRN_PATH_MAX + 64];
    int fd, e;
    if (wt2_mkdirs(dir) != 0) {
        snprintf(err, errlen, "cannot create the output directory '%s': %s", dir, strerror(errno));
        return -1;
    }
    if (stat(dir, &st) != 0) {
        snprintf(err, errlen, "cannot use the output directory '%s': %s", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "the output directory '%s' exists and is not a directory", dir);
        return -1;
    }
    snprintf(probe, sizeof probe, "%s/.wt2_train.probe.%ld", dir, (long)getpid());
    fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "ok\n", 3) != 3 || fsync(fd) != 0) {
        e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(probe);
        }
        snprintf(err, errlen, "the output directory '%s' is not writable: %s", dir, strerror(e));
        return -1;
    }
    e = close(fd) != 0 ? errno : 0;
    unlink(probe);
    if (e) {
        snprintf(err, errlen, "the output directory '%s' is not writable: %s", dir, strerror(e));
        return -1;
    }
    return 0;
}

/* Remove the temporary checkpoints (ckpt.safetensors.tmp.<pid>) that a killed run left
   behind: those whose process no longer exists. */
static void clean_stale_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    static const char pre[] = "ckpt.safetensors.tmp.";
    if (!d) return;
    while ((de = readdir(d)) != NULL) {
        char *end = NULL, path[TRN_PATH_MAX + 300];
        long pid;
        if (strncmp(de->d_name, pre, sizeof pre - 1) != 0) continue;
        errno = 0;
        pid = strtol(de->d_name + sizeof pre - 1, &end, 10);
        if (errno || !end || *end || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* its writer still runs */
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (unlink(path) == 0) fprintf(stderr, "wt2_train: removed %s (left by an interrupted run)\n", path);
    }
    closedir(d);
}

/* 1 when dir holds an earlier run's outputs (metrics.jsonl or ckpt.safetensors), with
   the first one found in *what */
static int holds_run(const char *dir, const char **what)
{
    static const char *const names[2] = {"metrics.jsonl", "ckpt.safetensors"};
    char p[TRN_PATH_MAX + 32];
    struct stat st;
    int k;
    for (k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[k]);
        if (lstat(p, &st) == 0) {
            *what = names[k];
            return 1;
        }
    }
    return 0;
}

/* --overwrite: the earlier run's outputs go before this run writes its own (under the
   lock), so that the directory never mixes two runs. */
static int remove_run(const char *dir, char *err, size_t errlen)
{
    static const char *const names[3] = {"metrics.jsonl", "ckpt.safetensors", "loss.png"};
    char p[TRN_PATH_MAX + 32];
    int k;
    for (k = 0; k < 3; k++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[k]);
        if (unlink(p) != 0 && errno != ENOENT)
            return ex_errf(err, errlen, -1, "--overwrite: cannot remove %s: %s", p, strerror(errno));
    }
    return 0;
}

/* "step":N of a metrics line, or -1 when it has none. */
static long long line_step(const char *line)
{
    const char *s = strstr(line, "\"step\":");
    return s ? atoll(s + 7) : -1;
}

/* On resume: drop the metrics lines of steps after the checkpoint's (they will be run
   again), so that metrics.jsonl holds each step once. Written to a temporary file and
   renamed. Returns 0, or -1 with a message. */
static int metrics_truncate(const char *path, long long step, char *err, size_t errlen)
{
    char tmp[TRN_PATH_MAX + 96], *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long long dropped = 0;
    FILE *in = fopen(path, "r"), *out;
    if (!in) return errno == ENOENT ? 0 : (snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno)), -1);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    out = fopen(tmp, "w");
    if (!out) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        fclose(in);
        return -1;
    }
    errno = 0;
    while ((len = getline(&line, &cap, in)) > 0) {
        if (line_step(line) > step || line[len - 1] != '\n') { /* later steps, or a torn last line */
            dropped++;
            continue;
        }
        if (fputs(line, out) == EOF) break;
    }
    free(line);
    if (ferror(in)) {
        snprintf(err, errlen, "cannot read %s: %s", path, errno ? strerror(errno) : "I/O error");
        fclose(in);
        fclose(out);
        unlink(tmp);
        return -1;
    }
    fclose(in);
    if (fflush(out) != 0 || ferror(out) || fsync(fileno(out)) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        fclose(out);
        unlink(tmp);
        return -1;
    }
    if (fclose(out) != 0 || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot replace %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    if (dropped)
        fprintf(stderr, "wt2_train: %s: dropped %lld line(s) after step %lld (they are run again from the checkpoint)\n",
                path, dropped, step);
    return 0;
}

/* Data parallelism (issue 44; examples/common/dist.h): the communicator, this process's
   rank and the number of processes. A build without MPI (the default) is one rank. */
static dp_comm *g_comm;
static int g_rank, g_size = 1;

static int g_agreed;          /* the exit status is the same on every process (MPI_Finalize) */
static int g_saved_stderr = -1; /* ranks > 0: their stderr, kept for their own failures */

/* This process cannot go on: with several processes the whole job ends with code (its
   message on stderr, MPI_Abort); one process: returns. */
static void fail_all(int code, const char *msg)
{
    if (g_saved_stderr >= 0) {
        fflush(stderr);
        dup2(g_saved_stderr, 2);
    }
    dp_fail(g_comm, code, msg);
}

static int par_allreduce_f32(void *c, float *buf, size_t n) { return dp_allreduce_f32((dp_comm *)c, buf, n); }
static int par_allreduce_f64(void *c, double *buf, size_t n) { return dp_allreduce_f64((dp_comm *)c, buf, n); }
static int par_bcast(void *c, void *buf, size_t bytes, int root) { return dp_bcast((dp_comm *)c, buf, bytes, root); }
static int par_any(void *c, int flag, int *out) { return dp_any((dp_comm *)c, flag, out); }
static int par_allgather_f32(void *c, float *buf, size_t n) { return dp_allgather_f32((dp_comm *)c, buf, n); }

/* --device cuda on several processes: the gradient's all-reduce over NCCL (dpnccl.h: loaded
   at run time, the id through MPI, the rank-ordered sum on the model's stream) */
static dpn_api g_nccl_api;
static dpn_comm *g_nccl;
static int par_allreduce_f32_dev(void *c, float *buf, size_t n, void *stream)
{
    int rc = dpn_allreduce_f32((dpn_comm *)c, buf, n, (tk_stream)stream);
    if (rc != DPN_OK) fprintf(stderr, "wt2_train: %s\n", dpn_last_error((dpn_comm *)c));
    return rc;
}

/* Every process agrees, once per step, on whether to stop: a stop signal on any process
   (each one's SIGINT / SIGTERM / SIGHUP counted) or rank 0's failed metrics write. The
   signal taken (g_stop_sig, stop_sig()) is the first of SIGINT, SIGTERM, SIGHUP that any
   process received, so every process checkpoints (rank 0 writes) and exits with the same
   status. The processes' own flags are left as the signals set them (a process's first
   signal is never taken for its second, which ends it at once: mpirun forwards a Ctrl-C
   to every rank, at its own moment). *metrics_failed: rank 0's flag on every process. One
   rank: the signal flag as it is. A failed collective ends the job. */
static int g_stop_sig;

static int stop_sig(void) { return g_size > 1 ? g_stop_sig : ex_stop_signal(); }

static int stop_agreed(int *metrics_failed)
{
    double v[4] = {0, 0, 0, 0};
    int sig = ex_stop_signal();
    if (g_size <= 1) return sig;
    if (g_stop_sig) return 1; /* agreed already (on every process at once) */
    v[0] = sig == SIGINT;
    v[1] = sig == SIGTERM;
    v[2] = sig == SIGHUP;
    v[3] = g_rank == 0 && *metrics_failed;
    if (dp_allreduce_f64(g_comm, v, 4) != DP_OK) fail_all(1, dp_last_error(g_comm));
    *metrics_failed = v[3] != 0;
    if (v[0] || v[1] || v[2]) g_stop_sig = v[0] ? SIGINT : v[1] ? SIGTERM : SIGHUP;
    return g_stop_sig || *metrics_failed;
}

/* rank 0's status to every process (what only rank 0 did: the output directory, the
   checkpoint) */
static int agree_rank0(int v)
{
    if (g_size > 1 && dp_bcast(g_comm, &v, sizeof v, 0) != DP_OK) fail_all(1, dp_last_error(g_comm));
    return v;
}

/* 1 on every process when any process passed bad != 0; the exit that follows is agreed
   (g_agreed: MPI_Finalize, not MPI_Abort, which may cut rank 0's message short) */
static int agree_any(int bad)
{
    int any = bad != 0;
    if (g_size > 1 && dp_any(g_comm, bad, &any) != DP_OK) fail_all(1, dp_last_error(g_comm));
    if (any) g_agreed = 1;
    return any;
}

static void usage(const trn_config *c, FILE *f)
{
    int k;
    fprintf(f, "usage: wt2_train [--preset ");
    for (k = 0; trn_preset_name(k); k++) fprintf(f, "%s%s", k ? "|" : "", trn_preset_name(k));
    fprintf(f, "]\n"
            "                 [--json]"
            " [--resume PATH] [options]\n\n"
            "Trains a decoder-only LM on WikiText-2 (GPT-2 BPE) with the attnkit mechanisms\n"
            "and reports validation / test cross-entropy and perplexity.\n\n"
            "  --preset NAME      start from a preset (default tiny); later flags override it\n"
            "  --json             print one JSON line of results on stdout at the end\n"
            "  --resume PATH      continue a run from its checkpoint (same options)\n"
            "  --overwrite        replace the run already in --out-dir (without it, and without\n"
            "                     --resume, a directory holding metrics.jsonl or ckpt.safetensors\n"
            "                     is refused: exit 2)\n"
            "  --ckpt-minutes M   also save a checkpoint every M minutes of wall time (default 10;\n"
            "                     0: only by --ckpt-every, at the end and when stopped)\n"
            "  --progress-seconds S  seconds between progress lines when stderr is not a terminal\n"
            "                     (training and evaluations; default 10; 0: after every step or\n"
            "                     evaluation batch). On a terminal a bar with ETA is redrawn.\n"
            "  --sample N         at each evaluation, print N tokens continuing the first 16 tokens\n"
            "                     of the evaluation split (temperature 0.8, top-k 40, top-p 0.95,\n"
            "                     seeded by --seed and the step; the training model's token-by-token\n"
            "                     decoding, model.h, on its device: with --device cuda on the GPU,\n"
            "                     where an architecture the device decode refuses prints the\n"
            "                     reason once and no samples; default 0: none; 0..1024)\n"
            "  --allow-no-crc     let --resume accept a checkpoint without its CRC-32 entries\n"
            "                     (older than checkpoint format 2, or edited)\n"
            "  --tokens gpt2|bytes  token ids: GPT-2 BPE (default) or the raw text's bytes\n"
            "                     (vocabulary 256; needs wiki.<split>.raw[.xz])\n"
            "  --grad-accum A     run each step's batch as A micro-batches of batch / A sequences per\n"
            "                     process, their gradients added (default 1; 1..1024). Under mpirun\n"
            "                     with N processes (the MPI build, make build/mpi/wt2_train) --batch\n"
            "                     stays the global batch: it must divide by N x A (else exit 2); N\n"
            "                     processes are bit-identical to one with --grad-accum N (train.h).\n"
            "                     --device cuda on N processes (make build/mpi-cuda/wt2_train, one GPU\n"
            "                     each): the gradients over NCCL, loaded at run time (libnccl.so.2)\n"
            "  --zero 0|1         ZeRO-1 under mpirun: each of the N processes keeps 1/N of the AdamW\n"
            "                     moments and updates 1/N of the weights, then all-gathers them;\n"
            "                     bit-identical to --zero 0 (the default), checkpoints the same\n"
            "                     (either loads with either). One process: nothing to shard, as 0.\n"
            "                     Refused with --optimizer muon (it needs whole matrices)\n"
            "  --help             this text\n\n"
            "SIGINT, SIGTERM and SIGHUP stop the run in any phase (training, periodic or final\n"
            "evaluation) with a checkpoint: exit 130, 143, 129; --resume continues from it.\n\n"
            "Options (defaults shown are those of preset '%s'):\n",
            c->preset);
    trn_print_help(c, f);
    fputc('\n', f);
    trn_print_presets(f);
}

/* What the eval curve of loss.png is measured on (main sets it once the splits are known). */
static const char *plot_eval_split = "validation";

/* one more (x, y[, T]) point; -1 when out of memory */
static int plot_push(double **x, double **y, int **T, size_t *n, size_t *cap, double a, double b, int t)
{
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 256;
        double *p = (double *)realloc(*x, nc * sizeof *p);
        if (!p) return -1;
        *x = p;
        p = (double *)realloc(*y, nc * sizeof *p);
        if (!p) return -1;
        *y = p;
        if (T) {
            int *q = (int *)realloc(*T, nc * sizeof *q);
            if (!q) return -1;
            *T = q;
        }
        *cap = nc;
    }
    (*x)[*n] = a;
    (*y)[*n] = b;
    if (T) (*T)[*n] = t;
    (*n)++;
    return 0;
}

/* Read back metrics.jsonl for the loss plot (covers resumed runs too). 0, or -1 with a
   message (a read error, or loss.png could not be written: nothing is renamed into place
   then). The plot: training CE per step, one line per context length when training
   alternates lengths (up to 6 of them; more: one line, the mean of a stated number of
   steps), evaluation CE with markers (the legend names the split), and the final test
   CE as a filled dot at the last step labelled with its value. */
static int plot_metrics(const char *dir, char *err, size_t errlen)
{
    enum { MAXT = 6 };
    char path[TRN_PATH_MAX + 32], *line = NULL, title[200], lab[MAXT + 3][96], note[48], fw[16] = "";
    size_t lcap = 0;
    double *tx = NULL, *ty = NULL, *vx = NULL, *vy = NULL, *sx = NULL, *sy = NULL, fx = 0, fy = NAN;
    int *tT = NULL, Ts[MAXT], nTs = 0, many = 0;
    size_t nt = 0, nv = 0, ct = 0, cv = 0, i;
    FILE *f;
    struct stat st;
    int rc = 0;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0; /* none, or not /dev/zero or a FIFO */
    f = fopen(path, "r");
    if (!f) return ex_errf(err, errlen, -1, "cannot read %s for the plot: %s", path, strerror(errno));
    errno = 0;
    while (getline(&line, &lcap, f) > 0) {
        const char *s = strstr(line, "\"step\":");
        const char *c, *tp;
        int train = strstr(line, "\"type\":\"train\"") != NULL;
        int eval = strstr(line, "\"type\":\"eval\"") != NULL;
        int fin = strstr(line, "\"type\":\"final\"") != NULL;
        if (!s || (!train && !eval && !fin)) continue;
        c = strstr(line, train ? "\"ce\":" : eval ? "\"val_ce\":" : "\"test_ce\":");
        if (!c) continue;
        c = strchr(c, ':') + 1;
        if (fin) { /* the last one counts; null (non-finite) is NaN: not drawn */
            fx = atof(s + 7);
            fy = strncmp(c, "null", 4) ? atof(c) : NAN;
            fw[0] = 0;
            if ((tp = strstr(line, "\"weights\":\"")) != NULL) sscanf(tp + 11, "%15[a-z0-9_-]", fw);
        } else if (train) {
            tp = strstr(line, "\"T\":");
            if (plot_push(&tx, &ty, &tT, &nt, &ct, atof(s + 7), strncmp(c, "null", 4) ? atof(c) : NAN,
                          tp ? atoi(tp + 4) : 0) != 0) { rc = -1; break; }
        } else if (plot_push(&vx, &vy, NULL, &nv, &cv, atof(s + 7), strncmp(c, "null", 4) ? atof(c) : NAN, 0) != 0) {
            rc = -1;
            break;
        }
    }
    if (rc) ex_errf(err, errlen, -1, "out of memory reading %s for the plot", path);
    else if (ferror(f)) rc = ex_errf(err, errlen, -1, "cannot read %s for the plot: %s", path, errno ? strerror(errno) : "I/O error");
    free(line);
    fclose(f);
    /* the context lengths trained on, in order of appearance */
    for (i = 0; i < nt && !many; i++) {
        int k;
        for (k = 0; k < nTs && Ts[k] != tT[i]; k++) {}
        if (k == nTs) {
            if (nTs == MAXT) many = 1;
            else Ts[nTs++] = tT[i];
        }
    }
    if (!rc && nt + nv > 0) {
        plot_series s[MAXT + 2];
        int ns = 0, k, win = 0;
        memset(s, 0, sizeof s);
        if (nt && (many || nTs <= 1)) {
            /* one training line; with many context lengths, the mean of the last win steps */
            if (many) {
                win = (int)(nt / 50 > 20 ? nt / 50 : 20);
                if ((size_t)win > nt) win = (int)nt;
                sx = (double *)malloc(nt * sizeof *sx);
                sy = (double *)malloc(nt * sizeof *sy);
                if (!sx || !sy) rc = ex_errf(err, errlen, -1, "out of memory drawing %s/loss.png", dir);
                for (i = 0; !rc && i < nt; i++) {
                    size_t j0 = i + 1 >= (size_t)win ? i + 1 - (size_t)win : 0, j, m = 0;
                    double sum = 0;
                    for (j = j0; j <= i; j++)
                        if (isfinite(ty[j])) { sum += ty[j]; m++; }
                    sx[i] = tx[i];
                    sy[i] = m ? sum / (double)m : NAN;
                }
                snprintf(lab[0], sizeof lab[0], "train CE, mean of the last %d steps (context lengths vary)", win);
            } else if (nTs == 1 && Ts[0] > 0) {
                snprintf(lab[0], sizeof lab[0], "train CE (context %d)", Ts[0]);
            } else {
                snprintf(lab[0], sizeof lab[0], "train CE");
            }
            s[ns].label = lab[0];
            s[ns].x = many ? sx : tx;
            s[ns].y = many ? sy : ty;
            s[ns].n = (int)nt;
            s[ns].dash = PLOT_DASH_SOLID;
            s[ns].marker = PLOT_MARK_NONE;
            s[ns].color = 2;
            ns++;
        } else if (nt) {
            /* training alternates context lengths (the context game): its CE zig-zags between
               them; one line per length shows each one's curve */
            for (k = 0; k < nTs; k++) {
                double *x = (double *)malloc(nt * sizeof *x), *y = (double *)malloc(nt * sizeof *y);
                size_t m = 0;
                if (!x || !y) {
                    free(x);
                    free(y);
                    rc = ex_errf(err, errlen, -1, "out of memory drawing %s/loss.png", dir);
                    break;
                }
                for (i = 0; i < nt; i++)
                    if (tT[i] == Ts[k]) {
                        x[m] = tx[i];
                        y[m++] = ty[i];
                    }
                snprintf(lab[k], sizeof lab[k], "train CE, context %d", Ts[k]);
                s[ns].label = lab[k];
                s[ns].x = x;
                s[ns].y = y;
                s[ns].n = (int)m;
                s[ns].dash = PLOT_DASH_SOLID;
                s[ns].marker = PLOT_MARK_NONE;
                s[ns].color = k < 2 ? k + 2 : k + 3; /* 1 (blue) is eval, 4 (red) is test */
                ns++;
            }
        }
        if (!rc && nv) {
            /* evaluations during training use the raw weights; say so when the final one did not */
            snprintf(lab[MAXT], sizeof lab[MAXT], "eval CE (%s%s)", plot_eval_split,
                     fw[0] && strcmp(fw, "raw") ? ", raw weights" : "");
            s[ns].label = lab[MAXT];
            s[ns].x = vx;
            s[ns].y = vy;
            s[ns].n = (int)nv;
            s[ns].dash = PLOT_DASH_SOLID;
            s[ns].marker = PLOT_MARK_CIRCLE;
            s[ns].color = 1;
            ns++;
        }
        if (!rc && isfinite(fy)) {
            snprintf(lab[MAXT + 1], sizeof lab[MAXT + 1], "test CE %.3f (final, step %.0f%s%s%s)", fy, fx,
                     fw[0] ? ", " : "", fw, fw[0] ? " weights" : "");
            snprintf(note, sizeof note, "test CE %.3f", fy);
            s[ns].label = lab[MAXT + 1];
            s[ns].x = &fx;
            s[ns].y = &fy;
            s[ns].n = 1;
            s[ns].dash = PLOT_DASH_NONE;
            s[ns].marker = PLOT_MARK_DOT;
            s[ns].color = 4;
            s[ns].note = note;
            ns++;
        }
        if (nTs > 1 && !many)
            snprintf(title, sizeof title, "wt2_train: cross-entropy\ntraining alternates %d context lengths: one line each", nTs);
        else if (many)
            snprintf(title, sizeof title, "wt2_train: cross-entropy\ntraining CE smoothed: mean of the last %d steps", win);
        else
            snprintf(title, sizeof title, "wt2_train: cross-entropy");
        snprintf(path, sizeof path, "%s/loss.png", dir);
        if (!rc && plot_lines_png_err(path, 900, 540, title, "step", "CE (nats)", s, ns, 0, err, errlen) != 0) rc = -1;
        if (nTs > 1 && !many)
            for (k = 0; k < nTs && k < ns; k++)
                if (s[k].x != vx && s[k].x != &fx) {
                    free((void *)s[k].x);
                    free((void *)s[k].y);
                }
    }
    free(tx);
    free(ty);
    free(tT);
    free(vx);
    free(vy);
    free(sx);
    free(sy);
    return rc;
}

/* ids as text on stderr (tok: GPT-2; NULL: byte ids), control bytes escaped so a sample
   stays one line */
static void put_ids(const int *ids, int n, const bpe_tokenizer *tok)
{
    int k;
    for (k = 0; k < n; k++) {
        unsigned char one;
        const unsigned char *b;
        size_t len = 1, j;
        if (tok) {
            b = bpe_token_bytes(tok, ids[k], &len);
            if (!b) { fprintf(stderr, "<%d>", ids[k]); continue; }
        } else {
            one = (unsigned char)ids[k];
            b = &one;
        }
        for (j = 0; j < len; j++) {
            if (b[j] == '\n') fputs("\\n", stderr);
            else if (b[j] < 0x20 || b[j] == 0x7f) fprintf(stderr, "\\x%02x", b[j]);
            else fputc(b[j], stderr);
        }
    }
}

/* --sample: n tokens continuing the first 16 of the evaluation split, on the training
   model's device (sample.h's smp_continue through model.h's mdl_decode_*: on a device
   model the decode runs there and only each step's logits come to the host; the decoding
   state is freed after). An architecture the decode refuses on that device
   (mdl_decode_supports_on: the value gate with more than 256 heads; the device's own table
   is empty today) is said once, with the reason, and no sample is printed; training goes
   on. */
static void print_sample(mdl_model *m, const uint16_t *ids, size_t n_ids, int n, uint64_t seed, long long step,
                         const bpe_tokenizer *tok)
{
    static int refused = 0; /* 1: the refusal was printed; 2: decoding is possible */
    int prompt[16], out[1024], nout = 0, np = n_ids < 16 ? (int)n_ids : 16, k;
    char e[256];
    if (np < 1 || refused == 1 || !m) return;
    if (!refused) {
        const int dev = mdl_device(m);
        if (mdl_decode_supports_on(mdl_get_config(m), dev, e, sizeof e) != MDL_OK) {
            fprintf(stderr, "wt2_train: --sample: no samples in this run: %s (on the %s model)\n", e,
                    dev == MDL_DEVICE_CUDA ? "device" : "CPU");
            refused = 1;
            return;
        }
        refused = 2;
    }
    for (k = 0; k < np; k++) prompt[k] = ids[k];
    if (smp_continue(m, prompt, np, n, 0.8, 40, 0.95, seed, tok ? bpe_eot(tok) : -1, out, &nout, e, sizeof e) != MDL_OK) {
        fprintf(stderr, "wt2_train: sample at step %lld failed: %s\n", step, e);
        return;
    }
    fprintf(stderr, "wt2_train: sample at step %lld: ", step);
    put_ids(prompt, np, tok);
    fputs(" >>", stderr);
    put_ids(out, nout, tok);
    fputc('\n', stderr);
}

/* One split's ids: GPT-2 BPE (wt2_load_split) or bytes (--tokens bytes). */
static int load_split(const char *dir, int split, int bytes, wt2_tokens *out, char *err, size_t errlen)
{
    return bytes ? wt2_load_split_bytes(dir, split, out, err, errlen) : wt2_load_split(dir, split, NULL, out, err, errlen);
}

/* The end of a stopped run: the checkpoint decides the exit status (128 + the signal
   when it was written, 1 when there is nothing to resume from). */
static int stopped_exit(int final_saved, const char *phase, long long step, const char *ckpt, const char *outdir)
{
    char perr[600];
    int sig = stop_sig();
    const char *name = sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "SIGINT";
    if (final_saved)
        fprintf(stderr, "wt2_train: stopped by %s during %s at step %lld; checkpoint %s is complete: resume with "
                        "--resume %s and the same options%s\n",
                name, phase, step, ckpt, ckpt,
                strcmp(phase, "the final evaluation") ? "" : " (the final evaluation runs again)");
    else
        fprintf(stderr, "wt2_train: stopped by %s during %s at step %lld; NO checkpoint was written, there is "
                        "nothing to resume from\n", name, phase, step);
    if (g_rank == 0 && plot_metrics(outdir, perr, sizeof perr) != 0) fprintf(stderr, "wt2_train: warning: %s\n", perr);
    return final_saved ? 128 + sig : 1; /* ex_stop_exit_code() with one process */
}

/* Evaluation progress (trn_set_progress): on a terminal a bar with ETA redrawn every 0.5 s
   once an evaluation has run 2 s, then erased; otherwise a plain line every
   --progress-seconds (default 10), as training prints. */
static double progress_seconds = 10.0;
typedef struct {
    const char *label; /* "periodic evaluation", "final evaluation (test)" */
    int tty, drawn;
    double t0, last;
} eval_progress;

static void eval_progress_cb(void *user, long long done, long long total)
{
    eval_progress *p = (eval_progress *)user;
    double now = now_s(), el, left;
    if (done == 0) {
        p->t0 = p->last = now;
        p->drawn = 0;
        if (!p->tty && progress_seconds <= 0)
            fprintf(stderr, "wt2_train: %s: %lld chunks\n", p->label, total);
        return;
    }
    el = now - p->t0;
    left = done > 0 && total > done ? el * (double)(total - done) / (double)done : 0.0;
    if (p->tty) {
        if (done >= total) { /* erase the bar: the caller's next line starts clean */
            if (p->drawn) fprintf(stderr, "\r%79s\r", "");
            p->drawn = 0;
            return;
        }
        if (el < 2.0 || now - p->last < 0.5) return;
        {
            int w = 24, k, fill = total > 0 ? (int)((double)w * (double)done / (double)total) : 0;
            fprintf(stderr, "\r[");
            for (k = 0; k < w; k++) fputc(k < fill ? '#' : '.', stderr);
            fprintf(stderr, "] %s %lld/%lld chunks ETA %.0fs     ", p->label, done, total, left);
        }
        p->drawn = 1;
    } else {
        if (now - p->last < progress_seconds && done < total) return;
        if (done >= total && el < progress_seconds && progress_seconds > 0) return; /* short: the result says it */
        fprintf(stderr, "wt2_train: %s: %lld/%lld chunks (%.0f%%) %.0fs ETA %.0fs\n", p->label, done, total,
                total > 0 ? 100.0 * (double)done / (double)total : 100.0, el, left);
    }
    p->last = now;
}

static int wt2_main(int argc, char **argv)
{
    trn_config cfg;
    int bytes = 0;
    const char *preset = "tiny", *resume = NULL, *what = NULL;
    int json = 0, i, rc, train_split, eval_split, have_full, allow_no_crc = 0, save_failures = 0, overwrite = 0;
    int final_saved = 0, tty = isatty(fileno(stderr)), lock_fd = -1, metrics_failed = 0;
    char err[4096], msg[512], dir[TRN_PATH_MAX], path[TRN_PATH_MAX + 64], ckpt_path[TRN_PATH_MAX + 64];
    wt2_inventory inv;
    wt2_tokens tok_train, tok_eval, tok_test;
    const uint16_t *train_ids, *val_ids;
    size_t n_train, n_val;
    trn *t = NULL;
    FILE *metrics = NULL;
    double t0, t_train = 0, val_ce, test_ce = NAN, ckpt_minutes = 10.0, last_ckpt;
    eval_progress ep;
    long long val_tok = 0, test_tok = 0, steps0, limit, tokens = 0, skipped0 = 0, ran, skipped;
    int used, wsel, accum = 1, same = 1, sample_n = 0, zero = 0, zero_on;
    bpe_tokenizer *stok = NULL; /* --sample's decoder (GPT-2 ids) */
    char jb[4][40];
    mx_result *mxres = NULL;

    ex_wait_policy(argv); /* polite waiting threads on a shared machine (exio.h; main ran it first) */

    memset(&tok_train, 0, sizeof tok_train);
    memset(&tok_eval, 0, sizeof tok_eval);
    memset(&tok_test, 0, sizeof tok_test);
    /* pass 1: the preset, so that later flags override it whatever their order */
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--preset") && i + 1 < argc) preset = argv[++i];
        else if (!strncmp(argv[i], "--preset=", 9)) preset = argv[i] + 9;
    }
    if (trn_preset(preset, &cfg) != TRN_OK) {
        int k;
        fprintf(stderr, "wt2_train: unknown preset '%s' (valid:", preset);
        for (k = 0; trn_preset_name(k); k++) fprintf(stderr, "%s %s", k ? "," : "", trn_preset_name(k));
        fprintf(stderr, ")\n");
        return 2;
    }
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(&cfg, stdout); return 0; }
        if (!strcmp(a, "--preset")) { i++; continue; }
        if (!strncmp(a, "--preset=", 9)) continue;
        if (!strcmp(a, "--json")) { json = 1; continue; }
        if (!strcmp(a, "--overwrite")) { overwrite = 1; continue; }
        if (!strcmp(a, "--resume")) {
            if (i + 1 >= argc) { fprintf(stderr, "wt2_train: --resume needs a path\n"); return 2; }
            resume = argv[++i];
            continue;
        }
        if (!strncmp(a, "--resume=", 9)) { resume = a + 9; continue; }
        if (!strcmp(a, "--ckpt-minutes") || !strncmp(a, "--ckpt-minutes=", 15)) {
            const char *v = a[14] == '=' ? a + 15 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || ex_parse_double(v, 0.0, 1e6, &ckpt_minutes) != 0) {
                fprintf(stderr, "wt2_train: --ckpt-minutes needs a number of minutes in [0, 1e6], not '%s'\n",
                        v ? v : "");
                return 2;
            }
            continue;
        }
        if (!strcmp(a, "--progress-seconds") || !strncmp(a, "--progress-seconds=", 19)) {
            const char *v = a[18] == '=' ? a + 19 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || ex_parse_double(v, 0.0, 1e6, &progress_seconds) != 0) {
                fprintf(stderr, "wt2_train: --progress-seconds needs a number of seconds in [0, 1e6], not '%s'\n",
                        v ? v : "");
                return 2;
            }
            continue;
        }
        if (!strcmp(a, "--allow-no-crc")) { allow_no_crc = 1; continue; }
        if (!strcmp(a, "--sample") || !strncmp(a, "--sample=", 9)) {
            const char *v = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || ex_parse_int(v, 0, 1024, &sample_n) != 0) {
                fprintf(stderr, "wt2_train: --sample needs a number of tokens in [0, 1024], not '%s'\n", v ? v : "");
                return 2;
            }
            continue;
        }
        if (!strcmp(a, "--grad-accum") || !strncmp(a, "--grad-accum=", 13)) {
            const char *v = a[12] == '=' ? a + 13 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || ex_parse_int(v, 1, TRN_MAX_THREADS, &accum) != 0) {
                fprintf(stderr, "wt2_train: --grad-accum needs a whole number of micro-batches in [1, %d], not '%s'\n",
                        TRN_MAX_THREADS, v ? v : "");
                return 2;
            }
            continue;
        }
        if (!strcmp(a, "--zero") || !strncmp(a, "--zero=", 7)) {
            const char *v = a[6] == '=' ? a + 7 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || ex_parse_int(v, 0, 1, &zero) != 0) {
                fprintf(stderr, "wt2_train: --zero needs 0 or 1 (the ZeRO stage), not '%s'\n", v ? v : "");
                return 2;
            }
            continue;
        }
        if (!strcmp(a, "--tokens") && i + 1 < argc && (!strcmp(argv[i + 1], "bytes") || !strcmp(argv[i + 1], "gpt2"))) {
            bytes = !strcmp(argv[++i], "bytes");
            continue;
        }
        if (!strcmp(a, "--tokens")) { fprintf(stderr, "wt2_train: --tokens needs gpt2 or bytes\n"); return 2; }
        rc = trn_parse_flag(&cfg, argc, argv, i, err, sizeof err);
        if (rc < 0) { fprintf(stderr, "wt2_train: %s\n", err); return 2; }
        if (rc == 0) {
            fprintf(stderr, "wt2_train: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        i += rc - 1;
    }
    if (bytes && cfg.model.vocab != WT2_BYTE_VOCAB) {
        fprintf(stderr, "wt2_train: --tokens bytes: vocabulary %d -> %d (byte ids)\n", cfg.model.vocab, WT2_BYTE_VOCAB);
        cfg.model.vocab = WT2_BYTE_VOCAB;
    }
    if (trn_config_validate(&cfg, err, sizeof err) != TRN_OK) {
        fprintf(stderr, "wt2_train: %s\n", err);
        return 2;
    }
    if (cfg.batch % (g_size * accum) != 0) {
        fprintf(stderr, "wt2_train: --batch %d is the global batch: it must divide by the %d process(es) x --grad-accum "
                        "%d = %d micro-batches\n", cfg.batch, g_size, accum, g_size * accum);
        return 2;
    }
    if (g_size > 1 && cfg.maxent) {
        fprintf(stderr, "wt2_train: --maxent (the pre-selection) runs in one process: run it without mpirun, then "
                        "--resume its checkpoint under mpirun\n");
        return 2;
    }
    if (resume && overwrite) {
        fprintf(stderr, "wt2_train: --resume continues the run in --out-dir and --overwrite replaces it: choose one\n");
        return 2;
    }
    /* an earlier run in the output directory is never replaced without being asked to */
    if (!resume && !overwrite && holds_run(cfg.out_dir, &what)) {
        fprintf(stderr, "wt2_train: the output directory '%s' already holds a run (%s): nothing was changed.\n"
                        "  Continue it with --resume %s/ckpt.safetensors, replace it with --overwrite, or choose "
                        "another --out-dir.\n", cfg.out_dir, what, cfg.out_dir);
        return 2;
    }
    if (cfg.device == MDL_DEVICE_CUDA) {
        /* before any file is read or written: say what is missing, with the runtime's words */
        char why[512];
        const int cu = ex_cuda_probe(why, sizeof why);
        if (cu == EX_CUDA_NOT_BUILT) {
            fprintf(stderr, "wt2_train: --device cuda: this binary was built without CUDA; build the GPU trainer "
                            "with nvcc (`make build/cuda/wt2_train`) and run build/cuda/wt2_train\n");
            return 2;
        }
        if (cu != EX_CUDA_USABLE) {
            fprintf(stderr, "wt2_train: --device cuda: no usable CUDA device found (CUDA build; the CUDA runtime says: "
                            "%s)\n", why[0] ? why : "cudaGetDeviceCount reports 0 devices");
            return 2;
        }
    }
    if (resume && ex_check_input(resume, err, sizeof err) != 0) {
        fprintf(stderr, "wt2_train: --resume: %s\n", err);
        return 1;
    }
#ifdef _OPENMP
    if (cfg.threads > 0) omp_set_num_threads(cfg.threads);
#endif

    /* data (inputs first: nothing is written before every input is read and checked) */
    if (cfg.data_dir[0]) snprintf(dir, sizeof dir, "%s", cfg.data_dir);
    else snprintf(dir, sizeof dir, "%s", wt2_default_data_dir()); /* $WT2_DIR, else the built-in path */
    if (wt2_scan(dir, &inv) <= 0) {
        fprintf(stderr, "wt2_train: no WikiText-2 data in '%s'.\n"
                        "  Point --data-dir or WT2_DIR at a WikiText-2 directory holding wt2.{valid,test}.gpt2.u16\n"
                        "  (or wiki.{train,valid,test}.raw[.xz] and gpt2/encoder.json + gpt2/vocab.bpe).\n"
                        "  README, section \"Data\", says which files are needed and where to get them;\n"
                        "  build/wt2_prepare --check --data-dir DIR verifies a copy.\n", dir);
        return 1;
    }
    if (wt2_choose_splits(&inv, &train_split, &eval_split, msg, sizeof msg) != 0) {
        fprintf(stderr, "wt2_train: the data directory '%s' does not hold enough of WikiText-2:\n", dir);
        wt2_describe(&inv, dir, stderr);
        fprintf(stderr, "  README, section \"Data\", says which files are needed and where to get them.\n");
        return 1;
    }
    if (sample_n > 0 && !bytes) {
        char tp[sizeof dir + 8];
        snprintf(tp, sizeof tp, "%s/gpt2", dir);
        if (bpe_load_dir(&stok, tp, err, sizeof err) != BPE_OK) {
            fprintf(stderr, "wt2_train: --sample needs the GPT-2 tokenizer to print text: %s\n", err);
            return 1;
        }
    }
    have_full = train_split == WT2_TRAIN;
    plot_eval_split = have_full ? "validation" : "held-out tail of validation"; /* loss.png's legend */
    if (load_split(dir, train_split, bytes, &tok_train, err, sizeof err) != 0 ||
        load_split(dir, have_full ? WT2_VALID : eval_split, bytes, &tok_test, err, sizeof err) != 0) {
        fprintf(stderr, "wt2_train: %s\n", err);
        wt2_tokens_free(&tok_train);
        wt2_tokens_free(&tok_test);
        return 1;
    }
    if (have_full) {
        /* standard protocol: train / validation (during and after) / test (at the end) */
        tok_eval = tok_test;
        memset(&tok_test, 0, sizeof tok_test);
        if (load_split(dir, WT2_TEST, bytes, &tok_test, err, sizeof err) != 0) {
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

    fprintf(stderr, "wt2_train: OpenMP threads wait with %s (OMP_WAIT_POLICY / GOMP_SPINCOUNT choose)\n",
            ex_wait_policy_desc());

    /* every id against the model's vocabulary, now, naming the file and the offset */
    {
        const wt2_tokens *all[3];
        int k;
        all[0] = &tok_train;
        all[1] = &tok_eval;
        all[2] = &tok_test;
        for (k = 0; k < 3; k++)
            if (all[k]->ids && wt2_check_ids(all[k]->ids, all[k]->n, cfg.model.vocab, all[k]->source, err,
                                             sizeof err) != BPE_OK) {
                fprintf(stderr, "wt2_train: %s (--vocab %d)\n", err, cfg.model.vocab);
                rc = 1;
                goto out;
            }
    }
    if (cfg.model.max_T > 0 && cfg.model.max_T < cfg.context)
        fprintf(stderr, "wt2_train: note: --max-t %d is shorter than --context %d: the model is built with max-t %d\n",
                cfg.model.max_T, cfg.context, cfg.context);
    /* MaxEnt (--maxent, maxent.h): a resumed run takes the shape its checkpoint recorded; a
       new one runs the pre-selection (B)+(D) and trains the selected shape */
    if (resume) {
        int found = 0;
        if (mx_resume_shape(resume, &cfg, &found, err, sizeof err) != TRN_OK) {
            fprintf(stderr, "wt2_train: %s\n", err);
            rc = 1;
            goto out;
        }
        if (found)
            fprintf(stderr, "wt2_train: resume: the checkpoint's --maxent selection: d-model %d, heads %d, ff-mult %d, "
                            "pos %s\n", cfg.model.d_model, cfg.model.n_heads, cfg.model.d_ff_mult,
                    cfg.model.pos == MDL_POS_ROPE ? "rope" : cfg.model.pos == MDL_POS_LEARNED ? "learned" : "none");
    } else if (cfg.maxent) {
        mxres = (mx_result *)malloc(sizeof *mxres);
        if (!mxres) {
            fprintf(stderr, "wt2_train: out of memory\n");
            rc = 1;
            goto out;
        }
        fprintf(stderr, "wt2_train: --maxent: scoring the catalogue around d-model %d, heads %d, ff-mult %d "
                        "(%d probe steps of %d x %d tokens per candidate, cost %s)\n",
                cfg.model.d_model, cfg.model.n_heads, cfg.model.d_ff_mult, cfg.maxent_probe, cfg.maxent_batch,
                cfg.context, cfg.maxent_cost == MX_COST_FLOPS ? "flops" : "time");
        if (mx_run(&cfg, train_ids, n_train, val_ids, n_val, mxres, err, sizeof err) != TRN_OK) {
            fprintf(stderr, "wt2_train: %s\n", err);
            rc = 1;
            goto out;
        }
        mx_print_table(stderr, mxres);
        mx_apply(&cfg, mxres);
        fprintf(stderr, "wt2_train: --maxent selected %s\n", mxres->cand[mxres->selected].label);
    }
    if ((resume || cfg.maxent) && trn_config_validate(&cfg, err, sizeof err) != TRN_OK) {
        fprintf(stderr, "wt2_train: %s\n", err);
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
        rc = trn_load_flags(t, resume, allow_no_crc ? TRN_LOAD_ALLOW_NO_CRC : 0u, err, sizeof err);
        if (rc != TRN_OK) {
            fprintf(stderr, "wt2_train: %s\n", err);
            rc = 1;
            goto out;
        }
        fprintf(stderr, "wt2_train: resumed from %s at step %lld%s\n", resume, trn_steps_done(t),
                trn_pending(t) ? " (its periodic evaluation runs first)" : "");
    }
    if (g_size > 1 || accum > 1) {
        trn_parallel par;
        memset(&par, 0, sizeof par);
        par.rank = g_rank;
        par.size = g_size;
        par.accum = accum;
        par.comm = g_comm;
        par.allreduce_f32 = par_allreduce_f32;
        par.allreduce_f64 = par_allreduce_f64;
        par.bcast = par_bcast;
        par.any = par_any;
        par.zero = zero;
        par.allgather_f32 = par_allgather_f32;
        /* each failure below is agreed (dp_any) before the next collective, so every process
           leaves with the same status and rank 0's sentence is out before MPI ends */
        if (cfg.device == MDL_DEVICE_CUDA && g_size > 1) { /* NCCL, loaded now */
            int bad = dpn_load(&g_nccl_api, NULL, err, sizeof err) != DPN_OK;
            if (bad) fprintf(stderr, "wt2_train: --device cuda on %d processes: %s\n", g_size, err);
            if (agree_any(bad)) {
                rc = 2;
                goto out;
            }
            /* the communicator: a rank that cannot join ends the job (the others may wait in
               ncclCommInitRank, where no agreement reaches them) */
            if (dpn_create(&g_nccl, &g_nccl_api, g_rank, g_size, par_bcast, g_comm, err, sizeof err) != DPN_OK) {
                char msg[4200];
                snprintf(msg, sizeof msg, "wt2_train: --device cuda on %d processes: %s", g_size, err);
                fail_all(1, msg);
                rc = 1;
                goto out;
            }
            par.dev_comm = g_nccl;
            par.allreduce_f32_dev = par_allreduce_f32_dev;
        }
        {
            int bad = trn_set_parallel(t, &par, err, sizeof err) != TRN_OK;
            if (bad) fprintf(stderr, "wt2_train: %s\n", err);
            if (agree_any(bad)) {
                rc = 2;
                goto out;
            }
        }
        fprintf(stderr, "wt2_train: data parallel: %d process(es) (%s%s) x %d micro-batch(es) of %d sequences per step "
                        "(global batch %d)\n", g_size, dp_backend(g_comm), g_nccl ? ", gradients over NCCL" : "", accum,
                cfg.batch / (g_size * accum), cfg.batch);
        {
            /* OpenMPI's mpirun answers Ctrl-C with SIGCONT to every process, SIGTERM
               odls_base_sigkill_timeout seconds later (1 by default) and SIGKILL as long
               after that: one second for a step and the stop's checkpoint. mpirun passes its
               MCA settings on to the processes' environment, so rank 0 can tell, and says so
               once. */
            const char *kt = getenv("OMPI_MCA_odls_base_sigkill_timeout");
            const long grace = kt ? strtol(kt, NULL, 10) : 1;
            if (g_rank == 0 && getenv("OMPI_COMM_WORLD_SIZE") && grace < 5)
                fprintf(stderr, "wt2_train: note: Ctrl-C on mpirun leaves the processes %ld s between SIGTERM and "
                                "SIGKILL (OpenMPI's odls_base_sigkill_timeout), which may end them before the stop's "
                                "checkpoint is written: to stop with a checkpoint, kill -TERM any one process, or "
                                "launch with 'mpirun --mca odls_base_sigkill_timeout 10' (Ctrl-C then signals the "
                                "processes 10 s later and leaves them 10 s)\n", grace);
        }
    }
    zero_on = zero && g_size > 1;
    if (zero)
        fprintf(stderr, "wt2_train: ZeRO-1: %s; AdamW moments %.3f MiB on this process (%.3f MiB unsharded); "
                        "EMA / SWA stay full on every process\n",
                zero_on ? "moments sharded over the processes" : "one process, nothing to shard (as --zero 0)",
                (double)trn_moment_bytes(t) / 1048576.0,
                (double)(2 * sizeof(float) * mdl_num_params(trn_model(t))) / 1048576.0);

    /* the outputs are rank 0's (metrics, plots, checkpoints); every process stops on a signal */
    if (g_rank == 0) {
        /* outputs: the directory, then its lock (one run at a time), then a second look for an
           earlier run (another process may have written one since the first look) */
        if (prepare_out_dir(cfg.out_dir, err, sizeof err) != 0) {
            fprintf(stderr, "wt2_train: %s\n", err);
            rc = 1;
            goto out0;
        }
        if (ex_lock_dir(cfg.out_dir, &lock_fd, err, sizeof err) != 0) {
            fprintf(stderr, "wt2_train: %s\n", err);
            rc = 1;
            goto out0;
        }
        if (!resume && !overwrite && holds_run(cfg.out_dir, &what)) {
            fprintf(stderr, "wt2_train: the output directory '%s' already holds a run (%s): nothing was changed.\n"
                            "  Continue it with --resume %s/ckpt.safetensors, replace it with --overwrite, or choose "
                            "another --out-dir.\n", cfg.out_dir, what, cfg.out_dir);
            rc = 2;
            goto out0;
        }
        /* from here on SIGINT, SIGTERM and SIGHUP save a checkpoint, in every phase (installed
           before metrics.jsonl is written: a script that waits for that file can stop the run
           safely) */
        if (ex_stop_install() != 0) {
            fprintf(stderr, "wt2_train: cannot install the signal handlers: %s\n", strerror(errno));
            rc = 1;
            goto out0;
        }
        trn_set_stop_flag(t, ex_stop_flag());
        ep.label = "periodic evaluation";
        ep.tty = tty;
        ep.drawn = 0;
        ep.t0 = ep.last = 0;
        trn_set_progress(t, eval_progress_cb, &ep);
        clean_stale_tmp(cfg.out_dir);
        if (overwrite && remove_run(cfg.out_dir, err, sizeof err) != 0) {
            fprintf(stderr, "wt2_train: %s\n", err);
            rc = 1;
            goto out0;
        }
        snprintf(ckpt_path, sizeof ckpt_path, "%s/ckpt.safetensors", cfg.out_dir);
        snprintf(path, sizeof path, "%s/metrics.jsonl", cfg.out_dir);
        if (resume && metrics_truncate(path, trn_steps_done(t), err, sizeof err) != 0) {
            fprintf(stderr, "wt2_train: %s\n", err);
            rc = 1;
            goto out0;
        }
        metrics = fopen(path, resume ? "a" : "w");
        if (!metrics) {
            fprintf(stderr, "wt2_train: cannot write %s: %s\n", path, strerror(errno));
            rc = 1;
            goto out0;
        }
        trn_set_metrics(t, metrics);
        {
            char *js = (char *)malloc(16384);
            if (!js || trn_config_json(&cfg, js, 16384) != TRN_OK) {
                fprintf(stderr, "wt2_train: cannot serialise the configuration for %s\n", path);
                free(js);
                rc = 1;
                goto out0;
            }
            errno = 0;
            fprintf(metrics, "{\"type\":\"%s\",\"step\":%lld,\"params\":%zu,\"config\":%s}\n",
                    resume ? "resume" : "config", trn_steps_done(t), mdl_num_params(trn_model(t)), js);
            free(js);
            if (mxres) { /* the scored table */
                js = (char *)malloc(65536);
                if (!js || mx_json(mxres, js, 65536) != TRN_OK) {
                    fprintf(stderr, "wt2_train: cannot serialise the --maxent table for %s\n", path);
                    free(js);
                    rc = 1;
                    goto out0;
                }
                /* "step":0 after the object's type: kept by a resume's truncation */
                fprintf(metrics, "{\"step\":0,%s\n", js + 1);
                free(js);
            }
            if (!resume && (cfg.maxent || cfg.maxent_c)) { /* what (A) and (C) did at init */
                trn_maxent_report r;
                char b[12][40];
                trn_maxent_report_get(t, &r);
                fprintf(metrics, "{\"type\":\"maxent_init\",\"step\":0,\"a_layers\":%d,\"a_met\":%d,\"a_sigma_q\":%s,"
                                 "\"a_sigma_before\":%s,\"a_T\":%s,\"c_checked\":%d,\"c_var_min\":%s,\"c_eps_rec\":%s,"
                                 "\"c_bias_rec\":%s,\"c_bias_model_eps\":%s,\"c_mats\":%d,\"c_over\":%d,\"c_sigma_max\":%s,"
                                 "\"c_cap\":%s,\"c_worst\":\"%s\"}\n",
                        r.a_applied, r.a_met, trn_json_gnum(b[0], 40, 6, r.a_sigma_q),
                        trn_json_gnum(b[1], 40, 6, r.a_sigma_before), trn_json_gnum(b[2], 40, 6, r.a_T), r.c_checked,
                        trn_json_gnum(b[3], 40, 6, r.c_var_min), trn_json_gnum(b[4], 40, 6, r.c_eps_rec),
                        trn_json_gnum(b[5], 40, 6, r.c_bias_rec), trn_json_gnum(b[6], 40, 6, r.c_bias_model), r.c_mats,
                        r.c_over, trn_json_gnum(b[7], 40, 6, r.c_sigma_max), trn_json_gnum(b[8], 40, 6, r.c_cap),
                        r.c_worst);
                if (cfg.maxent)
                    fprintf(stderr, "wt2_train: maxent (A): W_q/W_k std %.4g -> %.4g (layer 0; T at step 0 %.3f), "
                                    "%d of %d layers in the band\n", r.a_sigma_before, r.a_sigma_q, r.a_T, r.a_met,
                            r.a_applied);
                if (cfg.maxent_c)
                    fprintf(stderr, "wt2_train: maxent (C): norm eps: ceas_norm_eps suggests %.3g (min row variance %.3g; "
                                    "the model's fixed 1e-5 shrinks that row by %.3g%%, not changed); spectral norms of %d "
                                    "block matrices, largest %.4g (%s), %d over the cap %g%s; the activation PI "
                                    "controller is --maxent-pi\n",
                            r.c_eps_rec, r.c_var_min, 100.0 * r.c_bias_model, r.c_mats, r.c_sigma_max, r.c_worst, r.c_over,
                            r.c_cap, r.c_cap > 0 ? " (those over it are rescaled to it)" : " (report only)");
            }
            if (cfg.maxent_pi)
                fprintf(stderr, "wt2_train: maxent (C) PI: each GELU layer's output entropy held in [%g, %g] by its gain "
                                "a_l of gelu(a_l u), every %d steps (kp %g, ki %g); metrics lines \"maxent_pi\"\n",
                        (double)cfg.maxent_pi_band[0], (double)cfg.maxent_pi_band[1], cfg.maxent_pi_every,
                        (double)cfg.maxent_pi_kp, (double)cfg.maxent_pi_ki);
            if (fflush(metrics) != 0 || ferror(metrics)) {
                fprintf(stderr, "wt2_train: cannot write %s: %s\n", path, errno ? strerror(errno) : "I/O error");
                rc = 1;
                goto out0;
            }
        }
    } else {
        if (ex_stop_install() != 0) fail_all(1, "cannot install the signal handlers");
        trn_set_stop_flag(t, ex_stop_flag());
        snprintf(ckpt_path, sizeof ckpt_path, "%s/ckpt.safetensors", cfg.out_dir);
        snprintf(path, sizeof path, "%s/metrics.jsonl", cfg.out_dir);
    }
    rc = 0;
out0:
    /* what rank 0 found, on every process (one rank: its own status) */
    rc = agree_rank0(rc);
    if (rc != 0) {
        g_agreed = 1;
        goto out;
    }
    fprintf(stderr, "wt2_train: preset %s, %zu parameters, %lld steps (%lld per epoch), %lld tokens/step%s\n",
            cfg.preset, mdl_num_params(trn_model(t)), trn_total_steps(t), trn_steps_per_epoch(t),
            (long long)cfg.batch * cfg.context, cfg.max_steps ? " (stopping early at --max-steps)" : "");

    steps0 = trn_steps_done(t);
    skipped0 = trn_steps_skipped(t);
    limit = trn_total_steps(t);
    if (cfg.max_steps > 0 && cfg.max_steps < limit) limit = cfg.max_steps;
    t0 = now_s();
    last_ckpt = t0;
    {
        /* progress: a redrawn bar on a terminal; plain lines at a modest rate in a log */
        double last_print = 0, ema_loss = NAN, every = tty ? 0.5 : progress_seconds;
        int bar = 0;
        while ((trn_steps_done(t) < limit || trn_pending(t)) && !stop_agreed(&metrics_failed)) {
            trn_step_info in;
            double el;
            int ckpt_now;
            rc = trn_step(t, &in);
            if (rc == TRN_ESTOPPED) break; /* in the step's periodic evaluation: saved below */
            if (rc != TRN_OK) {
                fprintf(stderr, "%swt2_train: training step failed: %s\n", bar ? "\n" : "", trn_strerror(rc));
                if (g_size > 1) fail_all(1, "wt2_train: a training step failed on this process: the job ends");
                rc = 1;
                goto out;
            }
            /* the processes' weights and optimizer state, compared every 100 steps (a
               collective: before anything that may skip the rest of this iteration) */
            if (g_size > 1 && in.T && trn_steps_done(t) % 100 == 0) {
                if (trn_replicas_agree(t, &same) != TRN_OK) fail_all(1, "wt2_train: the replica check failed");
                if (!same) fail_all(1, "wt2_train: the processes' weights differ (a replica diverged)");
            }
            /* periodic checkpoints: every --ckpt-every steps and every --ckpt-minutes; with
               ZeRO-1 the moments are gathered for it (a collective, here for the same reason):
               every process takes rank 0's decision */
            ckpt_now = (in.T && cfg.ckpt_every > 0 && trn_steps_done(t) % cfg.ckpt_every == 0) ||
                       (ckpt_minutes > 0 && now_s() - last_ckpt >= 60.0 * ckpt_minutes);
            if (zero_on) {
                ckpt_now = agree_rank0(ckpt_now);
                if (ckpt_now && trn_gather_moments(t) != TRN_OK)
                    fail_all(1, "wt2_train: gathering the sharded moments for a checkpoint failed");
            }
            if (trn_metrics_error(t) && !metrics_failed) {
                fprintf(stderr, "%swt2_train: writing %s failed at step %lld: %s\n", bar ? "\n" : "", path,
                        trn_steps_done(t), strerror(trn_metrics_error(t)));
                bar = 0;
                metrics_failed = 1;
                if (g_size == 1) break;
                continue; /* every process stops at the next agreement (stop_agreed) */
            }
            tokens += (long long)in.T * in.B;
            if (isfinite(in.ce) && in.T) ema_loss = isnan(ema_loss) ? in.ce : 0.9 * ema_loss + 0.1 * in.ce;
            el = now_s() - t0;
            if (el - last_print > every || trn_steps_done(t) == limit || in.evaluated) {
                double tps = tokens / (el > 0 ? el : 1e-9);
                long long done = trn_steps_done(t) - steps0;
                double left = done > 0 ? (double)(limit - trn_steps_done(t)) * (el / (double)done) : 0.0;
                long long sk = trn_steps_skipped(t) - skipped0;
                if (tty) {
                    int w = 24, k, fill = (int)((double)w * (double)trn_steps_done(t) / (double)limit);
                    fprintf(stderr, "\r[");
                    for (k = 0; k < w; k++) fputc(k < fill ? '#' : '.', stderr);
                    fprintf(stderr, "] ");
                    bar = 1;
                } else {
                    fprintf(stderr, "wt2_train: ");
                }
                fprintf(stderr, "step %lld/%lld ce %.3f %.0f tok/s ETA %.0fs", trn_steps_done(t), limit, ema_loss,
                        tps, left);
                if (sk) fprintf(stderr, " (%lld skipped: non-finite)", sk);
                if (in.evaluated) fprintf(stderr, " | eval CE %.4f (PPL %.1f)", in.val_ce, exp(in.val_ce));
                if (!tty || in.evaluated) {
                    fputc('\n', stderr);
                    bar = 0;
                }
                last_print = el;
            }
            if (in.evaluated && sample_n > 0 && g_rank == 0)
                print_sample(trn_model(t), val_ids, n_val, sample_n, cfg.seed * 0x9E3779B97F4A7C15ULL + (uint64_t)trn_steps_done(t),
                             trn_steps_done(t), stok);
            if (ckpt_now) { /* decided above */
                if (g_rank == 0 && trn_save(t, ckpt_path, err, sizeof err) != TRN_OK) {
                    fprintf(stderr, "%swt2_train: WARNING: periodic checkpoint at step %lld FAILED: %s\n",
                            bar ? "\n" : "", trn_steps_done(t), err);
                    bar = 0;
                    save_failures++;
                }
                last_ckpt = now_s();
            }
        }
        if (bar) fprintf(stderr, "\n");
    }
    if (g_size > 1) { /* a stop seen during an evaluation (agreed there), or since: the same everywhere */
        (void)stop_agreed(&metrics_failed);
        if (trn_replicas_agree(t, &same) != TRN_OK) fail_all(1, "wt2_train: the replica check failed");
        if (!same) fail_all(1, "wt2_train: the processes' weights differ (a replica diverged)");
    }
    t_train = now_s() - t0;
    ran = trn_steps_done(t) - steps0;
    skipped = trn_steps_skipped(t) - skipped0;
    if (zero_on && trn_gather_moments(t) != TRN_OK)
        fail_all(1, "wt2_train: gathering the sharded moments for the checkpoint failed");
    if (g_rank != 0) {
        /* rank 0 writes the checkpoint */
    } else if (trn_save(t, ckpt_path, err, sizeof err) != TRN_OK) {
        fprintf(stderr, "wt2_train: ERROR: the checkpoint at step %lld could not be written: %s\n", trn_steps_done(t),
                err);
    } else {
        final_saved = 1;
        fprintf(stderr, "wt2_train: checkpoint %s (step %lld)\n", ckpt_path, trn_steps_done(t));
    }
    final_saved = agree_rank0(final_saved);
    if (metrics_failed) {
        fprintf(stderr, "wt2_train: FAILED: %s could not be written (%s); %s\n", path,
                strerror(trn_metrics_error(t)),
                final_saved ? "the checkpoint holds the work: free space, then --resume it"
                            : "NO checkpoint was written either");
        rc = 1;
        g_agreed = 1; /* rank 0's failure, agreed by stop_agreed */
        goto out;
    }
    if (stop_sig()) {
        rc = stopped_exit(final_saved, trn_pending(t) ? "a periodic evaluation" : "training", trn_steps_done(t),
                          ckpt_path, cfg.out_dir);
        g_agreed = 1;
        goto out;
    }

    /* final evaluation: sequential, non-overlapping chunks of the training context; a stop
       request ends it (the checkpoint above is complete: a resume evaluates again) */
    wsel = cfg.final_weights >= 0 ? cfg.final_weights : trn_final_weights(t);
    fprintf(stderr, "wt2_train: final evaluation at step %lld\n", trn_steps_done(t));
    ep.label = have_full ? "final evaluation (validation)" : "final evaluation (held-out validation tail)";
    rc = trn_evaluate(t, val_ids, n_val, cfg.context, wsel, cfg.final_max_chunks, &val_ce, &val_tok, &used);
    ep.label = "final evaluation (test)";
    if (rc == TRN_OK && tok_test.n > 1)
        rc = trn_evaluate(t, tok_test.ids, tok_test.n, cfg.context, wsel, cfg.final_max_chunks, &test_ce, &test_tok, &used);
    if (ep.drawn) fprintf(stderr, "\n"); /* stopped mid-bar */
    if (rc == TRN_ESTOPPED) {
        if (g_size > 1) (void)stop_agreed(&metrics_failed); /* the signal's number, on every process */
        rc = stopped_exit(final_saved, "the final evaluation", trn_steps_done(t), ckpt_path, cfg.out_dir);
        g_agreed = 1;
        goto out;
    }
    if (rc != TRN_OK) {
        fprintf(stderr, "wt2_train: evaluation failed: %s\n", trn_strerror(rc));
        if (g_size > 1) fail_all(1, "wt2_train: the final evaluation failed on this process: the job ends");
        rc = 1;
        goto out;
    }
    /* non-finite numbers are null: every line stays JSON */
    errno = 0;
    if (metrics) /* rank 0 */
    fprintf(metrics, "{\"type\":\"final\",\"step\":%lld,\"weights\":\"%s\",\"val_ce\":%s,\"val_ppl\":%s,"
                     "\"val_tokens\":%lld,\"test_ce\":%s,\"test_ppl\":%s,\"test_tokens\":%lld,\"skipped\":%lld}\n",
            trn_steps_done(t), trn_weights_name(used), trn_json_num(jb[0], 40, 6, val_ce),
            trn_json_num(jb[1], 40, 4, exp(val_ce)), val_tok, trn_json_num(jb[2], 40, 6, test_ce),
            trn_json_num(jb[3], 40, 4, exp(test_ce)), test_tok, skipped);
    if (metrics && (fflush(metrics) != 0 || ferror(metrics))) {
        fprintf(stderr, "wt2_train: FAILED: writing the final line of %s failed: %s\n", path,
                errno ? strerror(errno) : "I/O error");
        metrics_failed = 1;
    }
    fprintf(stderr, "wt2_train: %lld steps, %lld tokens in %.1f s (%.0f tok/s); evaluated with %s weights\n",
            trn_steps_done(t), tokens, t_train, tokens / (t_train > 0 ? t_train : 1e-9), trn_weights_name(used));
    fprintf(stderr, "wt2_train: %s CE %.4f  PPL %.2f  (%lld tokens, context %d, stride %d)\n",
            have_full ? "validation" : "held-out validation tail", val_ce, exp(val_ce), val_tok, cfg.context, cfg.context);
    fprintf(stderr, "wt2_train: test CE %.4f  PPL %.2f  (%lld tokens)\n", test_ce, exp(test_ce), test_tok);
    if (json && g_rank == 0)
        printf("{\"val_ce\":%s,\"val_ppl\":%s,\"test_ce\":%s,\"test_ppl\":%s,\"tokens\":%lld,"
               "\"tokens_per_s\":%.1f,\"params\":%zu,\"steps\":%lld,\"skipped\":%lld,\"weights\":\"%s\","
               "\"train_split\":\"%s\",\"val_split\":\"%s\",\"preset\":\"%s\",\"seed\":%llu}\n",
               trn_json_num(jb[0], 40, 6, val_ce), trn_json_num(jb[1], 40, 4, exp(val_ce)),
               trn_json_num(jb[2], 40, 6, test_ce), trn_json_num(jb[3], 40, 4, exp(test_ce)), tokens,
               tokens / (t_train > 0 ? t_train : 1e-9), mdl_num_params(trn_model(t)), trn_steps_done(t), skipped,
               trn_weights_name(used), have_full ? "train" : "valid (head)",
               have_full ? "valid" : "valid (held-out tail)", cfg.preset, (unsigned long long)cfg.seed);
    rc = 0;
    if (json && (fflush(stdout) != 0 || ferror(stdout))) {
        fprintf(stderr, "wt2_train: FAILED: writing the --json results to stdout failed: %s\n", strerror(errno));
        rc = 1;
    }
    /* what did not work makes the exit status non-zero, with the reason */
    if (!isfinite(val_ce) || (tok_test.n > 1 && !isfinite(test_ce))) {
        fprintf(stderr, "wt2_train: FAILED: the final loss is not finite (the run diverged: %lld of %lld steps skipped)\n",
                skipped, ran);
        rc = 1;
    } else if (ran > 0 && 2 * skipped > ran) {
        fprintf(stderr, "wt2_train: FAILED: %lld of the %lld steps of this run were skipped (non-finite loss or "
                        "gradient): the run diverged\n", skipped, ran);
        rc = 1;
    } else if (skipped > 0) {
        fprintf(stderr, "wt2_train: warning: %lld of %lld steps were skipped (non-finite loss or gradient)\n", skipped,
                ran);
    }
    if (!final_saved) {
        fprintf(stderr, "wt2_train: FAILED: the final checkpoint was not written (see above)\n");
        rc = 1;
    }
    if (save_failures) {
        fprintf(stderr, "wt2_train: FAILED: %d periodic checkpoint(s) could not be written\n", save_failures);
        rc = 1;
    }
    if (metrics_failed) rc = 1;
    if (g_rank == 0 && plot_metrics(cfg.out_dir, err, sizeof err) != 0) {
        fprintf(stderr, "wt2_train: FAILED: %s\n", err);
        rc = 1;
    }
    if (g_size > 1 && rc == 0 && !same) rc = 1;
    rc = agree_rank0(rc); /* the run's status is rank 0's (its files), on every process */
    g_agreed = 1;
out:
    if (metrics) {
        int bad, e;
        errno = 0;
        bad = fflush(metrics) != 0 || ferror(metrics);
        e = errno;
        if (fclose(metrics) != 0 && !bad) {
            bad = 1;
            e = errno;
        }
        if (bad && !metrics_failed) {
            fprintf(stderr, "wt2_train: FAILED: writing %s/metrics.jsonl failed: %s\n", cfg.out_dir,
                    e ? strerror(e) : "I/O error");
            if (rc == 0 || rc >= 128) rc = 1;
        }
    }
    ex_unlock_dir(lock_fd);
    free(mxres);
    trn_destroy(t);
    dpn_destroy(g_nccl);
    g_nccl = NULL;
    dpn_unload(&g_nccl_api);
    (void)mdl_device_release(); /* the cuBLAS handle and the scratch caches (nothing without a device) */
    wt2_tokens_free(&tok_train);
    wt2_tokens_free(&tok_eval);
    wt2_tokens_free(&tok_test);
    bpe_free(stok);
    return rc;
}

/* The process: one rank without MPI (the plain build) or started without mpirun; under
   mpirun (the MPI build) one of N. Ranks other than 0 write nothing and keep quiet
   (their stderr goes to /dev/null) except for their own failures (fail_all). An exit
   status every process agrees on ends with MPI_Finalize; any other non-zero status ends
   the whole job (dp_fail: MPI_Abort with it). */
int main(int argc, char **argv)
{
    char err[256];
    int rc;
    ex_wait_policy(argv); /* before MPI starts: it may re-execute the program (exio.h) */
    if (dp_init(&g_comm, &argc, &argv, err, sizeof err) != DP_OK) {
        fprintf(stderr, "wt2_train: %s\n", err);
        return 1;
    }
    g_rank = dp_rank(g_comm);
    g_size = dp_size(g_comm);
    if (g_rank > 0) {
        int nul = open("/dev/null", O_WRONLY);
        fflush(stderr);
        g_saved_stderr = dup(2);
        if (nul >= 0) {
            dup2(nul, 2);
            close(nul);
        }
    }
    rc = wt2_main(argc, argv);
    fflush(NULL);
    if (g_size > 1 && rc != 0 && !g_agreed) fail_all(rc, NULL); /* does not return */
    dp_finalize(g_comm);
    return rc;
}
