/* exio.h - the example programs' shared rules for losing nothing (examples/common only, not
   part of the libraries). Header-only (static functions); a program that includes it defines
   _POSIX_C_SOURCE 200809L before its first #include.

   Numbers from outside (flags, JSON fields) are parsed whole and range-checked:
     ex_parse_int / ex_parse_ll / ex_parse_double (s, lo, hi, &out) -> 0, or -1 when s is
     not one number (junk, trailing characters, empty), is out of [lo, hi] or not finite.
   Inputs are read, never guessed at:
     ex_read_file(path, &buf, &n, err, errlen): the whole of a regular file (or FIFO) into a
     NUL-terminated malloc'd buffer; a directory, a missing or unreadable file and a read
     error are errors with the path and the reason. ex_check_input(path, ...) the same test
     without reading.
   Outputs never replace an input and never appear half-written:
     ex_same_file(a, b): 1 when both name the same existing file (device and inode).
     ex_out_open(&o, path, err, errlen) opens "<path>.tmp.<pid>" exclusively; write to o.f;
     ex_out_commit(&o, err, errlen) flushes, checks the stream's error flag, fsyncs, closes
     and renames it over path (the only moment path changes); ex_out_discard(&o) removes the
     temporary. A failed write at any point leaves path as it was.
   A directory is written by one run at a time:
     ex_lock_dir(dir, &fd, err, errlen) takes an exclusive, non-blocking POSIX record lock on
     "<dir>/.lock" (released when the process ends or at ex_unlock_dir); a second run gets an
     error naming the directory and the holder's pid.
   Every way a run is stopped is seen:
     ex_stop_install() routes SIGINT, SIGTERM and SIGHUP to one flag; ex_stop_signal() is
     the signal received (0: none); ex_stop_exit_code() is 128 + that signal (130, 143, 129).
     A second signal of any of the three ends the process at once (exit 128 + signal).
   Waiting threads are polite (issue 41):
     ex_wait_policy(argv), first thing in main: unless the user chose an OpenMP wait policy
     (OMP_WAIT_POLICY or GOMP_SPINCOUNT set), sets GOMP_SPINCOUNT=EX_SPINCOUNT (a bounded
     spin, then the runtime's futex sleep) and re-executes the program (GNU libgomp reads
     its environment when it is loaded, before main). ex_wait_policy_desc() says what is in
     force. ATTNKIT_WAIT_POLICY set to anything leaves the runtime's default alone. The
     library headers never touch the environment: this is the programs' choice.
     Why 5000: on 2 cores with 2 / 8 busy processes beside training, libgomp's default spin
     (300,000) gave 0.72-0.80 / 0.47-0.59 of the fair share, passive waiting 1.20 / 1.24 but
     6-19 % less speed on a quiet machine, 5000 1.04 / 1.00 at the quiet speed of the default
     within noise (docs/BENCHMARKS.md, 2026-11-27, `bench_train --contended 2,8`). */
#ifndef ATTNKIT_EX_EXIO_H
#define ATTNKIT_EX_EXIO_H

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "errf.h"

#if defined(__GNUC__) || defined(__clang__)
#define EX__UNUSED __attribute__((unused))
#else
#define EX__UNUSED
#endif

/* ------------------------------------------------------------------ numbers */
EX__UNUSED static int ex_parse_ll(const char *s, long long lo, long long hi, long long *out)
{
    char *e;
    long long v;
    if (!s || !*s || !out) return -1;
    errno = 0;
    v = strtoll(s, &e, 10);
    if (errno || e == s || *e || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

EX__UNUSED static int ex_parse_int(const char *s, int lo, int hi, int *out)
{
    long long v;
    if (!out || ex_parse_ll(s, lo, hi, &v)) return -1;
    *out = (int)v;
    return 0;
}

EX__UNUSED static int ex_parse_double(const char *s, double lo, double hi, double *out)
{
    char *e;
    double v;
    if (!s || !*s || !out) return -1;
    errno = 0;
    v = strtod(s, &e);
    if (errno == ERANGE && fabs(v) > 1.0) return -1; /* overflow (underflow to ~0 is fine) */
    if (e == s || *e || !isfinite(v) || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* ------------------------------------------------------------------ inputs */
EX__UNUSED static int ex_check_input(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (!path || !*path) return ex_errf(err, errlen, -1, "empty input path");
    if (stat(path, &st) != 0)
        return ex_errf(err, errlen, -1, "cannot read '%s': %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return ex_errf(err, errlen, -1, "'%s' is a directory, not a file", path);
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
        return ex_errf(err, errlen, -1, "'%s' is not a regular file", path);
    if (access(path, R_OK) != 0)
        return ex_errf(err, errlen, -1, "cannot read '%s': %s", path, strerror(errno));
    return 0;
}

/* The whole file, NUL-terminated (*n excludes the NUL); max_bytes bounds it (0: 1 GiB). */
EX__UNUSED static int ex_read_file(const char *path, char **buf, size_t *n, size_t max_bytes,
                                   char *err, size_t errlen)
{
    FILE *f;
    char *b = NULL;
    size_t len = 0, cap = 0;
    if (!buf || !n) return ex_errf(err, errlen, -1, "ex_read_file: NULL output");
    *buf = NULL;
    *n = 0;
    if (ex_check_input(path, err, errlen)) return -1;
    if (!max_bytes) max_bytes = (size_t)1 << 30;
    f = fopen(path, "rb");
    if (!f) return ex_errf(err, errlen, -1, "cannot open '%s': %s", path, strerror(errno));
    for (;;) {
        size_t got;
        if (cap - len < 65536) {
            size_t nc = cap ? cap * 2 : 65536 + 1;
            char *nb;
            if (nc > max_bytes + 65536 + 1) nc = max_bytes + 65536 + 1;
            if (nc <= cap) {
                free(b);
                fclose(f);
                return ex_errf(err, errlen, -1, "'%s' is larger than %zu bytes", path, max_bytes);
            }
            nb = (char *)realloc(b, nc);
            if (!nb) {
                free(b);
                fclose(f);
                return ex_errf(err, errlen, -1, "out of memory reading '%s'", path);
            }
            b = nb;
            cap = nc;
        }
        got = fread(b + len, 1, cap - len - 1, f);
        len += got;
        if (len > max_bytes) {
            free(b);
            fclose(f);
            return ex_errf(err, errlen, -1, "'%s' is larger than %zu bytes", path, max_bytes);
        }
        if (got == 0) break;
    }
    if (ferror(f)) {
        int e = errno;
        free(b);
        fclose(f);
        return ex_errf(err, errlen, -1, "read error on '%s': %s", path, e ? strerror(e) : "I/O error");
    }
    fclose(f);
    b[len] = '\0';
    *buf = b;
    *n = len;
    return 0;
}

/* ------------------------------------------------------------------ outputs */
EX__UNUSED static int ex_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (!a || !b || stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

typedef struct ex_out {
    FILE *f;
    char path[4096];
    char tmp[4096 + 32];
} ex_out;

EX__UNUSED static int ex_out_open(ex_out *o, const char *path, char *err, size_t errlen)
{
    int fd;
    struct stat st;
    if (!o) return ex_errf(err, errlen, -1, "ex_out_open: NULL");
    o->f = NULL;
    o->tmp[0] = '\0';
    if (!path || !*path) return ex_errf(err, errlen, -1, "empty output path");
    if (strlen(path) >= sizeof o->path) return ex_errf(err, errlen, -1, "output path too long");
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return ex_errf(err, errlen, -1, "output '%s' is a directory", path);
    strcpy(o->path, path);
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld", path, (long)getpid());
    fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 && errno == EEXIST) { /* a stale one of this pid: ours to replace */
        unlink(o->tmp);
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    }
    if (fd < 0) {
        int e = errno;
        o->tmp[0] = '\0';
        return ex_errf(err, errlen, -1, "cannot create '%s.tmp.*': %s", path, strerror(e));
    }
    o->f = fdopen(fd, "w");
    if (!o->f) {
        int e = errno;
        close(fd);
        unlink(o->tmp);
        o->tmp[0] = '\0';
        return ex_errf(err, errlen, -1, "cannot open '%s': %s", o->tmp, strerror(e));
    }
    return 0;
}

EX__UNUSED static void ex_out_discard(ex_out *o)
{
    if (!o) return;
    if (o->f) fclose(o->f);
    o->f = NULL;
    if (o->tmp[0]) unlink(o->tmp);
    o->tmp[0] = '\0';
}

EX__UNUSED static int ex_out_commit(ex_out *o, char *err, size_t errlen)
{
    int e = 0, bad;
    if (!o || !o->f) return ex_errf(err, errlen, -1, "ex_out_commit: nothing open");
    bad = fflush(o->f) != 0 || ferror(o->f);
    if (bad) e = errno;
    if (!bad && fsync(fileno(o->f)) != 0 && errno != EINVAL && errno != EROFS) {
        bad = 1;
        e = errno;
    }
    if (fclose(o->f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    o->f = NULL;
    if (bad) {
        unlink(o->tmp);
        o->tmp[0] = '\0';
        return ex_errf(err, errlen, -1, "cannot write '%s': %s (left unchanged)", o->path,
                       e ? strerror(e) : "I/O error");
    }
    if (rename(o->tmp, o->path) != 0) {
        e = errno;
        unlink(o->tmp);
        o->tmp[0] = '\0';
        return ex_errf(err, errlen, -1, "cannot rename into '%s': %s", o->path, strerror(e));
    }
    o->tmp[0] = '\0';
    return 0;
}

/* ------------------------------------------------------------------ directory lock */
EX__UNUSED static int ex_lock_dir(const char *dir, int *fd_out, char *err, size_t errlen)
{
    char p[4200];
    struct flock fl;
    int fd;
    if (!dir || !fd_out) return ex_errf(err, errlen, -1, "ex_lock_dir: NULL");
    *fd_out = -1;
    if (snprintf(p, sizeof p, "%s/.lock", dir) >= (int)sizeof p)
        return ex_errf(err, errlen, -1, "directory path too long");
    fd = open(p, O_RDWR | O_CREAT, 0644);
    if (fd < 0) return ex_errf(err, errlen, -1, "cannot create '%s': %s", p, strerror(errno));
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    if (fcntl(fd, F_SETLK, &fl) != 0) {
        int e = errno;
        long pid = 0;
        if (e == EACCES || e == EAGAIN) {
            if (fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK) pid = (long)fl.l_pid;
            close(fd);
            return ex_errf(err, errlen, -1,
                           "'%s' is in use by another run (pid %ld holds %s); wait for it, or "
                           "choose another directory", dir, pid, p);
        }
        close(fd);
        return ex_errf(err, errlen, -1, "cannot lock '%s': %s", p, strerror(e));
    }
    *fd_out = fd;
    return 0;
}

EX__UNUSED static void ex_unlock_dir(int fd)
{
    if (fd >= 0) close(fd); /* closing releases the record lock */
}

/* ------------------------------------------------------------------ wait policy */
#define EX_SPINCOUNT "5000"

EX__UNUSED static void ex_wait_policy(char **argv)
{
#ifdef _OPENMP
    if (!argv || !argv[0] || getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") ||
        getenv("ATTNKIT_WAIT_POLICY"))
        return; /* the user's choice, or already re-executed */
    if (setenv("GOMP_SPINCOUNT", EX_SPINCOUNT, 1) != 0 ||
        setenv("ATTNKIT_WAIT_POLICY", "GOMP_SPINCOUNT=" EX_SPINCOUNT, 1) != 0)
        return;
    fflush(NULL);
    execv("/proc/self/exe", argv);
    /* no /proc (not Linux) or no exec: go on under the runtime's default, and say so */
    unsetenv("GOMP_SPINCOUNT");
    setenv("ATTNKIT_WAIT_POLICY", "the OpenMP runtime's default (re-exec failed)", 1);
#else
    (void)argv;
#endif
}

/* what ex_wait_policy left in force, for the programs' start-up line */
EX__UNUSED static const char *ex_wait_policy_desc(void)
{
    const char *a = getenv("ATTNKIT_WAIT_POLICY");
    if (a) return a;
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return "the policy the environment sets";
    return "the OpenMP runtime's default";
}

/* ------------------------------------------------------------------ stop signals */
static volatile sig_atomic_t ex__stop_sig;

static void ex__on_stop(int sig)
{
    if (ex__stop_sig) _exit(128 + sig); /* a second request: stop now */
    ex__stop_sig = sig;
}

EX__UNUSED static int ex_stop_install(void)
{
    struct sigaction sa;
    int sigs[3] = {SIGINT, SIGTERM, SIGHUP}, i;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = ex__on_stop;
    sigemptyset(&sa.sa_mask);
    for (i = 0; i < 3; i++)
        if (sigaction(sigs[i], &sa, NULL) != 0) return -1;
    return 0;
}

EX__UNUSED static int ex_stop_signal(void) { return (int)ex__stop_sig; }
EX__UNUSED static int ex_stop_exit_code(void) { return ex__stop_sig ? 128 + (int)ex__stop_sig : 0; }
/* the flag itself, for library code that polls a `volatile sig_atomic_t *` */
EX__UNUSED static volatile sig_atomic_t *ex_stop_flag(void) { return &ex__stop_sig; }

#endif
