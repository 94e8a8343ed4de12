/* SPDX-License-Identifier: MIT */
/*
 * testutil.h: what the Check test programs share: scaled event counts,
 * bounded waits, failure notes, bounded runs, the workers' counters, runtime
 * setup and the runtime shapes of the stress tests, a runtime and handlers for
 * the small API tests, and the suite boilerplate (test cases, main()). The
 * clock, sleeps, CPU time, descriptors and the watchdog are common/measure.h's,
 * which bench/ shares.
 *
 * Rules every test program follows (the helpers below are built for them):
 *  - Handlers and helper threads never call ck_assert: from worker 0 it would
 *    jump out of mely_run(), from another thread it would end the process with
 *    the runtime still running. They note() what went wrong, and the test
 *    thread calls assert_no_notes() once mely_run() has returned and every
 *    helper thread is joined.
 *  - Every wait is bounded: wait_flag() takes a limit, and a watchdog stops a
 *    runtime that does not finish in time (an event lost or a worker that never
 *    wakes would otherwise hang mely_run()); the test then fails saying so.
 *  - MELY_TEST_SCALE (at most 1000) multiplies the event counts (through
 *    scaled()): 10 for a soak, 0.1 for a quick look. It defaults to 1, and to
 *    0.25 in ASan and TSan builds (testutil.c says why).
 *
 * Threads: the Check-facing helpers (those that may fail the test: run_*,
 * init_runtime, assert_no_notes, new_tcase, mely_test_main) are for the test
 * thread only; scaled, wait_*, stats_of, check_owner and note may be called
 * from any thread, and shapes[] (constant) read from any.
 *
 * Unit tests link the core library and may use all of this too: it uses the
 * public API (include/mely/mely.h) only.
 */
#ifndef MELY_TESTS_TESTUTIL_H
#define MELY_TESTS_TESTUTIL_H

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "common/measure.h" /* now_ns, sleep_us, cpu_s, the watchdog, ... */
#include <mely/mely.h>

#define NELEM(a) (int)(sizeof(a) / sizeof((a)[0]))

/* ---- scale ---------------------------------------------------------------- */

/* A `max` for scaled() that only keeps counts sane (calloc'ed per event). */
#define SCALED_MAX 100000000u

/* n multiplied by MELY_TEST_SCALE, clamped to [min, max]: the minimum keeps a
 * small scale from leaving too few events for the test to mean something.
 * A malformed MELY_TEST_SCALE is reported on stderr and taken as the default. */
unsigned scaled(unsigned n, unsigned min, unsigned max);

/* MELY_TEST_SCALE (default 1; 0.25 in sanitizer builds). */
double test_scale(void);

/* ---- bounded waits -------------------------------------------------------------- */

/* Waits until *flag is set, for at most `ms` milliseconds (polling every
 * 100 us). Returns whether it was set. */
bool wait_flag(atomic_bool *flag, unsigned ms);

/* Waits until *v reaches at least n, for at most `ms` milliseconds (polling
 * every 100 us). Returns whether it did. */
bool wait_count(atomic_uint *v, unsigned n, unsigned ms);

/* Descriptors open in this process now (from /proc/self/fd). */
unsigned open_fds(void);

/* A TCP port of 127.0.0.1 nothing listens on right now (bound by a plain
 * socket, then released). For the test thread: fails the test if it cannot. */
unsigned free_port(void);

/* ---- stderr capture ------------------------------------------------------------- */

/* Sends stderr (the descriptor and the stream) to a temporary file until
 * end_capture(), which returns what was written meanwhile (at most 4 KB; a
 * static buffer, valid until the next end_capture()). Not nested; the test
 * thread only. The runtime's default log printer (mely_set_log) writes there. */
void begin_capture(void);
const char *end_capture(void);

/* ---- the workers' counters ------------------------------------------------------ */

/* Worker w's counters in runtime m; a failure is noted, and reads as zeros. */
mely_stats_t stats_of(const mely_t *m, unsigned w);

/* Waits until the counter at byte offset `off` of worker w's mely_stats_t
 * (offsetof(mely_stats_t, parks)) exceeds `above`, for at most `ms`
 * milliseconds (polling every 100 us): counters are updated around the event
 * a test waits for, not necessarily before it. Returns whether it did. */
bool wait_stat(const mely_t *m, unsigned w, size_t off, uint64_t above, unsigned ms);

/* In a handler of `color`: notes a failure unless the color map names the
 * worker running it as the color's owner (a running color never moves). */
void check_owner(const mely_t *m, mely_color_t color);

/* ---- failure notes ------------------------------------------------------------ */

/* Records a failure seen outside the test thread (printf format); the first
 * one is kept for the message, the others are counted. */
__attribute__((format(printf, 1, 2))) void note(const char *fmt, ...);

/* Forgets every note (test_setup() does this before each test). */
void reset_notes(void);

/* Fails the test if anything was noted, quoting the first note. Call only
 * when no handler or helper thread can still note(). */
void assert_no_notes(void);

/* ---- bounded runs (the watchdog is common/measure.h's) ------------------------------- */

/* mely_run(m) under a watchdog of `seconds`; fails the test, naming `what`, if
 * mely_run() fails or the watchdog had to stop it. */
void run_bounded(mely_t *m, unsigned seconds, const char *what);

/* Starts helper(arg) on a new thread (a thread the runtime does not know),
 * run_bounded(m, seconds, what), joins the helper and assert_no_notes().
 * The helper must make mely_run() return (mely_stop()) or let a handler do it. */
void run_with_helper(mely_t *m, void *(*helper)(void *), void *arg, unsigned seconds,
                     const char *what);

/* Runs child(arg, flag) in a forked process, which must end it with exit
 * status 0 (exit() from the child, as legacy programs end: what the exit
 * handlers write is what the tests read); fails the test otherwise. */
void run_child(void (*child)(void *arg, bool flag), void *arg, bool flag);

/* ---- runtime setup ---------------------------------------------------------------- */

/* mely_init(m) from mely_config_init() defaults with these fields set; fails
 * the test unless it succeeds with `workers` workers (a MELY_* variable in the
 * environment still overrides the configuration, as it does for users). */
void init_runtime(mely_t *m, unsigned workers, int pin, unsigned batch, unsigned spin_us);

/* init_runtime() with a work-stealing policy (NULL: none). */
void init_runtime_steal(mely_t *m, unsigned workers, int pin, unsigned batch, unsigned spin_us,
                        const char *steal);

/* init_runtime() with a work-stealing policy and an engine (NULL: mely). */
void init_runtime_engine(mely_t *m, unsigned workers, int pin, unsigned batch, unsigned spin_us,
                         const char *steal, const char *engine);

/* Unsets MELY_WORKERS, MELY_PIN, MELY_BATCH, MELY_SPIN_US, MELY_STEAL,
 * MELY_ENGINE, MELY_KEEP_SIGPIPE, MELY_TRACE, MELY_TRACE_RECORDS, MELY_STALL_MS
 * and MELY_EVENT_BUDGET_MB: the tests choose their runtime shapes, and the caller's
 * overrides would silently change them (or make them invalid: MELY_ENGINE=legacy
 * refuses the time-left policies). */
void clear_mely_env(void);

/*
 * The runtime shapes every stress test runs in (check_invariants,
 * check_wakeup; in check_order parallelism and head posts under stealing; the
 * idle test in check_introspect): one worker per core of the
 * 2-core CI machine, pinned; and 4x oversubscribed, unpinned, where workers
 * are preempted in the middle of handlers and lock holds; each engine
 * without and with work stealing, and every steal policy word at least once
 * (testutil.c says which shape covers what). A stress test loops over them:
 * `tcase_add_loop_test(tc, test, 0, NSHAPES)`, then `&shapes[_i]`.
 */
struct shape {
    unsigned workers;
    int pin;            /* as mely_config_t.pin */
    const char *steal;  /* as mely_config_t.steal: NULL = no stealing */
    const char *engine; /* as mely_config_t.engine: NULL = mely */
};
enum { NSHAPES = 11 };
extern const struct shape shapes[NSHAPES];

/* init_runtime_engine() in shape sh. */
void init_runtime_shape(mely_t *m, const struct shape *sh, unsigned batch, unsigned spin_us);

/* Whether sh runs libasync-smp's engine (one FIFO per core: no priorities). */
bool shape_is_legacy(const struct shape *sh);

/* "8 unpinned, legacy, steal base+locality": for failure messages. Returns a
 * static buffer (the test thread's only). */
const char *shape_name(const struct shape *sh);

/* ---- a runtime and handlers for the small API tests ------------------------------------- */

/* Zeroed at start; a test initializes and shuts it down itself. */
extern mely_t rt;

/* count_and_stop() counts in `ran` and calls mely_stop(&rt) when `ran`
 * reaches `stop_at`. The test sets both before mely_run(). */
extern atomic_uint ran;
extern unsigned stop_at;
void count_and_stop(void *arg);

/* beacon() sets beacon_ran: a helper thread waits for it to know that a handler
 * has run (test_setup() clears it). */
extern atomic_bool beacon_ran;
void beacon(void *arg);

/* Does nothing. */
void nop(void *arg);

/* ---- suites ------------------------------------------------------------------------- */

/* The checked fixture new_tcase() installs: every test starts from a clean
 * environment (clear_mely_env()), no notes, and beacon_ran clear. */
void test_setup(void);

/* A test case `name` of suite s, with test_setup() as its checked fixture and a
 * timeout of `timeout` seconds (CK_TIMEOUT_MULTIPLIER still applies). */
TCase *new_tcase(Suite *s, const char *name, int timeout);

/* Runs every test of s (CK_NORMAL output), frees the runner, and returns the
 * program's exit status: EXIT_SUCCESS if every test passed, else EXIT_FAILURE.
 * A test program's main() builds its suite with new_tcase() and ends with
 * `return mely_test_main(s);`. */
int mely_test_main(Suite *s);

#endif /* MELY_TESTS_TESTUTIL_H */
