/* SPDX-License-Identifier: MIT */
/*
 * melyhdr.cpp: the original Mely header: cbv as a raw pointer (auto-free on
 * and off), DEBUG_TMP, PRINT_ALERT, PANIC, DEBUG, rdtscll, MAX_COLORS,
 * MAX_THREADS, the benchmark hooks, and err.h's warn/fatal/panic objects.
 */
#include "mely.h"

#include "ctest.h"

static int g_runs;
static cbv g_cb; /* Mely style: NULL until set */

static void tick()
{
    g_runs++;
    if (g_runs < 3) {
        cpucb_tail(g_cb);
        return;
    }
    g_cb->setFlagAutoFree(true);
    g_cb = NULL;
    dump_current_state(true);
    save_bench_time(1234);
    fflush(stdout);
    exit(0);
}

int main()
{
    ct_watchdog(30);
    std::string err;
    int st = ct_fork([] { DEBUG_TMP("value %d\n", 42); }, &err);
    /* the original's format: "(function,line) message"; in a lambda the
     * function is operator() */
    CHECK(ct_exited(st, 0) && ct_contains(err, "(operator(),") && ct_contains(err, ") value 42"));
    /* PRINT_ALERT and PANIC as the original shaped them: usable without a
     * semicolon after them */
    st = ct_fork([] { PRINT_ALERT("alert %s\n", "x") }, &err);
    CHECK(ct_exited(st, 0) && ct_contains(err, "-------\t(operator(),") &&
          ct_contains(err, ") alert x"));
    st = ct_fork([] { PANIC("bad %d\n", 7) }, &err);
    CHECK(ct_exited(st, EXIT_FAILURE) && ct_contains(err, "*******\t(") &&
          ct_contains(err, "bad 7"));
    st = ct_fork([] { reset_threads_queue(); }, &err);
    CHECK(ct_exited(st, EXIT_FAILURE) && ct_contains(err, "Not implemented in MELY"));
    /* err.h's objects in a Mely program: std::ostream streams (a std::string,
     * a char as text) or printf-style, with libasync's prefixes and endings */
    st = ct_fork(
        [] {
            warn << "before name\n";
            setprogname("/bin/melyprog");
            warn << "s=" << std::string("std") << " c=" << 'c' << " n=" << 3 << "\n";
            warn("p=%p\n", (void *)NULL);
            warnx << "x\n";
            warnx("x%d\n", 2);
        },
        &err);
    CHECK(ct_exited(st, 0) &&
          err == "before name\nmelyprog: s=std c=c n=3\nmelyprog: p=0x0\nx\nx2\n");
    st = ct_fork(
        [] {
            setprogname("m");
            fatal << "bad " << 1 << "\n";
        },
        &err);
    CHECK(ct_exited(st, 1) && err == "m: fatal: bad 1\n");
    st = ct_fork([] { fatal("bad %d", 2); }, &err);
    CHECK(ct_exited(st, 1) && err == "fatal: bad 2");
    st = ct_fork([] { panic << "boom\n"; }, &err);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && err == "PANIC: boom\n");

    /* DEBUG is not even compiled: it may name what does not exist */
    DEBUG("never %d\n", no_such_variable);

    unsigned long long a, b;
    rdtscll(a);
    rdtscll(b);
    CHECK(b >= a);
    CHECK(MAX_COLORS == 65536 && MAX_THREADS >= 8);
    CHECK(task_get_nthreads() <= MAX_THREADS);

    /* hooks: do nothing, or print what doc/porting.md says */
    stop_hw_counters();
    register_EH_name((void *)tick, (char *)"tick");
    register_task_avg_duration(500);
    reset_runtime_stats();

    /* the whole run in a child, to check what the hooks print at the end */
    st = ct_fork(
        [] {
            setenv("MELY_COMPAT_BENCH", "1", 1);
            g_cb = cwrap(tick, 3);
            CHECK(g_cb->getFlagAutoFree());
            g_cb->setFlagAutoFree(false);
            cpucb(g_cb);
            amain();
        },
        &err);
    CHECK(ct_exited(st, 0));
    CHECK(ct_contains(err, "worker 0: events"));
    CHECK(ct_contains(err, "bench time: 1234"));
    printf("compat mely.h: ok\n");
    return 0;
}
