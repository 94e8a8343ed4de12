/* SPDX-License-Identifier: MIT */
/*
 * check_trace.c: tracing (mely_trace_start/stop, MELY_TRACE, mely.h's
 * "Tracing"). A known program (three colors, three named handlers, a known
 * sequence of posts) is traced on one and two workers; the file must be JSON
 * (tools/mely-trace --runs reads it with python3's json module) and hold
 * exactly the runs the program made: the same count, colors, handler names
 * and, per color, the same order. A small ring (MELY_TRACE_RECORDS) must drop
 * the oldest records and say how many. The runs of a timer, an fd watch and
 * a listener are named by the program's callbacks, not by the runtime's
 * dispatchers that call them (runname.h), on both engines.
 *
 * The program is linked with -export-dynamic so that dladdr() can name its
 * callbacks.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mely/mely.h>
#include "tests/testutil.h"

enum { NCOLORS = 3, PER_COLOR = 200, NRUNS = NCOLORS * PER_COLOR, MAXRUNS = 1 << 14 };

static const mely_color_t colors[NCOLORS] = {5, 6, 7};
static const mely_handler_t handlers[NCOLORS] = {
    {.name = "alpha"}, {.name = "beta \"b\""}, {.name = "gamma"}};

/* Event i of color c runs handler (i + c) % 3: each color has its own known
 * sequence of names. */
static unsigned handler_of(unsigned c, unsigned i)
{
    return (i + c) % NCOLORS;
}

/* Runs in order, per color: what the program made. */
static unsigned made[NCOLORS][PER_COLOR];
static atomic_uint made_n[NCOLORS];

static void step(void *arg)
{
    unsigned v = (unsigned)(uintptr_t)arg;
    unsigned c = v / PER_COLOR;
    unsigned k = atomic_fetch_add(&made_n[c], 1);
    if (k < PER_COLOR)
        made[c][k] = v % PER_COLOR;
    count_and_stop(NULL);
}

static void post_program(void)
{
    memset(made, 0, sizeof(made));
    for (unsigned c = 0; c < NCOLORS; c++)
        atomic_store(&made_n[c], 0);
    atomic_store(&ran, 0);
    stop_at = NRUNS;
    for (unsigned i = 0; i < PER_COLOR; i++)
        for (unsigned c = 0; c < NCOLORS; c++)
            ck_assert_int_eq(mely_post_ex(&rt, colors[c], MELY_PRIO_DEFAULT,
                                          &handlers[handler_of(c, i)], step,
                                          (void *)(uintptr_t)(c * PER_COLOR + i), 0),
                             0);
}

/* What `mely-trace --runs` read from a trace. */
struct summary {
    long dropped;
    unsigned workers;  /* thread_name entries */
    unsigned nruns;
    unsigned color[MAXRUNS];
    char name[MAXRUNS][32];
};

static void summarize(const char *path, struct summary *s)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "python3 '%s' --runs '%s'", MELY_TRACE_TOOL, path);
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "popen(%s)", cmd);
    memset(s, 0, sizeof(*s));
    s->dropped = -1;
    char line[256];
    while (fgets(line, sizeof(line), p)) {
        line[strcspn(line, "\n")] = 0;
        unsigned color, tid;
        int at = 0;
        if (line[0] == 'D')
            s->dropped = atol(line + 2);
        else if (line[0] == 'W')
            s->workers++;
        else if (line[0] == 'R' && sscanf(line, "R %u %u %n", &color, &tid, &at) == 2 && at) {
            /* Every run counts; the first MAXRUNS are kept (a loaded
             * machine lets a live trace take in more runs than asked). */
            if (s->nruns < MAXRUNS) {
                s->color[s->nruns] = color;
                snprintf(s->name[s->nruns], sizeof(s->name[0]), "%s", line + at);
            }
            s->nruns++;
        }
    }
    int rc = pclose(p);
    ck_assert_msg(rc == 0, "%s: exit status %d (python3 missing, or the trace is not JSON)", cmd,
                  rc);
}

static unsigned color_index(mely_color_t color)
{
    for (unsigned c = 0; c < NCOLORS; c++)
        if (colors[c] == color)
            return c;
    ck_abort_msg("a run of color %u, which the program never posted to", (unsigned)color);
    return 0;
}

/* Checks that the trace's runs of each color are the last `keep[c]` runs the
 * program made of it, with the right handler names, in order. */
static void check_runs(const struct summary *s, const unsigned keep[NCOLORS])
{
    unsigned seen[NCOLORS] = {0};
    ck_assert_uint_le(s->nruns, MAXRUNS); /* the program made fewer */
    for (unsigned r = 0; r < s->nruns; r++) {
        unsigned c = color_index(s->color[r]);
        ck_assert_uint_lt(seen[c], keep[c]);
        unsigned i = made[c][PER_COLOR - keep[c] + seen[c]];
        ck_assert_str_eq(s->name[r], handlers[handler_of(c, i)].name);
        seen[c]++;
    }
    for (unsigned c = 0; c < NCOLORS; c++)
        ck_assert_uint_eq(seen[c], keep[c]);
}

static void trace_path(char *buf, size_t size, const char *what)
{
    snprintf(buf, size, "/tmp/check_trace.%d.%s.json", (int)getpid(), what);
}

/* Runs the program on `workers` workers traced into a ring of `records`
 * (NULL: the default), checks that it ran in order, and reads the trace into
 * *s; returns what mely_trace_stop() returned. */
static int traced_program(unsigned workers, const char *records, struct summary *s)
{
    char path[128];
    trace_path(path, sizeof(path), "program");
    init_runtime(&rt, workers, 0, 10, 0);
    if (records)
        setenv("MELY_TRACE_RECORDS", records, 1);
    ck_assert_int_eq(mely_trace_start(&rt, path), 0);
    unsetenv("MELY_TRACE_RECORDS");
    post_program();
    run_bounded(&rt, 30, "the traced program");
    for (unsigned c = 0; c < NCOLORS; c++) {
        ck_assert_uint_eq(atomic_load(&made_n[c]), PER_COLOR);
        for (unsigned i = 0; i < PER_COLOR; i++)
            ck_assert_uint_eq(made[c][i], i); /* per-color FIFO: the program's own order */
    }
    int ret = mely_trace_stop(&rt);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    summarize(path, s);
    unlink(path);
    return ret;
}

static const unsigned trace_workers[] = {1, 2};

START_TEST(trace_has_the_programs_runs)
{
    static struct summary s; /* large: not on the stack */
    ck_assert_int_eq(traced_program(trace_workers[_i], NULL, &s), 0);
    ck_assert_int_eq(s.dropped, 0);
    ck_assert_uint_eq(s.workers, trace_workers[_i]);
    ck_assert_uint_eq(s.nruns, NRUNS);
    const unsigned all[NCOLORS] = {PER_COLOR, PER_COLOR, PER_COLOR};
    check_runs(&s, all);
}
END_TEST

START_TEST(small_ring_drops_the_oldest)
{
    static struct summary s; /* large: not on the stack */
    int dropped = traced_program(1, "60", &s); /* 64 records, the next power of two */
    ck_assert_int_eq(dropped, s.dropped);
    /* At least the runs that did not fit; the ring holds 64 records, some of
     * them maybe polls or parks. */
    ck_assert_int_ge(dropped, NRUNS - 64);
    ck_assert_uint_le(s.nruns, 64);
    ck_assert_uint_gt(s.nruns, 0);
    /* The runs kept are the newest: per color, the tail of what was made. */
    unsigned keep[NCOLORS] = {0};
    for (unsigned r = 0; r < s.nruns; r++)
        keep[color_index(s.color[r])]++;
    check_runs(&s, keep);
}
END_TEST

START_TEST(env_traces_until_shutdown)
{
    char path[128];
    static struct summary s; /* large: not on the stack */
    trace_path(path, sizeof(path), "env");
    setenv("MELY_TRACE", path, 1);
    init_runtime(&rt, 2, 0, 10, 0);
    unsetenv("MELY_TRACE");
    ck_assert_int_eq(mely_trace_start(&rt, path), MELY_EBUSY); /* already tracing */
    post_program();
    run_bounded(&rt, 30, "the traced program");
    ck_assert_int_eq(mely_shutdown(&rt), 0); /* writes the trace */
    summarize(path, &s);
    unlink(path);
    ck_assert_uint_eq(s.nruns, NRUNS);
}
END_TEST

START_TEST(trace_errors)
{
    init_runtime(&rt, 1, 0, 10, 0);
    ck_assert_int_eq(mely_trace_stop(&rt), MELY_EINVAL);
    ck_assert_int_eq(mely_trace_start(&rt, NULL), MELY_EINVAL);
    ck_assert_int_lt(mely_trace_start(&rt, "/nonexistent-dir/trace.json"), 0);
    ck_assert_int_eq(mely_trace_stop(&rt), MELY_EINVAL); /* the failed start left none */
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    ck_assert_int_eq(mely_trace_start(&rt, "/tmp/x.json"), MELY_ESHUTDOWN);
    ck_assert_int_eq(mely_trace_stop(&rt), MELY_ESHUTDOWN);

    mely_t m;
    setenv("MELY_TRACE", "/nonexistent-dir/trace.json", 1);
    begin_capture();
    int err = mely_init(&m, NULL);
    const char *msg = end_capture();
    unsetenv("MELY_TRACE");
    ck_assert_int_lt(err, 0);
    ck_assert_msg(strstr(msg, "MELY_TRACE") != NULL, "message: %s", msg);
}
END_TEST

/* ---- runs named by the program's callbacks ------------------------------------------ */

/* The callbacks (exported: named through dladdr); the third to run stops. */
void trace_test_timer(void *arg)
{
    count_and_stop(arg);
}

void trace_test_watch(int fd, unsigned ready, void *arg)
{
    (void)ready;
    char c;
    if (read(fd, &c, 1) != 1)
        note("the watched pipe had no byte");
    count_and_stop(arg);
}

void trace_test_accept(int fd, const struct sockaddr *peer, unsigned peerlen, void *arg)
{
    (void)peer;
    (void)peerlen;
    close(fd);
    count_and_stop(arg);
}

/* A client connected to port (the listener's backlog takes it). */
static int connect_client(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    return fd;
}

static const char *const engines[] = {NULL, "legacy"};

/* A timer, a one-shot read watch and a listener, each run once, traced:
 * the trace names their runs trace_test_timer, trace_test_watch and
 * trace_test_accept, never the library's own dispatchers (static functions
 * of libmely, named "libmely.so.0+0x..."). The listener may run once more
 * and find nothing to accept: that run is its callback's too. */
START_TEST(dispatched_runs_named_by_the_callbacks)
{
    char path[128];
    static struct summary s; /* large: not on the stack */
    trace_path(path, sizeof(path), "dispatch");
    int p[2];
    ck_assert_int_eq(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    init_runtime_engine(&rt, 1, 0, 10, 0, NULL, engines[_i]);
    atomic_store(&ran, 0);
    stop_at = 3;
    mely_watch_t *wt;
    mely_listener_t *l;
    ck_assert_int_eq(mely_trace_start(&rt, path), 0);
    ck_assert_int_eq(mely_timer_after(&rt, 1000000, MELY_TO(5), trace_test_timer, NULL, NULL), 0);
    ck_assert_int_eq(mely_watch(&rt, p[0], MELY_READ | MELY_ONESHOT, MELY_TO(6), trace_test_watch,
                                NULL, &wt),
                     0);
    ck_assert_int_eq(mely_listen(&rt, NULL, 0, 0, 0, MELY_TO(7), trace_test_accept, NULL, &l), 0);
    int client = connect_client(mely_listener_port(l));
    run_bounded(&rt, 30, "a timer, a watch and a listener");
    ck_assert_int_ge(mely_trace_stop(&rt), 0);
    ck_assert_int_eq(mely_listener_close(l), 0);
    ck_assert_int_eq(mely_watch_remove(wt), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    close(client);
    close(p[0]);
    close(p[1]);
    assert_no_notes();
    summarize(path, &s);
    unlink(path);

    unsigned timer = 0, watch = 0, accept = 0;
    for (unsigned r = 0; r < s.nruns; r++) {
        if (strcmp(s.name[r], "trace_test_timer") == 0)
            timer++;
        else if (strcmp(s.name[r], "trace_test_watch") == 0)
            watch++;
        else if (strcmp(s.name[r], "trace_test_accept") == 0)
            accept++;
        else
            ck_abort_msg("a run named \"%s\" (color %u)", s.name[r], s.color[r]);
    }
    ck_assert_uint_eq(timer, 1);
    ck_assert_uint_eq(watch, 1);
    ck_assert_uint_ge(accept, 1);
}
END_TEST

/* ---- starting and stopping while the workers run ------------------------------------ */

enum { CHAIN = 5 }; /* the chain's color (worker 1 of 2 owns it) */
static const mely_handler_t link_h = {.name = "link"};
static atomic_uint chain_runs, chain_budget;
static atomic_bool chain_end, chain_idle;

/* Each link posts the next while its budget lasts, then the chain waits
 * for the helper (so a trace takes in as many runs as the helper gives,
 * however late a loaded machine lets the helper stop it); worker 0 has
 * nothing to do and parks, so a stop must wake it for it to let go of its
 * ring. */
static void chain_link(void *arg)
{
    (void)arg;
    atomic_fetch_add(&chain_runs, 1);
    if (atomic_load(&chain_end)) {
        mely_stop(&rt);
        return;
    }
    if (atomic_fetch_sub(&chain_budget, 1) == 1) {
        atomic_store(&chain_idle, true);
        return;
    }
    if (mely_post_ex(&rt, CHAIN, MELY_PRIO_DEFAULT, &link_h, chain_link, NULL, 0) != 0)
        note("the chain could not go on");
}

/* Starts n links of the chain (n > 0). */
static bool chain_run(unsigned n)
{
    atomic_store(&chain_idle, false);
    atomic_store(&chain_budget, n);
    if (mely_post_ex(&rt, CHAIN, MELY_PRIO_DEFAULT, &link_h, chain_link, NULL, 0) != 0) {
        note("the chain could not start");
        return false;
    }
    return true;
}

/* Waits until the chain made n more runs, or went idle. */
static bool chain_passes(unsigned n)
{
    unsigned until = atomic_load(&chain_runs) + n;
    for (unsigned ms = 0; ms < 10000; ms++) { /* bounded: 10 s */
        if (atomic_load(&chain_runs) >= until || atomic_load(&chain_idle))
            return true;
        sleep_us(1000);
    }
    return false;
}

enum { TRACED = 2000, CHAIN_MAX = 20000 }; /* CHAIN_MAX: well within a ring */

/* The helper: tracing on and off twice. A trace starts while the chain
 * waits (worker 1 parks like worker 0) and stops while it runs, after about
 * TRACED runs; the chain's budget bounds what a stop that comes late (a
 * loaded machine) lets the trace take in, within the ring's size. */
static void *trace_twice(void *arg)
{
    const char *const *path = arg;
    for (int k = 0; k < 2; k++) {
        if (!chain_run(500) || !wait_flag(&chain_idle, 10000))
            note("the chain stalled before trace %d", k);
        int err = mely_trace_start(&rt, path[k]);
        if (err)
            note("mely_trace_start while running: %d", err);
        if (!chain_run(CHAIN_MAX) || !chain_passes(TRACED))
            note("the chain stalled while tracing");
        int dropped = mely_trace_stop(&rt);
        if (dropped != 0)
            note("mely_trace_stop while running: %d", dropped);
        if (!wait_flag(&chain_idle, 10000))
            note("the chain did not end its budget");
    }
    atomic_store(&chain_end, true);
    if (mely_post_ex(&rt, CHAIN, MELY_PRIO_DEFAULT, &link_h, chain_link, NULL, 0) != 0)
        note("the chain could not end");
    return NULL;
}

START_TEST(start_and_stop_while_running)
{
    char path[2][128];
    const char *paths[2] = {path[0], path[1]};
    trace_path(path[0], sizeof(path[0]), "live0");
    trace_path(path[1], sizeof(path[1]), "live1");
    atomic_store(&chain_runs, 0);
    atomic_store(&chain_end, false);
    init_runtime(&rt, 2, 0, 10, 0);
    run_with_helper(&rt, trace_twice, paths, 60, "a chain traced twice");
    ck_assert_int_eq(mely_trace_stop(&rt), MELY_EINVAL); /* both were stopped */
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    for (int k = 0; k < 2; k++) {
        static struct summary s; /* large: not on the stack */
        summarize(path[k], &s);
        unlink(path[k]);
        ck_assert_int_eq(s.dropped, 0);
        ck_assert_uint_eq(s.workers, 2);
        /* At least most of the TRACED runs before the stop (the start
         * takes effect at the worker's next turn), at most the budget. */
        ck_assert_uint_ge(s.nruns, TRACED / 2);
        ck_assert_uint_le(s.nruns, CHAIN_MAX);
        for (unsigned r = 0; r < s.nruns && r < MAXRUNS; r++)
            ck_assert_str_eq(s.name[r], "link");
    }
}
END_TEST

static atomic_int in_handler_stop = 1;

static void stop_from_handler(void *arg)
{
    (void)arg;
    atomic_store(&in_handler_stop, mely_trace_stop(&rt));
    mely_stop(&rt);
}

/* A handler's own ring would never be let go: refused. */
START_TEST(stop_from_a_handler_is_refused)
{
    char path[128];
    trace_path(path, sizeof(path), "handler");
    init_runtime(&rt, 2, 0, 10, 0);
    ck_assert_int_eq(mely_trace_start(&rt, path), 0);
    ck_assert_int_eq(mely_post(&rt, 1, stop_from_handler, NULL), 0);
    run_bounded(&rt, 30, "a handler stopping the trace");
    ck_assert_int_eq(atomic_load(&in_handler_stop), MELY_EBUSY);
    ck_assert_int_eq(mely_trace_stop(&rt), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    unlink(path);
}
END_TEST

/* ---- exit() ----------------------------------------------------------------------- */

enum { EXIT_AFTER = 300, SLEEPER = 7 /* owned by worker 1 of 2 */ };
static const mely_handler_t ticker_h = {.name = "ticker"}, sleeper_h = {.name = "sleeper"};
static unsigned ticks;
static bool with_sleeper;
static atomic_bool sleeping;

/* Color 4 (worker 0): 300 runs, the last of which calls exit(0), as legacy
 * programs end; the first waits for the sleeper to be asleep, if any. */
static void ticker(void *arg)
{
    (void)arg;
    if (ticks == 0 && with_sleeper && !wait_flag(&sleeping, 10000))
        _exit(5);
    if (++ticks == EXIT_AFTER)
        exit(0);
    if (mely_post_ex(&rt, 4, MELY_PRIO_DEFAULT, &ticker_h, ticker, NULL, 0) != 0)
        _exit(3);
}

/* Worker 1, inside a handler for far longer than the exit waits. */
static void sleeper(void *arg)
{
    (void)arg;
    atomic_store(&sleeping, true);
    struct timespec ts = {.tv_sec = 3};
    while (nanosleep(&ts, &ts) != 0) /* bounded: 3 s */
        ;
}

static void exit_child(void *arg, bool busy_worker)
{
    const char *path = arg;
    clear_mely_env();
    setenv("MELY_TRACE", path, 1);
    with_sleeper = busy_worker;
    mely_config_t cfg;
    mely_config_init(&cfg);
    cfg.workers = 2;
    cfg.pin = 0;
    if (mely_init(&rt, &cfg) != 0 ||
        mely_post_ex(&rt, 4, MELY_PRIO_DEFAULT, &ticker_h, ticker, NULL, 0) != 0 ||
        (busy_worker && mely_post_ex(&rt, SLEEPER, MELY_PRIO_DEFAULT, &sleeper_h, sleeper, NULL, 0)))
        _exit(2);
    mely_run(&rt);
    _exit(4); /* the ticker should have exited */
}

/* What a file holds, whole (a trace of this size is small). */
static char *slurp(const char *path)
{
    static char buf[1 << 20];
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "no trace at %s", path);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* MELY_TRACE and a program that ends with exit() from a handler: the trace
 * is written, with every run the exiting worker made before (its last,
 * which never returned, excepted). With the other worker inside a long
 * handler, the exit does not wait for it: its ring is left out and named. */
START_TEST(exit_from_a_handler_writes_the_trace)
{
    bool busy_worker = _i;
    char path[128];
    trace_path(path, sizeof(path), busy_worker ? "exitbusy" : "exit");
    run_child(exit_child, path, busy_worker);
    static struct summary s; /* large: not on the stack */
    summarize(path, &s);
    char *text = slurp(path);
    unlink(path);
    ck_assert_int_eq(s.dropped, 0);
    unsigned tickers = 0;
    for (unsigned r = 0; r < s.nruns; r++)
        tickers += strcmp(s.name[r], "ticker") == 0;
    ck_assert_uint_eq(tickers, EXIT_AFTER - 1);
    if (busy_worker) {
        ck_assert_msg(strstr(text, "\"unwritten_workers\":[1]") != NULL,
                      "worker 1 (in a 3 s handler) not named as left out");
        ck_assert_uint_eq(s.workers, 1);
    } else {
        ck_assert_msg(strstr(text, "unwritten_workers") == NULL, "a worker was left out");
        ck_assert_uint_eq(s.workers, 2);
    }
}
END_TEST

static void shutdown_at_exit(void)
{
    if (mely_shutdown(&rt) < 0)
        _exit(6);
}

/* A program's own exit handler, registered before mely_init() and so run
 * after the runtime's, shuts the runtime down: the trace the runtime's
 * handler wrote stays as it is. */
static void shutdown_child(void *arg, bool unused)
{
    (void)unused;
    clear_mely_env();
    setenv("MELY_TRACE", arg, 1);
    if (atexit(shutdown_at_exit) != 0)
        _exit(2);
    init_runtime(&rt, 2, 0, 10, 0);
    post_program();
    mely_run(&rt);
    exit(0);
}

START_TEST(exit_then_shutdown)
{
    char path[128];
    trace_path(path, sizeof(path), "exitshut");
    run_child(shutdown_child, path, false);
    static struct summary s; /* large: not on the stack */
    summarize(path, &s);
    unlink(path);
    ck_assert_uint_eq(s.nruns, NRUNS);
    ck_assert_uint_eq(s.workers, 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = new_tcase(s, "trace", 60);
    tcase_add_loop_test(tc, trace_has_the_programs_runs, 0, NELEM(trace_workers));
    tcase_add_test(tc, small_ring_drops_the_oldest);
    tcase_add_test(tc, env_traces_until_shutdown);
    tcase_add_test(tc, trace_errors);
    tcase_add_loop_test(tc, dispatched_runs_named_by_the_callbacks, 0, NELEM(engines));
    tcase_add_test(tc, start_and_stop_while_running);
    tcase_add_test(tc, stop_from_a_handler_is_refused);
    tcase_add_loop_test(tc, exit_from_a_handler_writes_the_trace, 0, 2);
    tcase_add_test(tc, exit_then_shutdown);
    return mely_test_main(s);
}
