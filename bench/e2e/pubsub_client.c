/* SPDX-License-Identifier: MIT */
/*
 * pubsub_client.c: the load client of the publish/subscribe benchmark
 * (protocol: bench/e2e/pubsub.h), which checks every delivery
 * (pubsub_load.c); its figures, the drain check's verdict on the broker, the
 * loopback floor, and main() for the protocol checks of pubsub_checks.c.
 *
 *   pubsub_client --port P [--server-pid PID] [--subs N] [--rooms R]
 *                 [--rooms-per-sub K] [--pubs M] [--msgs X] [--payload B]
 *                 [--window W] [--threads 1|2] [--seconds-limit S] [--csv-line]
 *   pubsub_client --port P --check-protocol | --check-slow [--max-output B]
 *                 | --check-idle MS | --check-drain --server-pid PID --server-log F
 *   pubsub_client --floor
 *
 * Figures: deliveries over the wall time from the first PUB to the last
 * delivery; with --server-pid, the server's CPU time over that interval per
 * delivery: the sum over its threads of /proc/PID/task/TID/schedstat (ns),
 * checked against utime + stime of /proc/PID/stat (every thread, those that
 * ended too, in 10 ms ticks), which is used instead if it says more (a thread
 * ended); the client's own (getrusage) likewise; and how busy the CPUs were
 * with anything else (/proc/stat). --csv-line adds one line:
 *   csv: deliveries,seconds,deliveries_per_s,server_cpu_s,server_us_per_delivery,
 *        client_cpu_s,client_us_per_delivery,others_pct,steal_pct,errors
 *
 * The drain check (--check-drain): the load is stopped half-way by SIGTERM
 * to the broker and read to its end (pubsub_load.c); then the client waits
 * for the broker to exit (a zombie counts: the script reaps it after us),
 * reads its stderr (--server-log) and checks that it holds exactly the line
 * "pubsub: P published, D delivered, C cut" with D = the deliveries received,
 * C = 0, and P = the PUBs handled (the sum over (publisher, room) of the
 * counts, which every subscriber of the room agrees on; when every room has
 * subscribers).
 *
 * Exit status: 0; 1 if any error (the first few printed); 2 for a usage
 * error; 3 if the run passed --seconds-limit.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/e2e/pubsub.h"
#include "bench/e2e/pubsub_client.h"
#include "bench/harness.h"

static struct pc_opts o;

/* ---- Figures ----------------------------------------------------------------------------- */

/* The CPU time of pid's threads in seconds: the sum of their schedstat's
 * first field (ns on a CPU), -1 if unreadable. Threads that ended are not
 * counted (/proc/pid/stat's are). */
static double proc_sched_s(int pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    unsigned long long sum = 0;
    bool any = false;
    for (struct dirent *e; (e = readdir(d));) { /* bounded: the process's threads */
        char file[96];
        unsigned long long ns;
        if (e->d_name[0] == '.')
            continue;
        snprintf(file, sizeof(file), "/proc/%d/task/%.20s/schedstat", pid, e->d_name);
        FILE *f = fopen(file, "r");
        if (f && fscanf(f, "%llu", &ns) == 1)
            sum += ns, any = true;
        if (f)
            fclose(f);
    }
    closedir(d);
    return any ? (double)sum / 1e9 : -1;
}

/* The process state letter of /proc/pid/stat; 0 if it is gone. */
static char proc_state(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : 0;
}

/* All CPUs' busy and steal ticks (/proc/stat's first line). */
static bool cpu_ticks(uint64_t *busy, uint64_t *steal)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return false;
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    *busy = v[0] + v[1] + v[2] + v[5] + v[6]; /* user nice system irq softirq */
    *steal = v[7];
    return n == 8;
}

/* ---- The drain check's verdict: the counts per (publisher, room), the broker's line ------ */

static int drain_verdict(const struct pc_load *r)
{
    bool all_rooms;
    uint64_t got = r->got, handled = pc_drain_counts(&all_rooms);
    /* The broker's end: it must exit; the script reaps it after us, so a zombie counts. */
    uint64_t until = now_ns() + (uint64_t)PC_DRAIN_LIMIT_MS * 1000000u;
    char st;
    while ((st = proc_state(o.server_pid)) != 0 && st != 'Z' && now_ns() < until)
        sleep_us(10000);
    if (st != 0 && st != 'Z') {
        pc_fail("drain: the broker (pid %d) has not exited %d s after SIGTERM", o.server_pid,
                PC_DRAIN_LIMIT_MS / 1000);
        return 1;
    }
    FILE *f = fopen(o.server_log, "r");
    char line[512], extra[512];
    unsigned long long P, D, C;
    if (!f) {
        pc_fail("drain: %s: %s", o.server_log, strerror(errno));
        return 1;
    }
    bool one = fgets(line, sizeof(line), f) && !fgets(extra, sizeof(extra), f);
    fclose(f);
    char tail;
    if (!one || sscanf(line, "pubsub: %llu published, %llu delivered, %llu cut%c", &P, &D, &C,
                       &tail) != 4 || tail != '\n') {
        pc_fail("drain: the broker's stderr is not the one line \"pubsub: P published, D delivered,"
                " C cut\" (first line: \"%.*s\")", (int)strcspn(line, "\n"), one ? line : "");
        return 1;
    }
    printf("drain: %" PRIu64 " of %" PRIu64 " deliveries before the end of stream; the broker says"
           " %llu published, %llu delivered, %llu cut\n", got, r->expect, P, D, C);
    if (D != got)
        pc_fail("drain: the broker appended %llu MSG lines, the subscribers received %" PRIu64, D,
                got);
    if (C != 0)
        pc_fail("drain: the broker cut %llu subscribers (the load keeps them below the cap)",
                C);
    if (all_rooms ? P != handled : P < handled)
        pc_fail("drain: the broker handled %llu PUBs, the subscribers saw %" PRIu64 " of them", P,
                handled);
    if (handled == 0 || got >= r->expect)
        pc_fail("drain: the signal did not come mid-run (%" PRIu64 " of %" PRIu64 " deliveries)",
                got, r->expect);
    return pc_failures() > 0;
}

/* ---- The floor: a small write()+read() pair over loopback TCP ---------------------------- */

static int run_floor(void)
{
    enum { RUNS = 5, PAIRS = 20000, BYTES = 64 };
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t alen = sizeof(a);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), c = -1, s = -1;
    if (l >= 0 && bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 1) == 0 &&
        getsockname(l, (struct sockaddr *)&a, &alen) == 0 &&
        (c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0 &&
        connect(c, (struct sockaddr *)&a, sizeof(a)) == 0)
        s = accept(l, NULL, NULL);
    if (s < 0) {
        fprintf(stderr, "pubsub_client: --floor: loopback connection: %s\n", strerror(errno));
        return 1;
    }
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
    char buf[BYTES] = {0};
    double ns[RUNS];
    for (unsigned r = 0; r < RUNS; r++) {
        uint64_t t0 = now_ns();
        for (unsigned i = 0; i < PAIRS; i++) {
            size_t got = 0;
            if (write(c, buf, BYTES) != BYTES)
                return 1;
            while (got < BYTES) { /* bounded: loopback delivers the bytes at once */
                ssize_t n = read(s, buf, BYTES - got);
                if (n <= 0)
                    return 1;
                got += (size_t)n;
            }
        }
        ns[r] = (double)(now_ns() - t0) / PAIRS;
    }
    close(c), close(s), close(l);
    double m = median(ns, RUNS);
    printf("floor: write()+read() of %d B over loopback TCP: %.0f ns (median of %d runs of %d;"
           " min %.0f, max %.0f)\n", BYTES, m, RUNS, PAIRS, ns[0], ns[RUNS - 1]);
    if (o.csv_line)
        printf("csv: %.1f\n", m);
    return 0;
}

/* ---- main -------------------------------------------------------------------------------- */

static const struct bench_opt options[] = {
    {.name = "port", .kind = OPT_UINT, .var = &o.port, .lo = 0, .hi = 65535,
     .help = "the broker's port on 127.0.0.1 (required but with --floor)"},
    {.name = "server-pid", .kind = OPT_INT, .var = &o.server_pid, .lo = -1, .hi = 1 << 30,
     .dflt = -1, .none = "none", .help = "the broker's pid: its CPU time is measured"},
    {.name = "subs", .kind = OPT_UINT, .var = &o.subs, .lo = 1, .hi = 100000, .dflt = 200,
     .help = "subscriber connections"},
    {.name = "rooms", .kind = OPT_UINT, .var = &o.rooms, .lo = 1, .hi = 100000, .dflt = 20,
     .help = "rooms r0..r<N-1>"},
    {.name = "rooms-per-sub", .kind = OPT_UINT, .var = &o.rps, .lo = 1, .hi = PC_MAX_RPS, .dflt = 2,
     .help = "distinct rooms each subscriber joins (at most --rooms)"},
    {.name = "pubs", .kind = OPT_UINT, .var = &o.pubs, .lo = 1, .hi = PC_MAX_PUBS, .dflt = 50,
     .help = "publisher connections"},
    {.name = "msgs", .kind = OPT_UINT, .var = &o.msgs, .lo = 1, .hi = 100000000, .dflt = 20000,
     .help = "messages each publisher publishes"},
    {.name = "payload", .kind = OPT_UINT, .var = &o.payload, .lo = 1, .hi = 4000, .dflt = 32,
     .help = "payload bytes (at least its \"<pub>:<seq>:\" head)"},
    {.name = "window", .kind = OPT_UINT, .var = &o.window, .lo = 1, .hi = 100000, .dflt = 64,
     .help = "a publisher's messages in flight at most"},
    {.name = "threads", .kind = OPT_UINT, .var = &o.threads, .lo = 1, .hi = PC_MAX_THREADS,
     .dflt = 1, .help = "client threads (connections split between them)"},
    {.name = "seconds-limit", .kind = OPT_DOUBLE, .var = &o.seconds_limit, .lo = 1, .hi = 3600,
     .dflt = 60, .help = "a longer run is an error (exit 3)"},
    {.name = "csv-line", .kind = OPT_FLAG, .var = &o.csv_line,
     .help = "also print one \"csv: ...\" line (fields: the top of pubsub_client.c)"},
    {.name = "check-protocol", .kind = OPT_FLAG, .var = &o.check_protocol,
     .help = "mode: the commands' replies, errors, limits (pubsub_checks.c)"},
    {.name = "check-slow", .kind = OPT_FLAG, .var = &o.check_slow,
     .help = "mode: a subscriber that never reads is cut, its room's other is not"},
    {.name = "max-output", .kind = OPT_U64, .var = &o.max_output, .lo = 1, .hi = 1ull << 40,
     .dflt = PUBSUB_MAX_OUTPUT_DEFAULT, .help = "--check-slow: the broker's --max-output"},
    {.name = "check-idle", .kind = OPT_UINT, .var = &o.check_idle_ms, .lo = 0, .hi = 60000,
     .help = "mode: the broker's --idle-ms is this: idle connections closed, not others"},
    {.name = "check-drain", .kind = OPT_FLAG, .var = &o.check_drain,
     .help = "mode: a load, SIGTERM mid-run, every PUB read is delivered to all (needs"
             " --server-pid, --server-log)"},
    {.name = "server-log", .kind = OPT_STR, .var = &o.server_log,
     .help = "--check-drain: the broker's stderr file, read once it exited"},
    {.name = "floor", .kind = OPT_FLAG, .var = &o.floor,
     .help = "mode: the cost of a 64 B write()+read() over loopback TCP, then exit"},
    {.name = NULL},
};

int main(int argc, char **argv)
{
    int rc = bench_options("pubsub_client --port P [options]", options, 0, 0, argc, argv);
    if (rc <= 0)
        return rc == 0 ? 0 : 2;
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    unsigned modes = o.check_protocol + o.check_slow + o.check_drain + o.floor +
                     (o.check_idle_ms > 0);
    if (modes > 1 || (!o.floor && o.port == 0) || o.rps > o.rooms ||
        (o.check_drain && (o.server_pid <= 0 || !o.server_log))) {
        fprintf(stderr, "pubsub_client: one mode at most; --port is required (but with --floor);"
                " --rooms-per-sub <= --rooms; --check-drain needs --server-pid and"
                " --server-log\n");
        return 2;
    }
    if (o.floor)
        return run_floor();
    if (o.check_protocol)
        return pc_check_protocol(&o);
    if (o.check_slow)
        return pc_check_slow(&o);
    if (o.check_idle_ms)
        return pc_check_idle(&o);

    struct pc_load r;
    pc_load_setup(&o);
    double srv0 = o.server_pid > 0 ? proc_cpu_s(o.server_pid) : -1, cl0 = cpu_s(RUSAGE_SELF);
    double sch0 = o.server_pid > 0 ? proc_sched_s(o.server_pid) : -1;
    uint64_t busy0 = 0, steal0 = 0, busy1 = 0, steal1 = 0;
    bool ticks = cpu_ticks(&busy0, &steal0);
    pc_load_run(&r);
    double srv1 = o.server_pid > 0 ? proc_cpu_s(o.server_pid) : -1, cl1 = cpu_s(RUSAGE_SELF);
    double sch1 = o.server_pid > 0 ? proc_sched_s(o.server_pid) : -1;
    ticks = ticks && cpu_ticks(&busy1, &steal1);

    if (r.timed_out) {
        fprintf(stderr, "pubsub_client: --seconds-limit %.0f s reached: %" PRIu64 " of %" PRIu64
                " deliveries\n", o.seconds_limit, r.got, r.expect);
        return 3;
    }
    if (o.check_drain)
        return drain_verdict(&r);

    uint64_t got = r.got;
    double wall = (double)(r.t1 - r.t0) / 1e9, ticks_s = srv0 >= 0 && srv1 >= 0 ? srv1 - srv0 : -1;
    double sched_s = sch0 >= 0 && sch1 >= 0 ? sch1 - sch0 : -1, hz_s = 1.0 / sysconf(_SC_CLK_TCK);
    /* schedstat's ns unless a thread that ended took its time with it: then
     * the ticks, which keep it */
    bool use_sched = sched_s >= 0 && !(ticks_s > sched_s + 2 * hz_s + 0.05 * ticks_s);
    double srv = use_sched ? sched_s : ticks_s;
    double cl = cl1 - cl0, per_s = (double)got / wall;
    double srv_us = srv >= 0 && got ? srv * 1e6 / (double)got : -1;
    double cl_us = got ? cl * 1e6 / (double)got : -1;
    double others = -1, steal = -1;
    long hz = sysconf(_SC_CLK_TCK), ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ticks && hz > 0 && ncpu > 0) {
        double all = wall * (double)ncpu * (double)hz; /* ticks the CPUs had */
        double mine = (cl + (srv > 0 ? srv : 0)) * (double)hz;
        others = ((double)(busy1 - busy0) - mine) * 100 / all;
        others = others < 0 ? 0 : others; /* ticks are coarse */
        steal = (double)(steal1 - steal0) * 100 / all;
    }

    printf("pubsub_client: %u subscribers on %u rooms (%u each, %.1f a room), %u publishers x %u"
           " messages, payload %u B, window %u, %u thread%s\n", o.subs, o.rooms, o.rps,
           (double)o.subs * o.rps / o.rooms, o.pubs, o.msgs, o.payload, o.window, o.threads,
           o.threads > 1 ? "s" : "");
    printf("deliveries: %" PRIu64 " of %" PRIu64 " in %.3f s: %.0f /s\n", got, r.expect, wall,
           per_s);
    if (srv >= 0)
        printf("server CPU: %.3f s (pid %d, all its threads: %s; /proc/%d/stat: %.2f s): %.4f us"
               " a delivery, %.2f cores\n", srv, o.server_pid, use_sched ? "schedstat" :
               "/proc/stat ticks, a thread ended", o.server_pid, ticks_s, srv_us, srv / wall);
    printf("client CPU: %.3f s: %.4f us a delivery, %.2f cores\n", cl, cl_us, cl / wall);
    if (others >= 0)
        printf("others: %.1f%% of the CPUs, steal %.1f%% (/proc/stat)\n", others, steal);
    printf("errors: %u\n", pc_failures());
    if (o.csv_line)
        printf("csv: %" PRIu64 ",%.4f,%.0f,%.4f,%.5f,%.4f,%.5f,%.1f,%.1f,%u\n", got, wall, per_s,
               srv, srv_us, cl, cl_us, others, steal, pc_failures());
    return pc_failures() > 0;
}
