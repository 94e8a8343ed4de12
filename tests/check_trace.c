/*
 * check_trace.c: tracing (mely_trace_start/stop, MELY_TRACE, mely.h's
 * "Tracing"). A known program (three colors, three named handlers, a known
 * sequence of posts) is traced on one and two workers; the file must be JSON
 * (tools/mely-trace --runs reads it with python3's json module) and hold
 * exactly the runs the program made: the same count, colors, handler names
 * and, per color, the same order. A small ring (MELY_TRACE_RECORDS) must drop
 * the oldest records and say how many.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mely/mely.h"
#include "tests/testutil.h"

enum { NCOLORS = 3, PER_COLOR = 200, NRUNS = NCOLORS * PER_COLOR, MAXRUNS = NRUNS + 16 };

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
            ck_assert_uint_lt(s->nruns, MAXRUNS);
            s->color[s->nruns] = color;
            snprintf(s->name[s->nruns], sizeof(s->name[0]), "%s", line + at);
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
    struct summary s;
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
    struct summary s;
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
    struct summary s;
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

int main(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = new_tcase(s, "trace", 60);
    tcase_add_loop_test(tc, trace_has_the_programs_runs, 0, NELEM(trace_workers));
    tcase_add_test(tc, small_ring_drops_the_oldest);
    tcase_add_test(tc, env_traces_until_shutdown);
    tcase_add_test(tc, trace_errors);
    return mely_test_main(s);
}
