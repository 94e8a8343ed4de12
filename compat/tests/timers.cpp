/* SPDX-License-Identifier: MIT */
/*
 * timers.cpp: delaycb (both forms), timecb (wall clock; a timespec or a
 * time_t), timecb_remove, times out of range (tv_nsec past a second or
 * negative, a time before the epoch: normalized, due now if past; delays
 * and times too far to count: never, not wrapped around), tsnow/timenow,
 * timer colors, lazycb/lazycb_remove,
 * register_atempty_handler, register_atexit_handler (checked by the parent
 * process, which runs the test in a child).
 */
#include "async.h"

#include <limits>

#include "ctest.h"

static double g_t0;
static std::atomic<int> g_bad;
static std::atomic<int> g_idle;

static void after_delay(double min_ms, int color)
{
    CHECK(ct_now_ms() - g_t0 >= min_ms);
    CHECK(get_current_color() == color);
    ct_done();
}

static void at_wall(timespec when)
{
    timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    CHECK(now.tv_sec > when.tv_sec || (now.tv_sec == when.tv_sec && now.tv_nsec >= when.tv_nsec));
    /* the loop's notion of now was refreshed for this callback */
    CHECK(tsnow.tv_sec > when.tv_sec ||
          (tsnow.tv_sec == when.tv_sec && tsnow.tv_nsec >= when.tv_nsec));
    CHECK(timenow == tsnow.tv_sec);
    double lag = (now.tv_sec - tsnow.tv_sec) * 1e3 + (now.tv_nsec - tsnow.tv_nsec) / 1e6;
    CHECK(lag >= 0 && lag < 1000);
    ct_done();
}

static void never() { g_bad++; }

static void removed_check()
{
    CHECK(g_bad.load() == 0);
    ct_done();
}

static lazycb_t *g_lazy;
static int g_lazy_runs;
static void lazy()
{
    CHECK(get_current_color() == 4);
    if (++g_lazy_runs == 3) {
        lazycb_remove(g_lazy);
        cpucb_tail(cwrap(+[] {
            /* runs after lazycb_remove, on the same color: no 4th run */
            delaycb(0, 50000000, cwrap(+[] {
                CHECK(g_lazy_runs == 3);
                ct_done();
            }, 4));
        }, 4));
    }
}

/* ---- timecb(time_t), normalization, saturation ---- */

/* Runs at or after `when` (wall clock), and never before. */
static void not_before(timespec when, int color)
{
    timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    CHECK(now.tv_sec > when.tv_sec || (now.tv_sec == when.tv_sec && now.tv_nsec >= when.tv_nsec));
    CHECK(get_current_color() == color);
    ct_done();
}

/* Runs at most `max_ms` after the test started (a past time is due now: it
 * fires within milliseconds; the bound leaves room for a loaded machine). */
static void soon(double max_ms)
{
    CHECK(ct_now_ms() - g_t0 < max_ms);
    ct_done();
}

static std::atomic<int> g_far_runs;
static void far_fired() { g_far_runs++; }

static timespec wall_in(long ms)
{
    timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += ms % 1000 * 1000000L;
    t.tv_sec += ms / 1000 + t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    return t;
}

static void odd_times()
{
    /* timecb(time_t): that second of the wall clock */
    ct_expect(1);
    time_t next = time(NULL) + 1;
    timespec at = {next, 0};
    timecb(next, cwrap(not_before, at, 5, 5));
    /* tv_nsec past a second carries into tv_sec: 1.06 s before + 1.1 s */
    ct_expect(1);
    timespec t = wall_in(40);
    timespec odd = {t.tv_sec - 1, t.tv_nsec + 1000000000L};
    timecb(odd, cwrap(not_before, t, 6, 6));
    ct_expect(1);
    t = wall_in(60);
    odd = {t.tv_sec - 3, t.tv_nsec + 3000000000L};
    timecb(odd, cwrap(not_before, t, 6, 6));
    /* a negative tv_nsec borrows from tv_sec */
    ct_expect(1);
    t = wall_in(50);
    odd = {t.tv_sec + 1, t.tv_nsec - 1000000000L};
    timecb(odd, cwrap(not_before, t, 6, 6));
    /* before the epoch, and long past: due now */
    ct_expect(3);
    timespec before_epoch = {-5, 0}, very_negative = {-1000000, -7};
    timecb(before_epoch, wrap(soon, 1000.0));
    timecb(very_negative, wrap(soon, 1000.0));
    timecb((time_t)0, wrap(soon, 1000.0));
    /* a negative delay is due now; one made of -1 s and 1.5e9 ns is 0.5 s */
    ct_expect(2);
    delaycb(-1, 0, wrap(soon, 1000.0));
    delaycb(-1, 1500000000u, cwrap(after_delay, 500.0, 8, 8));
    /* Too far to count: never, in practice. delaycb(18446744074) (2^64 ns
     * and a bit) used to wrap around to 0.29 s; the others at the limits. */
    delaycb(18446744074, wrap(far_fired));
    delaycb(std::numeric_limits<time_t>::max(), 999999999u, wrap(far_fired));
    timespec end_of_time = {std::numeric_limits<time_t>::max(), 1999999999L};
    timecb(end_of_time, wrap(far_fired));
    timecb(std::numeric_limits<time_t>::max(), wrap(far_fired));
    lazycb(18446744074, wrap(far_fired));
    /* and a far one is still removed */
    timecb_t *far = delaycb(18446744074, wrap(far_fired));
    timecb_remove(far);
    ct_expect(1);
    delaycb(0, 700000000, wrap(+[] {
        CHECK(g_far_runs.load() == 0);
        ct_done();
    }));
}

static void on_idle() { g_idle++; }

static void idle_check()
{
    CHECK(g_idle.load() > 0);
    ct_done();
}

static void at_exit_marker()
{
    static const char msg[] = "atexit-ok\n";
    if (write(1, msg, sizeof msg - 1) < 0)
        _exit(3);
}

static void child()
{
    register_atexit_handler(at_exit_marker);
    g_t0 = ct_now_ms();
    ct_expect(1);
    delaycb(0, 20000000, cwrap(after_delay, 20.0, 7, 7));
    ct_expect(1);
    delaycb(1, cpwrap(after_delay, 1000.0, 0, 0, 3)); /* the seconds form */
    ct_expect(1);
    timespec when = tsnow;
    when.tv_nsec += 30000000;
    if (when.tv_nsec >= 1000000000) {
        when.tv_sec++;
        when.tv_nsec -= 1000000000;
    }
    timecb(when, cwrap(at_wall, when, 2));
    /* removed before it fires, from main, and from a handler */
    timecb_t *t = delaycb(0, 10000000, wrap(never));
    timecb_remove(t);
    cpucb_tail(wrap(+[] {
        timecb_t *t2 = delaycb(0, 5000000, wrap(never));
        timecb_remove(t2);
    }));
    ct_expect(1);
    delaycb(0, 100000000, wrap(removed_check));
    /* lazycb every 0 s: runs 3 times, then removed */
    ct_expect(1);
    g_lazy = lazycb(0, cwrap(lazy, 4));
    /* an idle handler runs once the workers went idle */
    register_atempty_handler(on_idle);
    ct_expect(1);
    delaycb(0, 300000000, wrap(idle_check));
    odd_times();
    amain();
}

int main()
{
    ct_watchdog(30);
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 1);
        close(p[1]);
        child();
    }
    close(p[1]);
    std::string out;
    char buf[256];
    ssize_t n;
    while ((n = read(p[0], buf, sizeof buf)) > 0)
        out.append(buf, (size_t)n);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(ct_exited(st, 0));
    CHECK(out == "atexit-ok\n");
    printf("compat timers: ok\n");
    return 0;
}
