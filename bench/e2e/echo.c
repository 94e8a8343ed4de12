/* SPDX-License-Identifier: MIT */
/*
 * echo.c: echo round trips and throughput over loopback, mely's server next
 * to plain libevent servers, one closed-loop client for all.
 *
 *   bench/e2e/echo [options]              (--help: the options)
 *   bench/e2e/echo --server KIND ...  (a server; the driver starts it)
 *
 * For each number of connections N, six servers, each a process of its own
 * (this program again, with --server): mely with stealing off and with the
 * --steal policy, and mely's echo on streams (steal off; echo_mely.c),
 * libevent with one thread, with one base per thread on 2 pinned threads, and
 * the latter with bufferevents (echo_libevent.c). Server threads run on the
 * first two allowed CPUs; the client (echo_client.c) runs in this process.
 * Each row runs --passes times, interleaved (pass 1 of every row, then pass
 * 2, ...; the server order rotates); the table shows each row's median pass
 * by msgs/s. Targets, per N: mely (steal off) >= the libevent
 * base-per-thread server; mely with stealing >= 0.97 x mely without; the
 * stream echo >= 0.95 x mely (steal off) and >= the bufferevent server.
 * Bounds: the client's (echo.h); a server must say its port within 10 s and
 * end within 5 s of SIGTERM (else SIGKILL, noted).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/e2e/echo.h"
#include "bench/harness.h"

#define MAX_NCONNS 8
#define MAX_PASSES 9
#define TARGET_STEAL_RATIO 0.97
#define TARGET_STREAM_RATIO 0.95 /* the stream echo over the raw-watch one */
#define PORT_LIMIT_NS 10000000000ull
#define END_LIMIT_S 5

enum kind { K_MELY_OFF, K_MELY_STEAL, K_STREAM, K_LE1, K_LE2, K_BEV, NKINDS };

static const struct {
    const char *name, *key;
    const char *server; /* --server */
} kinds[NKINDS] = {
    [K_MELY_OFF] = {"mely, steal off", "mely_off", "mely"},
    [K_MELY_STEAL] = {"mely, steal %s", "mely_steal", "mely"},
    [K_STREAM] = {"mely stream", "mely_stream", "mely-stream"},
    [K_LE1] = {"libevent, 1 thread", "libevent_1", "libevent"},
    [K_LE2] = {"libevent, 2 bases", "libevent_2", "libevent"},
    [K_BEV] = {"libevent bufferevent", "libevent_bev", "bufferevent"},
};

static struct {
    unsigned conns[MAX_NCONNS], nconns;
    unsigned msg_bytes, passes, threads;
    double seconds, warmup;
    int client_cpu, spin_us; /* spin_us: the mely servers'; -1: the runtime's default */
    const char *steal, *csv, *server;
    uint64_t timeleft;
    bool quick, use[NKINDS]; /* use: --servers */
    char exe[4096];
    cpu_set_t allowed; /* the driver's affinity at start: the servers get it */
} o = {.use = {true, true, true, true, true, true}};

static struct bench b = {.name = "echo"};

static bool parse_conns(const char *s, void *var)
{
    char buf[256];
    (void)var;
    snprintf(buf, sizeof(buf), "%s", s);
    o.nconns = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *end;
        unsigned long v = strtoul(tok, &end, 10);
        if (o.nconns == MAX_NCONNS || *end || end == tok || v < 1 || v > 10000)
            return false;
        o.conns[o.nconns++] = (unsigned)v;
    }
    return o.nconns > 0;
}

static bool parse_servers(const char *s, void *var)
{
    char buf[256];
    (void)var;
    snprintf(buf, sizeof(buf), "%s", s);
    memset(o.use, 0, sizeof(o.use));
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        unsigned k = 0;
        while (k < NKINDS && strcmp(tok, kinds[k].key) != 0)
            k++;
        if (k == NKINDS)
            return false;
        o.use[k] = true;
    }
    return true;
}

/* The options marked .param are the CSV file's parameters, in this order. */
static const struct bench_opt options[] = {
    {.name = "conns", .kind = OPT_CALL, .var = &o, .call = parse_conns, .sdflt = "1,10,100,1000",
     .help = "connection counts, comma-separated, up to 8 of 1..10000 (--quick: 1,100)"},
    {.name = "msg-bytes", .kind = OPT_UINT, .var = &o.msg_bytes, .lo = 1, .hi = ECHO_BUF,
     .dflt = 64, .param = true, .help = "message size"},
    {.name = "seconds", .kind = OPT_DOUBLE, .var = &o.seconds, .lo = 0.1, .hi = 60, .dflt = 2,
     .quick = 0.5, .param = true, .help = "measured time per row and pass"},
    {.name = "warmup", .kind = OPT_DOUBLE, .var = &o.warmup, .lo = 0, .hi = 10, .dflt = 0.5,
     .quick = 0.3, .param = true, .help = "before each measured window"},
    {.name = "passes", .kind = OPT_UINT, .var = &o.passes, .lo = 1, .hi = MAX_PASSES, .dflt = 3,
     .quick = 1, .param = true, .help = "interleaved passes, the median shown"},
    {.name = "client-cpu", .kind = OPT_INT, .var = &o.client_cpu, .lo = 0, .hi = CPU_SETSIZE - 1,
     .dflt = -1, .param = true, .help = "pin the client to this CPU (-1: not pinned)"},
    {.name = "steal", .kind = OPT_STR, .var = &o.steal, .sdflt = "all", .param = true,
     .help = "the policy of the stealing mely row (of a mely server)"},
    {.name = "timeleft", .kind = OPT_U64, .var = &o.timeleft, .lo = 0, .hi = 1e9, .dflt = 20000,
     .param = true, .help = "the echo handlers' timeleft annotation, TSC cycles (0: none)"},
    {.name = "spin-us", .kind = OPT_INT, .var = &o.spin_us, .lo = 0, .hi = 1000000, .dflt = -1,
     .none = "default", .param = true, .help = "the mely servers' spin_us"},
    {.name = "servers", .kind = OPT_CALL, .var = &o, .call = parse_servers, .sdflt = "all six",
     .help = "only these, comma-separated: mely_off, mely_steal, mely_stream, libevent_1, "
             "libevent_2, libevent_bev"},
    {.name = "only", .kind = OPT_CALL, .var = &o, .call = parse_servers, .sdflt = "all six",
     .help = "the same as --servers"},
    {.name = "quick", .kind = OPT_QUICK, .var = &o.quick, .help = "a few seconds per count"},
    {.name = "csv", .kind = OPT_STR, .var = &o.csv, .sdflt = "bench/results/echo.csv",
     .help = "the CSV file (the targets: PATH without .csv, then -targets.csv)"},
    {.name = "server", .kind = OPT_STR, .var = &o.server,
     .help = "run as a server: mely, mely-stream, libevent or bufferevent (the driver starts "
             "them)"},
    {.name = "threads", .kind = OPT_UINT, .var = &o.threads, .lo = 1, .hi = ECHO_MAX_THREADS,
     .dflt = 1, .help = "a libevent server's threads"},
    {.name = NULL},
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

/* Starts the server of kind k and reads its port; false (why set) if it does
 * not say it within PORT_LIMIT_NS. */
static bool server_start(enum kind k, struct server *s, unsigned *port, char *why, size_t size)
{
    char timeleft[32], spin[32];
    bool mely = k == K_MELY_OFF || k == K_MELY_STEAL || k == K_STREAM;
    char *argv[12] = {o.exe, "--server", (char *)kinds[k].server};
    unsigned n = 3;

    snprintf(timeleft, sizeof(timeleft), "%" PRIu64, o.timeleft);
    snprintf(spin, sizeof(spin), "%d", o.spin_us);
    if (mely) {
        argv[n++] = "--steal";
        argv[n++] = k == K_MELY_STEAL ? (char *)o.steal : "off";
        argv[n++] = "--timeleft";
        argv[n++] = timeleft;
        if (o.spin_us >= 0) {
            argv[n++] = "--spin-us";
            argv[n++] = spin;
        }
    } else {
        argv[n++] = "--threads";
        argv[n++] = k == K_LE1 ? "1" : "2";
    }
    memset(s, 0, sizeof(*s));
    s->pid = bench_spawn(&b, o.exe, argv, &o.allowed, &s->fd);
    if (s->pid < 0) {
        snprintf(why, size, "the server could not start");
        return false;
    }
    uint64_t limit = now_ns() + PORT_LIMIT_NS;
    while (!strchr(s->buf, '\n')) {
        uint64_t now = now_ns();
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

/* A "stat <key> <value>" line of a server into r. */
static void parse_stat(struct run *r, const char *line)
{
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {
        {"steals", offsetof(struct run, steals)},     {"watch_moves", offsetof(struct run, watch_moves)},
        {"polls", offsetof(struct run, polls)},       {"io_ready", offsetof(struct run, io_ready)},
        {"parks", offsetof(struct run, parks)},       {"wakeups", offsetof(struct run, wakeups)},
        {"wakes_sent", offsetof(struct run, wakes_sent)},
        {"steal_attempts", offsetof(struct run, steal_attempts)},
        {"read_measured_cycles", offsetof(struct run, measured)},
    };
    char key[64];
    unsigned long long v;

    if (sscanf(line, "stat %63s %llu", key, &v) != 2)
        return;
    if (strcmp(key, "msgs_w0") == 0 || strcmp(key, "msgs_w1") == 0) {
        r->msgs_w[key[6] - '0'] = v;
        r->have_msgs_w = true;
    } else if (strcmp(key, "conns") == 0 || strcmp(key, "conns_w0") == 0 ||
               strcmp(key, "conns_w1") == 0) {
        r->accepted += v;
        r->have_accepted = true;
    }
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strcmp(key, keys[i].key) == 0)
            *(uint64_t *)((char *)r + keys[i].off) = v;
    r->have_mely |= strcmp(key, "steals") == 0;
}

/* SIGTERM, its stat lines, its end (SIGKILL after END_LIMIT_S). */
static void server_end(struct server *s, struct run *r)
{
    uint64_t limit = now_ns() + END_LIMIT_S * 1000000000ull;
    char why[64];

    if (s->pid <= 0)
        return;
    kill(s->pid, SIGTERM);
    while (now_ns() < limit && server_read(s, 100000000u))
        ;
    uint64_t now = now_ns();
    if (!bench_wait(s->pid, now < limit ? (double)(limit - now) / 1e9 : 0.001, why, sizeof(why)))
        ;
    else if (strcmp(why, "killed") == 0)
        snprintf(r->note, sizeof(r->note), "did not end within %d s of SIGTERM: killed",
                 END_LIMIT_S);
    else
        snprintf(r->note, sizeof(r->note), "server ended with %s", why);
    close(s->fd);
    for (char *save = NULL, *line = strtok_r(s->buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save))
        parse_stat(r, line);
}

static void run_one(enum kind k, unsigned conns, struct run *r)
{
    struct server s;
    unsigned port = 0;

    memset(r, 0, sizeof(*r));
    if (!server_start(k, &s, &port, r->why, sizeof(r->why))) {
        server_end(&s, r);
        return;
    }
    struct echo_client_cfg cfg = {.port = port, .conns = conns, .msg_bytes = o.msg_bytes,
                                  .warmup_s = o.warmup, .seconds = o.seconds, .server = s.pid};
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

enum { COL_CONNS, COL_SERVER, COL_KEY, COL_KMSGS, COL_VS, COL_P50, COL_P99, COL_SRV, COL_CORES,
       COL_CLI, COL_SHARE, COL_RAMP, COL_STARVED, COL_STEALS, COL_SPREAD, COL_NOTE, NCOLS };

static const struct bench_column columns[NCOLS] = {
    [COL_CONNS] = {.title = "conns", .key = "conns", .right = true},
    [COL_SERVER] = {.title = "server", .gap = 2},
    [COL_KEY] = {.key = "server"},
    [COL_KMSGS] = {.title = "Kmsg/s", .key = "kmsgs_per_s", .right = true, .gap = 2},
    [COL_VS] = {.title = "vs le-2", .key = "ratio_to_libevent_2", .right = true},
    [COL_P50] = {.title = "p50 us", .key = "rtt_p50_us", .right = true},
    [COL_P99] = {.title = "p99 us", .key = "rtt_p99_us", .right = true},
    [COL_SRV] = {.title = "srv CPU us/msg", .key = "server_cpu_us_per_msg", .right = true,
                 .gap = 2},
    [COL_CORES] = {.title = "srv cores", .key = "server_cores", .right = true},
    [COL_CLI] = {.title = "cli CPU us/msg", .key = "client_cpu_us_per_msg", .right = true},
    [COL_SHARE] = {.title = "w0/w1 %", .key = "share_w0_w1_pct", .right = true, .gap = 2},
    [COL_RAMP] = {.title = "ramp ms", .key = "ramp_ms", .right = true},
    [COL_STARVED] = {.title = "starved", .key = "starved_conns", .right = true},
    [COL_STEALS] = {.title = "steals", .key = "steals", .right = true},
    [COL_SPREAD] = {.title = "passes Kmsg/s", .key = "passes_kmsgs_min_max", .right = true},
    [COL_NOTE] = {.title = "note", .key = "note", .gap = 2},
};

static double kmsgs(const void *p)
{
    const struct run *r = p;
    return r->ok ? r->kmsgs : -1;
}

/* Of a row's passes, the median one (by Kmsg/s), NULL if none ran. */
static const struct run *median_run(const struct run *runs)
{
    int m = bench_median_pass(runs, sizeof(runs[0]), o.passes, kmsgs);
    return m < 0 ? NULL : &runs[m];
}

static const char *server_name(enum kind k)
{
    static char steal_name[64];
    snprintf(steal_name, sizeof(steal_name), kinds[K_MELY_STEAL].name, o.steal);
    return k == K_MELY_STEAL ? steal_name : kinds[k].name;
}

/* The note of a row: mely's counters, what the server said, failed passes. */
static void row_note(const struct run *runs, const struct run *r, unsigned conns, char *t,
                     size_t size)
{
    char per[128];
    unsigned failed = 0;
    size_t l = 0;

    for (unsigned p = 0; p < o.passes; p++)
        failed += !runs[p].ok;
    mely_per_msg(r, per, sizeof(per));
    if (per[0])
        l += (size_t)snprintf(t + l, size - l, "%s; ", per);
    if (r->have_accepted && r->accepted < conns)
        l += (size_t)snprintf(t + l, size - l, "the server accepted %" PRIu64 " of %u connections; ",
                              r->accepted, conns);
    if (r->measured)
        l += (size_t)snprintf(t + l, size - l, "read handler measured %" PRIu64 " cyc; ",
                              r->measured);
    if (r->watch_moves)
        l += (size_t)snprintf(t + l, size - l, "watch moves %" PRIu64 "; ", r->watch_moves);
    if (failed)
        l += (size_t)snprintf(t + l, size - l, "%u pass(es) failed: %s; ", failed,
                              runs[0].ok ? "see above" : runs[0].why);
    for (unsigned p = 0; p < o.passes && l < size - 1; p++)
        if (runs[p].note[0]) {
            l += (size_t)snprintf(t + l, size - l, "%s; ", runs[p].note);
            break;
        }
    if (l >= 2 && l < size)
        t[l - 2] = '\0';
}

/* A row's cells: its median pass, the spread of its passes, a note. */
static void row_cells(struct bench_table *t, unsigned row, enum kind k, const struct run *runs,
                      unsigned conns, const struct run *ref)
{
    const struct run *r = median_run(runs);
    double lo = 0, hi = 0;
    bool first = true;

    bench_cell(t, row, COL_CONNS, "%u", conns);
    bench_cell(t, row, COL_SERVER, "%s", server_name(k));
    bench_cell(t, row, COL_KEY, "%s", kinds[k].key);
    for (unsigned c = COL_KMSGS; c < COL_NOTE; c++)
        bench_cell(t, row, c, "-");
    if (!r) {
        bench_cell(t, row, COL_KMSGS, "n/a");
        bench_cell(t, row, COL_NOTE, "n/a (%s)", runs[0].why);
        return;
    }
    bench_cell(t, row, COL_KMSGS, "%.1f", r->kmsgs);
    if (ref && ref->kmsgs > 0)
        bench_cell(t, row, COL_VS, "%.2f", r->kmsgs / ref->kmsgs);
    bench_cell(t, row, COL_P50, "%.1f", r->p50);
    bench_cell(t, row, COL_P99, "%.1f", r->p99);
    if (r->srv_cpu_s >= 0 && r->msgs > 0) {
        bench_cell(t, row, COL_SRV, "%.2f", r->srv_cpu_s * 1e6 / (double)r->msgs);
        bench_cell(t, row, COL_CORES, "%.2f", r->srv_cpu_s / r->elapsed);
    }
    if (r->msgs > 0)
        bench_cell(t, row, COL_CLI, "%.2f", r->cli_cpu_s * 1e6 / (double)r->msgs);
    uint64_t tot = r->msgs_w[0] + r->msgs_w[1];
    if (r->have_msgs_w && tot > 0)
        bench_cell(t, row, COL_SHARE, "%.0f/%.0f", 100.0 * (double)r->msgs_w[0] / (double)tot,
                   100.0 * (double)r->msgs_w[1] / (double)tot);
    bench_cell(t, row, COL_RAMP, "%.0f", r->ramp_ms);
    bench_cell(t, row, COL_STARVED, "%u", r->starved);
    if (r->have_mely)
        bench_cell(t, row, COL_STEALS, "%" PRIu64, r->steals);
    for (unsigned p = 0; p < o.passes; p++)
        if (runs[p].ok) {
            lo = first || runs[p].kmsgs < lo ? runs[p].kmsgs : lo;
            hi = first || runs[p].kmsgs > hi ? runs[p].kmsgs : hi;
            first = false;
        }
    bench_cell(t, row, COL_SPREAD, "%.1f..%.1f", lo, hi);
    row_note(runs, r, conns, bench_cell(t, row, COL_NOTE, "%s", ""), BENCH_CELL);
}

static struct run runs[MAX_NCONNS][NKINDS][MAX_PASSES];

/* The targets, at every N: row a's Kmsg/s >= need x row b's. */
static const struct target {
    enum kind a, b;
    double need;
    const char *a_name, *b_name; /* a_name NULL: "mely (steal POLICY)" */
} targets[] = {
    {K_MELY_OFF, K_LE2, 1, "mely (steal off)", "libevent base per thread"},
    {K_MELY_STEAL, K_MELY_OFF, TARGET_STEAL_RATIO, NULL, "mely (steal off)"},
    {K_STREAM, K_MELY_OFF, TARGET_STREAM_RATIO, "mely stream", "mely (steal off)"},
    {K_STREAM, K_BEV, 1, "mely stream", "libevent bufferevent"},
};
#define NTARGETS (sizeof(targets) / sizeof(targets[0]))

/* Target tg at the i-th N into row `row` of t. */
static void target_cells(struct bench_table *t, unsigned row, const struct target *tg, unsigned i)
{
    const struct run *a = median_run(runs[i][tg->a]), *b = median_run(runs[i][tg->b]);
    double x = a && b && b->kmsgs > 0 ? a->kmsgs / b->kmsgs : -1;
    char a_name[64];

    snprintf(a_name, sizeof(a_name), "mely (steal %s)", o.steal);
    if (tg->need == 1)
        bench_cell(t, row, 0, "N=%u: %s >= %s", o.conns[i], tg->a_name ? tg->a_name : a_name,
                   tg->b_name);
    else
        bench_cell(t, row, 0, "N=%u: %s >= %.2f x %s", o.conns[i],
                   tg->a_name ? tg->a_name : a_name, tg->need, tg->b_name);
    bench_cell(t, row, 1, ">= %.2fx", tg->need);
    if (x > 0)
        bench_cell(t, row, 2, "%.2fx", x);
    else
        bench_cell(t, row, 2, "-");
    bench_cell(t, row, 3, "%s", x <= 0 ? "n/a" : x >= tg->need ? "PASS" : "FAIL");
}

/* The targets per N, as a table and a CSV file of their own. */
static void print_targets(const struct bench_machine *mc, const struct bench_param *params)
{
    static const struct bench_column tcols[] = {
        {.title = "target", .key = "target"},
        {.title = "needs", .key = "needs", .right = true, .gap = 2},
        {.title = "measured", .key = "measured", .right = true},
        {.title = "status", .key = "status", .gap = 2},
    };
    const struct bench_param tparams[] = {params[0], params[1], params[3]}; /* msg_bytes, seconds, passes */
    struct bench_table t;
    char path[4096];

    bench_table_init(&t, tcols, 4, o.nconns * NTARGETS);
    for (unsigned i = 0; i < o.nconns; i++)
        for (unsigned j = 0; j < NTARGETS; j++)
            target_cells(&t, i * NTARGETS + j, &targets[j], i);
    printf("\n");
    bench_table_print(stdout, &t);
    size_t l = strlen(o.csv);
    l -= l > 4 && strcmp(o.csv + l - 4, ".csv") == 0 ? 4 : 0;
    snprintf(path, sizeof(path), "%.*s-targets.csv", (int)l, o.csv);
    bench_table_csv(&b, path, mc, tparams, 3, &t);
    bench_table_free(&t);
}

/* The table of every row, and its CSV file. True if every row has figures. */
static bool print_rows(const struct bench_machine *mc, const struct bench_param *params,
                       unsigned nparams, const char *load)
{
    unsigned used = 0;
    struct bench_table t;
    bool all = true;

    for (unsigned k = 0; k < NKINDS; k++)
        used += o.use[k];
    bench_table_init(&t, columns, NCOLS, o.nconns * used);
    for (unsigned i = 0, row = 0; i < o.nconns; i++)
        for (unsigned k = 0; k < NKINDS; k++)
            if (o.use[k]) {
                row_cells(&t, row++, (enum kind)k, runs[i][k], o.conns[i],
                          median_run(runs[i][K_LE2]));
                all &= median_run(runs[i][k]) != NULL;
            }
    printf("\n");
    bench_table_print(stdout, &t);
    printf("each row: the median of its %u pass(es) by Kmsg/s; vs le-2: Kmsg/s over the libevent "
           "base-per-thread server's; srv cores: the server's CPU time over the window; w0/w1: "
           "messages echoed by worker/thread 0 and 1%s\n",
           o.passes, load);
    bench_load_warn(&b);
    bench_table_csv(&b, o.csv, mc, params, nparams, &t);
    bench_table_free(&t);
    return all;
}

/* ---- Main ------------------------------------------------------------------------------------ */

/* One pass of every row, the server order rotating with the pass. */
static void run_pass(unsigned p)
{
    for (unsigned i = 0; i < o.nconns; i++)
        for (unsigned j = 0; j < NKINDS; j++) {
            enum kind k = (enum kind)((j + p) % NKINDS);
            struct run *r = &runs[i][k][p];
            char per[128];
            if (!o.use[k])
                continue;
            run_one(k, o.conns[i], r);
            printf("  pass %u/%u N=%-5u %-22s", p + 1, o.passes, o.conns[i], server_name(k));
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
}

static void print_setup(void)
{
    int cpu[2];
    char spin[80] = "spin and batch at their defaults", client[48] = "not pinned";

    first_cpus(cpu, 2);
    if (o.spin_us >= 0)
        snprintf(spin, sizeof(spin), "spin_us %d, batch at its default", o.spin_us);
    if (o.client_cpu >= 0)
        snprintf(client, sizeof(client), "pinned to CPU %d", o.client_cpu);
    printf("setup: server threads on CPUs %d and %d (mely, mely stream: 2 pinned workers, %s, "
           "the stream's colors from a range; libevent, 2 bases, and bufferevent: 2 pinned "
           "threads; libevent, 1 thread: not pinned); client: 1 thread, %s; "
           "%u-byte messages, one in flight per connection; %.1f s warm-up + %.1f s measured "
           "per row and pass, %u interleaved pass(es); echo handlers annotated timeleft "
           "%" PRIu64 " cycles\n",
           cpu[0], cpu[1], spin, client, o.msg_bytes, o.warmup, o.seconds, o.passes, o.timeleft);
    bench_print_mely_env(stdout);
    if (getenv("MELY_STEAL"))
        printf("note: MELY_STEAL overrides the mely rows' policy\n");
}

/* As a server (--server KIND): its exit status. */
static int run_server(void)
{
    bool stream = strcmp(o.server, "mely-stream") == 0, bev = strcmp(o.server, "bufferevent") == 0;
    if (stream || strcmp(o.server, "mely") == 0)
        return echo_server_mely(o.steal, o.timeleft, o.spin_us, stream);
    if (bev || strcmp(o.server, "libevent") == 0)
        return echo_server_libevent(o.threads, bev);
    fprintf(stderr, "echo: --server %s: not mely, mely-stream, libevent or bufferevent\n",
            o.server);
    return 2;
}

int main(int argc, char **argv)
{
    struct bench_machine mc;
    struct bench_param params[8];
    char load[64];

    raise_fd_limit(~0u);
    int rc = bench_options("echo [options]", options, 0, 0, argc, argv);
    if (rc <= 0)
        return rc ? 2 : 0;
    if (o.server)
        return run_server();
    if (o.nconns == 0) {
        static const unsigned full[] = {1, 10, 100, 1000}, quick[] = {1, 100};
        o.nconns = o.quick ? 2 : 4;
        memcpy(o.conns, o.quick ? quick : full, o.nconns * sizeof(unsigned));
    }
    ssize_t n = readlink("/proc/self/exe", o.exe, sizeof(o.exe) - 1);
    if (n <= 0 || sched_getaffinity(0, sizeof(o.allowed), &o.allowed) != 0) {
        fprintf(stderr, "echo: cannot find my own executable or affinity\n");
        return 2;
    }
    o.exe[n] = '\0';
    signal(SIGPIPE, SIG_IGN);
    printf("mely echo over loopback: mely's server next to plain libevent servers, one closed-loop "
           "client\n");
    bench_machine_get(&mc, stdout);
    print_setup();
    pin_self(o.client_cpu);
    struct bench_probe p0 = bench_probe_now();
    for (unsigned p = 0; p < o.passes; p++)
        run_pass(p);
    struct bench_probe p1 = bench_probe_now();
    bench_load_note(&b, &p0, &p1, load, sizeof(load));
    unsigned np = bench_opt_params(options, params, 8);
    bool all = print_rows(&mc, params, np, load);
    print_targets(&mc, params);
    if (!all)
        printf("\nsome rows have no figures (n/a): exit status 1\n");
    return all ? 0 : 1;
}
