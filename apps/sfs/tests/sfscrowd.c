/* SPDX-License-Identifier: MIT */
/*
 * sfscrowd.c: how long a real client waits for sfsd while connections that
 * never send a byte crowd it (doc/sfs.md, "Faults and hostile clients"; run
 * by apps/sfs/tests/sfs-crowd.sh).
 *
 *   sfscrowd SILENT [SFSD-ARGUMENT...]
 *
 * Starts apps/sfs/sfsd (from the build directory) on a fresh root holding
 * one 64 KB file, with the given arguments; opens SILENT connections to it
 * from 127.0.0.1 that never send a byte; waits until sfsd has taken them in
 * (its descriptor count holds still for 300 ms); then, REAL times in turn,
 * a real client connects, runs the key exchange, a LOOKUP and a READ of the
 * file (its bytes checked), timed from the connect to the READ's reply.
 * Prints each time (and the parts of it the connect and the key exchange
 * took), the slowest, how many silent connections sfsd closed
 * (evictions, timeouts), and sfsd's statistics line.
 *
 * Exit status 0 if every real client was served within LIMIT_MS, 1 if not
 * or on any failure (with a message). Descriptors: it raises its soft
 * RLIMIT_NOFILE to the hard limit, and fails if that cannot hold SILENT
 * connections plus a margin (sfsd, its child, inherits the raised limit).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/measure.h"
#include "apps/sfs/tests/sfsclient.h"

enum {
    REAL = 5,          /* real clients, one after the other */
    LIMIT_MS = 1000,   /* each must be served within this */
    FILE_BYTES = 65536,
    FD_MARGIN = 64,    /* descriptors besides the silent connections */
    MAX_SILENT = 100000,
};

static char top[64];
static struct sfsd_proc srv;
static bool running;

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

static void cleanup(void)
{
    if (running)
        kill(srv.pid, SIGKILL);
    if (top[0])
        nftw(top, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("sfscrowd: FAIL: ", stdout);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    exit(1);
}

static uint8_t byte_at(size_t i)
{
    return (uint8_t)(i * 131 + (i >> 8));
}

/* root/data.bin, FILE_BYTES of byte_at(). */
static void make_root(char *root, size_t n)
{
    strcpy(top, "/tmp/sfscrowd-XXXXXX");
    if (!mkdtemp(top))
        die("mkdtemp: %s", strerror(errno));
    snprintf(root, n, "%s/root", top);
    char path[128];
    snprintf(path, sizeof path, "%s/data.bin", root);
    static uint8_t data[FILE_BYTES];
    for (size_t i = 0; i < FILE_BYTES; i++)
        data[i] = byte_at(i);
    FILE *f = NULL;
    if (mkdir(root, 0755) != 0 || !(f = fopen(path, "wb")) ||
        fwrite(data, 1, sizeof data, f) != sizeof data || fclose(f) != 0)
        die("writing %s: %s", path, strerror(errno));
}

/* The soft descriptor limit up to the hard one: room for `need`. */
static void fit_descriptors(unsigned need)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        die("getrlimit: %s", strerror(errno));
    if (rl.rlim_cur < need && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            die("setrlimit: %s", strerror(errno));
    }
    if (rl.rlim_cur < need)
        die("%u descriptors needed, the hard limit is %lu (ulimit -Hn)", need,
            (unsigned long)rl.rlim_cur);
}

/* sfsd's descriptor count once it holds still for 300 ms (at most 30 s). */
static int settled_fds(void)
{
    int fds = proc_fds(srv.pid);
    for (int still = 0, i = 0; still < 30 && i < 3000; i++) {
        sleep_us(10000);
        int now = proc_fds(srv.pid);
        still = now == fds ? still + 1 : 0;
        fds = now;
    }
    return fds;
}

/* One real client: connect, key exchange, LOOKUP, READ (checked). @return
 * the milliseconds from connect to the READ's reply, and in *connect_ms and
 * *hello_ms the parts the TCP connect and the key exchange took; dies on a
 * failure. */
static double real_client(int n, double *connect_ms, double *hello_ms)
{
    struct sfsc c;
    struct sfs_kx kx;
    struct sfs_reply rep;
    uint64_t h, t0 = now_ns();
    int fd = sfs_dial(srv.port, 15000);
    if (fd < 0)
        die("real client %d: connect: %s", n, strerror(errno));
    uint64_t t1 = now_ns();
    if (sfs_kx_new(&kx) != 0)
        die("real client %d: sfs_kx_new failed", n);
    bool keyed = sfsc_handshake(&c, fd, &kx, kx.hello);
    sfs_kx_free(&kx);
    if (!keyed)
        die("real client %d: %s", n, c.why);
    uint64_t t2 = now_ns();
    int st = sfsc_lookup(&c, "data.bin", 8, &h, NULL);
    if (st != 0)
        die("real client %d: LOOKUP: %s", n, st < 0 ? c.why : strerror(st));
    st = sfsc_read(&c, h, 0, FILE_BYTES, &rep);
    if (st != 0 || rep.count != FILE_BYTES)
        die("real client %d: READ: %s", n, st < 0 ? c.why : st ? strerror(st) : "short");
    double ms = (double)(now_ns() - t0) / 1e6;
    *connect_ms = (double)(t1 - t0) / 1e6;
    *hello_ms = (double)(t2 - t1) / 1e6;
    for (size_t i = 0; i < FILE_BYTES; i++)
        if (rep.data[i] != byte_at(i))
            die("real client %d: wrong byte at %zu", n, i);
    sfsc_close(&c);
    return ms;
}

int main(int argc, char **argv)
{
    char *end, root[96], why[256];
    long silent = argc > 1 ? strtol(argv[1], &end, 10) : -1;
    if (argc < 2 || *end || silent < 0 || silent > MAX_SILENT) {
        fprintf(stderr, "usage: sfscrowd SILENT [SFSD-ARGUMENT...]   (SILENT <= %d)\n",
                MAX_SILENT);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    fit_descriptors((unsigned)silent + FD_MARGIN);
    atexit(cleanup);
    make_root(root, sizeof root);
    if (!sfsd_start(&srv, root, (const char *const *)argv + 2, why, sizeof why))
        die("%s", why);
    running = true;
    int base = settled_fds();

    int *fds = malloc(sizeof(int) * (size_t)(silent ? silent : 1));
    uint64_t t0 = now_ns();
    for (long i = 0; i < silent; i++)
        if ((fds[i] = sfs_dial(srv.port, 10000)) < 0)
            die("silent connection %ld: %s", i, strerror(errno));
    double open_ms = (double)(now_ns() - t0) / 1e6;
    int held = settled_fds();
    printf("sfscrowd: %ld silent connections opened in %.0f ms; sfsd holds %d descriptors "
           "(%d before)\n", silent, open_ms, held, base);

    double worst = 0;
    for (int n = 0; n < REAL; n++) {
        double connect_ms, hello_ms, ms = real_client(n, &connect_ms, &hello_ms);
        printf("sfscrowd: real client %d served in %.1f ms (connect %.1f ms, key exchange %.1f "
               "ms)\n", n, ms, connect_ms, hello_ms);
        worst = ms > worst ? ms : worst;
    }
    long closed = 0;
    for (long i = 0; i < silent; i++) {
        char b;
        ssize_t r = recv(fds[i], &b, 1, MSG_DONTWAIT);
        closed += r == 0 || (r < 0 && errno == ECONNRESET);
    }
    struct sfsd_report rep;
    bool stopped = sfsd_stop(&srv, 20000, &rep);
    running = false;
    printf("%s", rep.line);
    printf("sfscrowd: %ld silent, slowest real client %.1f ms (limit %d ms); sfsd closed %ld of "
           "the silent connections\n", silent, worst, LIMIT_MS, closed);
    if (!stopped)
        die("sfsd did not exit 0 with its statistics on SIGTERM");
    if (worst >= LIMIT_MS)
        die("a real client waited %.0f ms", worst);
    for (long i = 0; i < silent; i++)
        close(fds[i]);
    free(fds);
    printf("sfscrowd: PASS\n");
    return 0;
}
