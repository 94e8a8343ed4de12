/*
 * timers.cpp: delaycb (both forms), timecb (wall clock), timecb_remove,
 * tsnow/timenow, timer colors, lazycb/lazycb_remove,
 * register_atempty_handler, register_atexit_handler (checked by the parent
 * process, which runs the test in a child).
 */
#include "async.h"

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
