/*
 * echo.c: echo round trips and throughput over loopback, mely's server next
 * to plain libevent servers, one client for all.
 *
 *   bench/echo [--conns LIST] [--msg-bytes S] [--seconds S] [--warmup S]
 *              [--passes P] [--client-cpu C] [--steal POLICY] [--timeleft T]
 *              [--spin-us U] [--servers LIST]
 *              [--quick] [--csv PATH]
 *   bench/echo --server mely|libevent ...   (a server; the driver starts it)
 *
 * Rows: for each number of connections N (1, 10, 100, 1000), four servers,
 * each a process of its own (this program again, with --server):
 *   mely, steal off        mely_listen + a read watch per connection colored
 *                          with its fd, 2 pinned workers (echo_mely.c);
 *   mely, steal all        the same with the "all" policy (--steal);
 *   libevent, 1 thread     one event_base (echo_libevent.c);
 *   libevent, 2 bases      one event_base per thread, 2 pinned threads, one
 *                          SO_REUSEPORT socket each.
 * Server threads run on the first two allowed CPUs; the client (one thread,
 * epoll, N connections, one message of S bytes in flight on each: a closed
 * loop) runs in this process, on --client-cpu or wherever the scheduler puts
 * it (the default: on a 2-CPU machine it shares the CPUs with the server).
 *
 * Each row runs --passes times (3), interleaved: pass 1 of every row, then
 * pass 2, ...; within a pass the N are taken in order and the server order
 * rotates. A run: start the server, connect N, warm up --warmup s (0.5), then
 * measure --seconds s (2): messages/s, round-trip p50/p99 (client side), the
 * server's CPU time over the window (/proc/<pid>/stat, utime + stime, all its
 * threads) per message. The table shows each row's median pass (by msgs/s),
 * with the spread of the passes. Targets, per N: mely (steal off) >= the
 * libevent base-per-thread server; mely with stealing >= 0.97 x mely without.
 *
 * Bounds: the client gives up after 5 s connecting or 2 s without an echo; a
 * server must print its port within 10 s and end within 5 s of SIGTERM (else
 * SIGKILL, noted).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/echo.h"
#include "bench/harness.h"
#include "bench/report.h"

#define MAX_NCONNS 8
#define MAX_PASSES 9
#define CSV_DEFAULT "bench/results/echo.csv"
#define TIMELEFT_DEFAULT 20000u /* TSC cycles of one echo (read + write), see README */
#define STEAL_DEFAULT "all"
#define TARGET_STEAL_RATIO 0.97
#define PORT_LIMIT_NS 10000000000ull
#define END_LIMIT_NS 5000000000ull

enum kind { K_MELY_OFF, K_MELY_STEAL, K_LE1, K_LE2, NKINDS };

static const struct {
    const char *name, *key;
} kinds[NKINDS] = {
    [K_MELY_OFF] = {"mely, steal off", "mely_off"},
    [K_MELY_STEAL] = {"mely, steal %s", "mely_steal"},
    [K_LE1] = {"libevent, 1 thread", "libevent_1"},
    [K_LE2] = {"libevent, 2 bases", "libevent_2"},
};

struct opts {
    unsigned conns[MAX_NCONNS], nconns;
    unsigned msg_bytes, passes;
    double seconds, warmup;
    int client_cpu;
    const char *steal;
    uint64_t timeleft;
    long spin_us; /* the mely servers' spin_us; -1: the runtime's default */
    const char *csv;
    char exe[4096];
    cpu_set_t allowed; /* the driver's affinity at start: the servers get it */
    bool use[NKINDS];  /* --servers */
};

/* One run of one row. */
struct run {
    bool ok;
    char why[200];
    double kmsgs, p50, p99;
    double srv_cpu_s, cli_cpu_s; /* over the window; srv < 0: unknown */
    double elapsed;              /* the window, s */
    unsigned starved;            /* connections without an echo in the window */
    double ramp_ms;              /* until every connection had its first echo */
    uint64_t msgs;
    uint64_t msgs_w[2], steals, watch_moves, polls, io_ready, measured, parks, wakeups;
    uint64_t wakes_sent, steal_attempts, accepted;
    bool have_accepted;
    bool have_msgs_w, have_mely;
    char note[120]; /* the server's ending, if abnormal */
};

/* ---- A server process -------------------------------------------------------------- */

struct server {
    pid_t pid;
    int fd; /* its stdout */
    char buf[16384];
    size_t len;
};

/* Reads what the server wrote, for up to `ns` (0: what is there). False at
 * end of file or on an error. */
static bool server_read(struct server *s, uint64_t ns)
{
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    int r = poll(&p, 1, (int)(ns / 1000000u));
    if (r <= 0)
        return r == 0 || errno == EINTR;
    if (s->len + 1 >= sizeof(s->buf))
        s->len = 0; /* a flood of lines: keep the last ones */
    ssize_t n = read(s->fd, s->buf + s->len, sizeof(s->buf) - 1 - s->len);
    if (n <= 0)
        return n < 0 && errno == EINTR;
    s->len += (size_t)n;
    s->buf[s->len] = '\0';
    return true;
}

static bool server_start(const struct opts *o, enum kind k, struct server *s, unsigned *port,
                         char *why, size_t size)
{
    char timeleft[32], spin[32];
    snprintf(timeleft, sizeof(timeleft), "%" PRIu64, o->timeleft);
    snprintf(spin, sizeof(spin), "%ld", o->spin_us);
    char *const argv_mely_off[] = {(char *)o->exe, "--server", "mely", "--steal", "off",
                                   "--timeleft", timeleft, "--spin-us", spin, NULL};
    char *const argv_mely_steal[] = {(char *)o->exe, "--server", "mely", "--steal",
                                     (char *)o->steal, "--timeleft", timeleft, "--spin-us",
                                     spin, NULL};
    char *const argv_le1[] = {(char *)o->exe, "--server", "libevent", "--threads", "1", NULL};
    char *const argv_le2[] = {(char *)o->exe, "--server", "libevent", "--threads", "2", NULL};
    char *const *argv = k == K_MELY_OFF     ? argv_mely_off
                        : k == K_MELY_STEAL ? argv_mely_steal
                        : k == K_LE1        ? argv_le1
                                            : argv_le2;
    int fd[2];

    memset(s, 0, sizeof(*s));
    if (pipe2(fd, O_CLOEXEC) != 0) {
        snprintf(why, size, "pipe: %s", strerror(errno));
        return false;
    }
    fflush(stdout);
    fflush(stderr);
    s->pid = fork();
    if (s->pid < 0) {
        snprintf(why, size, "fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return false;
    }
    if (s->pid == 0) {
        /* The client's pinning must not restrict the server. */
        (void)sched_setaffinity(0, sizeof(o->allowed), &o->allowed);
        if (dup2(fd[1], STDOUT_FILENO) < 0)
            _exit(127);
        execv(o->exe, argv);
        fprintf(stderr, "echo: cannot run %s: %s\n", o->exe, strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    s->fd = fd[0];
    uint64_t limit = bench_now_ns() + PORT_LIMIT_NS;
    while (!strchr(s->buf, '\n')) {
        uint64_t now = bench_now_ns();
        if (now >= limit || !server_read(s, limit - now)) {
            snprintf(why, size, "the server did not say its port");
            return false;
        }
    }
    if (sscanf(s->buf, "port %u", port) != 1 || *port == 0) {
        snprintf(why, size, "the server said '%.40s' instead of its port", s->buf);
        return false;
    }
    char *nl = strchr(s->buf, '\n');
    s->len -= (size_t)(nl + 1 - s->buf);
    memmove(s->buf, nl + 1, s->len + 1);
    return true;
}

/* SIGTERM, its stat lines, its end (SIGKILL after END_LIMIT_NS). */
static void server_end(struct server *s, struct run *r)
{
    uint64_t limit = bench_now_ns() + END_LIMIT_NS;
    int status = 0;
    bool ended = false;

    if (s->pid <= 0)
        return;
    kill(s->pid, SIGTERM);
    while (bench_now_ns() < limit && server_read(s, 100000000u))
        ;
    while (bench_now_ns() < limit) {
        pid_t p = waitpid(s->pid, &status, WNOHANG);
        if (p == s->pid) {
            ended = true;
            break;
        }
        bench_sleep_until(bench_ts_after(10000000u));
    }
    if (!ended) {
        kill(s->pid, SIGKILL);
        while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
            ;
        snprintf(r->note, sizeof(r->note), "did not end within 5 s of SIGTERM: killed");
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(r->note, sizeof(r->note), "server ended with %s %d",
                 WIFEXITED(status) ? "status" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
    close(s->fd);
    for (char *save = NULL, *line = strtok_r(s->buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char key[64];
        unsigned long long v;
        if (sscanf(line, "stat %63s %llu", key, &v) != 2)
            continue;
        if (strcmp(key, "msgs_w0") == 0 || strcmp(key, "msgs_w1") == 0) {
            r->msgs_w[key[6] - '0'] = v;
            r->have_msgs_w = true;
        } else if (strcmp(key, "steals") == 0) {
            r->steals = v;
            r->have_mely = true;
        } else if (strcmp(key, "watch_moves") == 0) {
            r->watch_moves = v;
        } else if (strcmp(key, "polls") == 0) {
            r->polls = v;
        } else if (strcmp(key, "io_ready") == 0) {
            r->io_ready = v;
        } else if (strcmp(key, "conns") == 0 || strcmp(key, "conns_w0") == 0 ||
                   strcmp(key, "conns_w1") == 0) {
            r->accepted += v;
            r->have_accepted = true;
        } else if (strcmp(key, "wakes_sent") == 0) {
            r->wakes_sent = v;
        } else if (strcmp(key, "steal_attempts") == 0) {
            r->steal_attempts = v;
        } else if (strcmp(key, "parks") == 0) {
            r->parks = v;
        } else if (strcmp(key, "wakeups") == 0) {
            r->wakeups = v;
        } else if (strcmp(key, "read_measured_cycles") == 0) {
            r->measured = v;
        }
    }
}

static void run_one(const struct opts *o, enum kind k, unsigned conns, struct run *r)
{
    struct server s;
    unsigned port = 0;

    memset(r, 0, sizeof(*r));
    if (!server_start(o, k, &s, &port, r->why, sizeof(r->why))) {
        server_end(&s, r);
        return;
    }
    struct echo_client_cfg cfg = {.port = port, .conns = conns, .msg_bytes = o->msg_bytes,
                                  .warmup_s = o->warmup, .seconds = o->seconds, .server = s.pid};
    struct echo_client_res res;
    echo_client_run(&cfg, &res);
    server_end(&s, r);
    if (!res.ok) {
        snprintf(r->why, sizeof(r->why), "%s", res.why);
        return;
    }
    r->ok = true;
    r->msgs = res.msgs;
    r->kmsgs = (double)res.msgs / res.elapsed_s / 1e3;
    r->p50 = res.p50_us;
    r->p99 = res.p99_us;
    r->srv_cpu_s = res.server_cpu_s;
    r->cli_cpu_s = res.client_cpu_s;
    r->elapsed = res.elapsed_s;
    r->starved = res.starved;
    r->ramp_ms = res.ramp_ms;
}

/* mely's counters per message echoed, over the server's life: "per msg:
 * polls 2.00, parks 0.90, ..."; "" for a libevent server. */
static void mely_per_msg(const struct run *r, char *buf, size_t size)
{
    double m = (double)(r->msgs_w[0] + r->msgs_w[1]);
    buf[0] = '\0';
    if (r->have_mely && m > 0)
        snprintf(buf, size, "per msg: polls %.2f, parks %.2f, wake-ups %.2f, steal attempts %.2f",
                 (double)r->polls / m, (double)r->parks / m, (double)r->wakeups / m,
                 (double)r->steal_attempts / m);
}

/* ---- The table ------------------------------------------------------------------------ */

enum { COL_CONNS, COL_SERVER, COL_KMSGS, COL_VS, COL_P50, COL_P99, COL_SRV, COL_CORES, COL_CLI,
       COL_SHARE, COL_RAMP, COL_STARVED, COL_STEALS, COL_SPREAD, COL_NOTE, NCOLS };

static const struct bench_column columns[NCOLS] = {
    [COL_CONNS] = {.title = "conns", .right = true},
    [COL_SERVER] = {.title = "server", .gap = 2},
    [COL_KMSGS] = {.title = "Kmsg/s", .right = true, .gap = 2},
    [COL_VS] = {.title = "vs le-2", .right = true},
    [COL_P50] = {.title = "p50 us", .right = true},
    [COL_P99] = {.title = "p99 us", .right = true},
    [COL_SRV] = {.title = "srv CPU us/msg", .right = true, .gap = 2},
    [COL_CORES] = {.title = "srv cores", .right = true},
    [COL_CLI] = {.title = "cli CPU us/msg", .right = true},
    [COL_SHARE] = {.title = "w0/w1 %", .right = true, .gap = 2},
    [COL_RAMP] = {.title = "ramp ms", .right = true},
    [COL_STARVED] = {.title = "starved", .right = true},
    [COL_STEALS] = {.title = "steals", .right = true},
    [COL_SPREAD] = {.title = "passes Kmsg/s", .right = true},
    [COL_NOTE] = {.title = "note", .gap = 2},
};

static const char *const csv_titles[NCOLS] = {
    [COL_CONNS] = "conns",          [COL_SERVER] = "server",
    [COL_KMSGS] = "kmsgs_per_s",    [COL_VS] = "ratio_to_libevent_2",
    [COL_P50] = "rtt_p50_us",       [COL_P99] = "rtt_p99_us",
    [COL_SRV] = "server_cpu_us_per_msg", [COL_CORES] = "server_cores",
    [COL_CLI] = "client_cpu_us_per_msg", [COL_SHARE] = "share_w0_w1_pct",
    [COL_RAMP] = "ramp_ms",         [COL_STARVED] = "starved_conns",
    [COL_STEALS] = "steals",
    [COL_SPREAD] = "passes_kmsgs_min_max",
    [COL_NOTE] = "note",
};

typedef char cell_t[200];

/* Of a row's passes, the one with the median Kmsg/s among those that ran (the
 * lower middle one for an even count); -1 if none ran. */
static int median_pass(const struct run *r, unsigned passes)
{
    unsigned idx[MAX_PASSES], n = 0;
    for (unsigned p = 0; p < passes; p++)
        if (r[p].ok)
            idx[n++] = p;
    if (n == 0)
        return -1;
    for (unsigned i = 1; i < n; i++) /* insertion sort: n <= MAX_PASSES */
        for (unsigned j = i; j > 0 && r[idx[j - 1]].kmsgs > r[idx[j]].kmsgs; j--) {
            unsigned t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    return (int)idx[(n - 1) / 2];
}

static void row_cells(const struct run *runs, unsigned passes, unsigned conns,
                      const struct run *ref, cell_t *t)
{
    for (unsigned c = COL_KMSGS; c < NCOLS; c++)
        snprintf(t[c], sizeof(cell_t), "-");
    t[COL_NOTE][0] = '\0';
    int m = median_pass(runs, passes);
    if (m < 0) {
        snprintf(t[COL_KMSGS], sizeof(cell_t), "n/a");
        snprintf(t[COL_NOTE], sizeof(cell_t), "n/a (%s)", runs[0].why);
        return;
    }
    const struct run *r = &runs[m];
    snprintf(t[COL_KMSGS], sizeof(cell_t), "%.1f", r->kmsgs);
    if (ref && ref->kmsgs > 0)
        snprintf(t[COL_VS], sizeof(cell_t), "%.2f", r->kmsgs / ref->kmsgs);
    snprintf(t[COL_P50], sizeof(cell_t), "%.1f", r->p50);
    snprintf(t[COL_P99], sizeof(cell_t), "%.1f", r->p99);
    if (r->srv_cpu_s >= 0 && r->msgs > 0) {
        snprintf(t[COL_SRV], sizeof(cell_t), "%.2f", r->srv_cpu_s * 1e6 / (double)r->msgs);
        snprintf(t[COL_CORES], sizeof(cell_t), "%.2f", r->srv_cpu_s / r->elapsed);
    }
    if (r->msgs > 0)
        snprintf(t[COL_CLI], sizeof(cell_t), "%.2f", r->cli_cpu_s * 1e6 / (double)r->msgs);
    uint64_t tot = r->msgs_w[0] + r->msgs_w[1];
    if (r->have_msgs_w && tot > 0)
        snprintf(t[COL_SHARE], sizeof(cell_t), "%.0f/%.0f", 100.0 * (double)r->msgs_w[0] / (double)tot,
                 100.0 * (double)r->msgs_w[1] / (double)tot);
    snprintf(t[COL_RAMP], sizeof(cell_t), "%.0f", r->ramp_ms);
    snprintf(t[COL_STARVED], sizeof(cell_t), "%u", r->starved);
    if (r->have_mely)
        snprintf(t[COL_STEALS], sizeof(cell_t), "%" PRIu64, r->steals);
    double lo = 0, hi = 0;
    unsigned failed = 0;
    bool first = true;
    for (unsigned p = 0; p < passes; p++) {
        if (!runs[p].ok) {
            failed++;
            continue;
        }
        if (first || runs[p].kmsgs < lo)
            lo = runs[p].kmsgs;
        if (first || runs[p].kmsgs > hi)
            hi = runs[p].kmsgs;
        first = false;
    }
    snprintf(t[COL_SPREAD], sizeof(cell_t), "%.1f..%.1f", lo, hi);
    size_t l = 0;
    char per[128];
    mely_per_msg(r, per, sizeof(per));
    if (per[0])
        l += (size_t)snprintf(t[COL_NOTE] + l, sizeof(cell_t) - l, "%s; ", per);
    if (r->have_accepted && r->accepted < conns)
        l += (size_t)snprintf(t[COL_NOTE] + l, sizeof(cell_t) - l,
                              "the server accepted %" PRIu64 " of %u connections; ", r->accepted,
                              conns);
    if (r->measured)
        l += (size_t)snprintf(t[COL_NOTE] + l, sizeof(cell_t) - l, "read handler measured %" PRIu64
                              " cyc; ", r->measured);
    if (r->watch_moves)
        l += (size_t)snprintf(t[COL_NOTE] + l, sizeof(cell_t) - l, "watch moves %" PRIu64 "; ",
                              r->watch_moves);
    if (failed)
        l += (size_t)snprintf(t[COL_NOTE] + l, sizeof(cell_t) - l, "%u pass(es) failed: %s; ",
                              failed, runs[0].ok ? "see above" : runs[0].why);
    for (unsigned p = 0; p < passes && l < sizeof(cell_t) - 1; p++)
        if (runs[p].note[0]) {
            l += (size_t)snprintf(t[COL_NOTE] + l, sizeof(cell_t) - l, "%s; ", runs[p].note);
            break;
        }
    if (l >= 2 && l < sizeof(cell_t))
        t[COL_NOTE][l - 2] = '\0';
}

/* ---- Options ----------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: echo [options]\n"
            "  --conns LIST     connection counts, comma-separated (default 1,10,100,1000;\n"
            "                   --quick: 1,100)\n"
            "  --msg-bytes S    message size (default 64; 1..%u)\n"
            "  --seconds S      measured time per row and pass (default 2; --quick: 0.5)\n"
            "  --warmup S       before each measured window (default 0.5; --quick: 0.3)\n"
            "  --passes P       interleaved passes, the median shown (default 3; --quick: 1;\n"
            "                   1..%d)\n"
            "  --client-cpu C   pin the client to CPU C (default: not pinned)\n"
            "  --steal POLICY   the policy of the stealing mely row (default %s)\n"
            "  --timeleft T     the echo handlers' timeleft annotation, TSC cycles (default\n"
            "                   %u; 0: none)\n"
            "  --spin-us U      the mely servers' spin_us (default: the runtime's, %u)\n"
            "  --servers LIST   only these servers, comma-separated, of mely_off, mely_steal,\n"
            "                   libevent_1, libevent_2 (default: all four)\n"
            "  --quick          a short run: a few seconds per connection count\n"
            "  --csv PATH       the CSV file (default %s; the targets go to\n"
            "                   PATH without .csv + -targets.csv)\n",
            ECHO_BUF, MAX_PASSES, STEAL_DEFAULT, TIMELEFT_DEFAULT, MELY_SPIN_US_DEFAULT,
            CSV_DEFAULT);
}

static bool parse_conns(const char *s, struct opts *o)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", s);
    o->nconns = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        uint64_t v;
        if (o->nconns == MAX_NCONNS || bench_parse_u64(tok, 1, 10000, &v) != 0)
            return false;
        o->conns[o->nconns++] = (unsigned)v;
    }
    return o->nconns > 0;
}

static bool parse_servers(const char *s, struct opts *o)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", s);
    memset(o->use, 0, sizeof(o->use));
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        unsigned k = 0;
        while (k < NKINDS && strcmp(tok, kinds[k].key) != 0)
            k++;
        if (k == NKINDS)
            return false;
        o->use[k] = true;
    }
    return true;
}

static int parse_options(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        {"conns", required_argument, NULL, 'n'},      {"msg-bytes", required_argument, NULL, 'b'},
        {"seconds", required_argument, NULL, 's'},    {"warmup", required_argument, NULL, 'w'},
        {"passes", required_argument, NULL, 'p'},     {"client-cpu", required_argument, NULL, 'C'},
        {"steal", required_argument, NULL, 'S'},      {"timeleft", required_argument, NULL, 't'},
        {"quick", no_argument, NULL, 'q'},            {"csv", required_argument, NULL, 'c'},
        {"servers", required_argument, NULL, 'k'},    {"help", no_argument, NULL, 'h'},
        {"spin-us", required_argument, NULL, 'u'},
        {NULL, 0, NULL, 0},
    };
    bool quick = false, have_conns = false;
    uint64_t v;
    int c;

    o->msg_bytes = 64;
    o->seconds = o->warmup = -1;
    o->client_cpu = -1;
    o->steal = STEAL_DEFAULT;
    o->timeleft = TIMELEFT_DEFAULT;
    o->spin_us = -1;
    o->csv = CSV_DEFAULT;
    for (unsigned k = 0; k < NKINDS; k++)
        o->use[k] = true;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'u':
            if (bench_parse_u64(optarg, 0, 1000000, &v) != 0) {
                fprintf(stderr, "echo: --spin-us: expected 0..1000000\n");
                return 2;
            }
            o->spin_us = (long)v;
            break;
        case 'k':
            if (!parse_servers(optarg, o)) {
                fprintf(stderr, "echo: --servers: expected names among mely_off, mely_steal, "
                                "libevent_1, libevent_2\n");
                return 2;
            }
            break;
        case 'n':
            if (!parse_conns(optarg, o)) {
                fprintf(stderr, "echo: --conns: expected up to %d numbers 1..10000, e.g. 1,10\n",
                        MAX_NCONNS);
                return 2;
            }
            have_conns = true;
            break;
        case 'b':
            if (bench_parse_u64(optarg, 1, ECHO_BUF, &v) != 0) {
                fprintf(stderr, "echo: --msg-bytes: expected 1..%u\n", ECHO_BUF);
                return 2;
            }
            o->msg_bytes = (unsigned)v;
            break;
        case 's':
            if (bench_parse_double(optarg, 0.1, 60, &o->seconds) != 0) {
                fprintf(stderr, "echo: --seconds: expected 0.1..60\n");
                return 2;
            }
            break;
        case 'w':
            if (bench_parse_double(optarg, 0, 10, &o->warmup) != 0) {
                fprintf(stderr, "echo: --warmup: expected 0..10\n");
                return 2;
            }
            break;
        case 'p':
            if (bench_parse_u64(optarg, 1, MAX_PASSES, &v) != 0) {
                fprintf(stderr, "echo: --passes: expected 1..%d\n", MAX_PASSES);
                return 2;
            }
            o->passes = (unsigned)v;
            break;
        case 'C':
            if (bench_parse_u64(optarg, 0, CPU_SETSIZE - 1, &v) != 0) {
                fprintf(stderr, "echo: --client-cpu: expected a CPU number\n");
                return 2;
            }
            o->client_cpu = (int)v;
            break;
        case 'S':
            o->steal = optarg;
            break;
        case 't':
            if (bench_parse_u64(optarg, 0, 1000000000, &o->timeleft) != 0) {
                fprintf(stderr, "echo: --timeleft: expected 0..1e9 cycles\n");
                return 2;
            }
            break;
        case 'q':
            quick = true;
            break;
        case 'c':
            if (optarg[0] == '\0') {
                fprintf(stderr, "echo: --csv: expected a path\n");
                return 2;
            }
            o->csv = optarg;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    if (!have_conns) {
        static const unsigned full[] = {1, 10, 100, 1000}, short_[] = {1, 100};
        const unsigned *l = quick ? short_ : full;
        o->nconns = quick ? 2 : 4;
        memcpy(o->conns, l, o->nconns * sizeof(unsigned));
    }
    if (o->seconds < 0)
        o->seconds = quick ? 0.5 : 2;
    if (o->warmup < 0)
        o->warmup = quick ? 0.3 : 0.5;
    if (o->passes == 0)
        o->passes = quick ? 1 : 3;
    return 0;
}

/* The server role: echo --server mely [--steal P] [--timeleft T] [--spin-us U] |
 * libevent [--threads N]. */
static int server_main(int argc, char **argv)
{
    const char *kind = argv[2], *steal = "off";
    uint64_t timeleft = 0, threads = 1, spin = 0;
    long spin_us = -1;

    for (int i = 3; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--steal") == 0)
            steal = argv[i + 1];
        else if (strcmp(argv[i], "--timeleft") == 0 &&
                 bench_parse_u64(argv[i + 1], 0, 1000000000, &timeleft) == 0)
            ;
        else if (strcmp(argv[i], "--spin-us") == 0 && strcmp(argv[i + 1], "-1") == 0)
            spin_us = -1;
        else if (strcmp(argv[i], "--spin-us") == 0 &&
                 bench_parse_u64(argv[i + 1], 0, 1000000, &spin) == 0)
            spin_us = (long)spin;
        else if (strcmp(argv[i], "--threads") == 0 &&
                 bench_parse_u64(argv[i + 1], 1, ECHO_MAX_THREADS, &threads) == 0)
            ;
        else {
            fprintf(stderr, "echo server: bad option %s\n", argv[i]);
            return 2;
        }
    }
    if (strcmp(kind, "mely") == 0)
        return echo_server_mely(steal, timeleft, spin_us);
    if (strcmp(kind, "libevent") == 0)
        return echo_server_libevent((unsigned)threads);
    fprintf(stderr, "echo server: unknown kind %s\n", kind);
    return 2;
}

/* ---- Main ------------------------------------------------------------------------------------ */

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void print_targets(const struct opts *o, const struct bench_machine *mc,
                          struct run (*runs)[NKINDS][MAX_PASSES], const struct bench *b)
{
    enum { T_COND, T_NEED, T_GOT, T_STATUS, TCOLS };
    static const struct bench_column tcols[TCOLS] = {
        [T_COND] = {.title = "target"},
        [T_NEED] = {.title = "needs", .right = true, .gap = 2},
        [T_GOT] = {.title = "measured", .right = true},
        [T_STATUS] = {.title = "status", .gap = 2},
    };
    static const char *const ttitles[TCOLS] = {"target", "needs", "measured", "status"};
    unsigned n = o->nconns * 2;
    cell_t text[n][TCOLS];
    const char *cells[n][TCOLS];

    for (unsigned i = 0; i < o->nconns; i++) {
        int m_off = median_pass(runs[i][K_MELY_OFF], o->passes);
        int m_st = median_pass(runs[i][K_MELY_STEAL], o->passes);
        int m_le = median_pass(runs[i][K_LE2], o->passes);
        double off = m_off >= 0 ? runs[i][K_MELY_OFF][m_off].kmsgs : 0;
        double st = m_st >= 0 ? runs[i][K_MELY_STEAL][m_st].kmsgs : 0;
        double le = m_le >= 0 ? runs[i][K_LE2][m_le].kmsgs : 0;
        cell_t *a = text[2 * i], *s = text[2 * i + 1];
        snprintf(a[T_COND], sizeof(cell_t), "N=%u: mely (steal off) >= libevent base per thread",
                 o->conns[i]);
        snprintf(a[T_NEED], sizeof(cell_t), ">= 1.00x");
        snprintf(s[T_COND], sizeof(cell_t), "N=%u: mely (steal %s) >= %.2f x mely (steal off)",
                 o->conns[i], o->steal, TARGET_STEAL_RATIO);
        snprintf(s[T_NEED], sizeof(cell_t), ">= %.2fx", TARGET_STEAL_RATIO);
        if (off > 0 && le > 0) {
            snprintf(a[T_GOT], sizeof(cell_t), "%.2fx", off / le);
            snprintf(a[T_STATUS], sizeof(cell_t), "%s", off >= le ? "PASS" : "FAIL");
        } else {
            snprintf(a[T_GOT], sizeof(cell_t), "-");
            snprintf(a[T_STATUS], sizeof(cell_t), "n/a");
        }
        if (off > 0 && st > 0) {
            snprintf(s[T_GOT], sizeof(cell_t), "%.2fx", st / off);
            snprintf(s[T_STATUS], sizeof(cell_t), "%s",
                     st >= TARGET_STEAL_RATIO * off ? "PASS" : "FAIL");
        } else {
            snprintf(s[T_GOT], sizeof(cell_t), "-");
            snprintf(s[T_STATUS], sizeof(cell_t), "n/a");
        }
        for (unsigned c = 0; c < TCOLS; c++) {
            cells[2 * i][c] = a[c];
            cells[2 * i + 1][c] = s[c];
        }
    }
    printf("\n");
    bench_print_table(stdout, tcols, TCOLS, &cells[0][0], n);

    char path[4096];
    size_t l = strlen(o->csv);
    if (l > 4 && strcmp(o->csv + l - 4, ".csv") == 0)
        l -= 4;
    snprintf(path, sizeof(path), "%.*s-targets.csv", (int)l, o->csv);
    struct bench_param params[] = {{.name = "msg_bytes"}, {.name = "seconds"}, {.name = "passes"}};
    snprintf(params[0].value, sizeof(params[0].value), "%u", o->msg_bytes);
    snprintf(params[1].value, sizeof(params[1].value), "%g", o->seconds);
    snprintf(params[2].value, sizeof(params[2].value), "%u", o->passes);
    if (bench_write_cells_csv(b, path, mc, params, 3, ttitles, TCOLS, &cells[0][0], n) == 0)
        printf("CSV: %s\n", path);
}

int main(int argc, char **argv)
{
    raise_nofile();
    if (argc >= 3 && strcmp(argv[1], "--server") == 0)
        return server_main(argc, argv);

    static struct opts o;
    int rc = parse_options(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    ssize_t n = readlink("/proc/self/exe", o.exe, sizeof(o.exe) - 1);
    if (n <= 0) {
        fprintf(stderr, "echo: cannot find my own executable\n");
        return 2;
    }
    o.exe[n] = '\0';
    if (sched_getaffinity(0, sizeof(o.allowed), &o.allowed) != 0)
        CPU_ZERO(&o.allowed);
    signal(SIGPIPE, SIG_IGN);

    struct bench b;
    struct bench_machine mc;
    bench_init(&b, "echo");
    bench_machine_get(&mc);
    int cpu[2];
    echo_first_cpus(cpu);
    char steal_name[64];
    snprintf(steal_name, sizeof(steal_name), kinds[K_MELY_STEAL].name, o.steal);

    printf("mely echo over loopback: mely's server next to plain libevent servers, one closed-loop "
           "client\n");
    bench_machine_print(stdout, &mc);
    char spin_txt[80];
    if (o.spin_us >= 0)
        snprintf(spin_txt, sizeof(spin_txt), "spin_us %ld, batch at its default", o.spin_us);
    else
        snprintf(spin_txt, sizeof(spin_txt), "spin and batch at their defaults");
    char client_txt[48];
    if (o.client_cpu >= 0)
        snprintf(client_txt, sizeof(client_txt), "pinned to CPU %d", o.client_cpu);
    else
        snprintf(client_txt, sizeof(client_txt), "not pinned");
    printf("setup: server threads on CPUs %d and %d (mely: 2 pinned workers, %s; libevent, "
           "2 bases: 2 pinned threads; libevent, 1 thread: not pinned); client: 1 thread, %s; "
           "%u-byte messages, one in flight per connection; %.1f s warm-up + %.1f s measured "
           "per row and pass, %u interleaved pass(es); echo handlers annotated timeleft "
           "%" PRIu64 " cycles\n",
           cpu[0], cpu[1], spin_txt, client_txt, o.msg_bytes, o.warmup, o.seconds, o.passes,
           o.timeleft);
    bench_print_mely_env(stdout);
    if (getenv("MELY_STEAL"))
        printf("note: MELY_STEAL overrides both mely rows' policy\n");
    fflush(stdout);
    bench_pin_self(o.client_cpu);

    static struct run runs[MAX_NCONNS][NKINDS][MAX_PASSES];
    struct bench_probe p0 = bench_probe_now();
    for (unsigned p = 0; p < o.passes; p++)
        for (unsigned i = 0; i < o.nconns; i++)
            for (unsigned j = 0; j < NKINDS; j++) {
                enum kind k = (enum kind)((j + p) % NKINDS);
                struct run *r = &runs[i][k][p];
                if (!o.use[k])
                    continue;
                run_one(&o, k, o.conns[i], r);
                printf("  pass %u/%u N=%-5u %-22s", p + 1, o.passes, o.conns[i],
                       k == K_MELY_STEAL ? steal_name : kinds[k].name);
                char per[128];
                mely_per_msg(r, per, sizeof(per));
                if (r->ok)
                    printf(" %8.1f Kmsg/s  p50 %6.1f us  p99 %7.1f us  srv %5.2f us/msg  ramp %.0f ms"
                           "  starved %u%s%s%s%s\n",
                           r->kmsgs, r->p50, r->p99,
                           r->srv_cpu_s >= 0 ? r->srv_cpu_s * 1e6 / (double)r->msgs : -1.0,
                           r->ramp_ms, r->starved, per[0] ? "  " : "", per, r->note[0] ? "  " : "",
                           r->note);
                else
                    printf(" failed: %s%s%s\n", r->why, r->note[0] ? "; " : "", r->note);
                if (r->ok && r->have_accepted && r->accepted < o.conns[i])
                    printf("    the server accepted %" PRIu64 " of %u connections\n", r->accepted,
                           o.conns[i]);
                fflush(stdout);
            }
    struct bench_probe p1 = bench_probe_now();
    char load[64];
    bench_load_note(&b, &p0, &p1, load, sizeof(load));

    unsigned kinds_used = 0;
    for (unsigned k = 0; k < NKINDS; k++)
        kinds_used += o.use[k];
    unsigned nrows = o.nconns * kinds_used;
    cell_t text[nrows][NCOLS];
    const char *cells[nrows][NCOLS], *csv_cells[nrows][NCOLS];
    char conns_txt[MAX_NCONNS][16];
    bool all = true;
    for (unsigned i = 0; i < o.nconns; i++) {
        snprintf(conns_txt[i], sizeof(conns_txt[i]), "%u", o.conns[i]);
        int m_le = median_pass(runs[i][K_LE2], o.passes);
        for (unsigned k = 0, row = i * kinds_used; k < NKINDS; k++) {
            if (!o.use[k])
                continue;
            row_cells(runs[i][k], o.passes, o.conns[i], m_le >= 0 ? &runs[i][K_LE2][m_le] : NULL,
                      text[row]);
            all &= median_pass(runs[i][k], o.passes) >= 0;
            for (unsigned c = 0; c < NCOLS; c++)
                cells[row][c] = csv_cells[row][c] = text[row][c];
            cells[row][COL_CONNS] = csv_cells[row][COL_CONNS] = conns_txt[i];
            cells[row][COL_SERVER] = k == K_MELY_STEAL ? steal_name : kinds[k].name;
            csv_cells[row][COL_SERVER] = kinds[k].key;
            row++;
        }
    }
    printf("\n");
    bench_print_table(stdout, columns, NCOLS, &cells[0][0], nrows);
    printf("each row: the median of its %u pass(es) by Kmsg/s; vs le-2: Kmsg/s over the libevent "
           "base-per-thread server's; srv cores: the server's CPU time over the window; w0/w1: "
           "messages echoed by worker/thread 0 and 1%s\n",
           o.passes, load);
    bench_load_warn(&b);

    struct bench_param params[] = {{.name = "msg_bytes"}, {.name = "seconds"},
                                   {.name = "warmup"},    {.name = "passes"},
                                   {.name = "client_cpu"}, {.name = "steal"},
                                   {.name = "timeleft"},  {.name = "spin_us"}};
    snprintf(params[0].value, sizeof(params[0].value), "%u", o.msg_bytes);
    snprintf(params[1].value, sizeof(params[1].value), "%g", o.seconds);
    snprintf(params[2].value, sizeof(params[2].value), "%g", o.warmup);
    snprintf(params[3].value, sizeof(params[3].value), "%u", o.passes);
    snprintf(params[4].value, sizeof(params[4].value), "%d", o.client_cpu);
    snprintf(params[5].value, sizeof(params[5].value), "%s", o.steal);
    snprintf(params[6].value, sizeof(params[6].value), "%" PRIu64, o.timeleft);
    if (o.spin_us >= 0)
        snprintf(params[7].value, sizeof(params[7].value), "%ld", o.spin_us);
    else
        snprintf(params[7].value, sizeof(params[7].value), "default");
    if (bench_write_cells_csv(&b, o.csv, &mc, params, 8, csv_titles, NCOLS, &csv_cells[0][0],
                              nrows) == 0)
        printf("CSV: %s\n", o.csv);
    print_targets(&o, &mc, runs, &b);
    if (!all)
        printf("\nsome rows have no figures (n/a): exit status 1\n");
    return all ? 0 : 1;
}
