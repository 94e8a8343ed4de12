/* SPDX-License-Identifier: MIT */
/*
 * stale.cpp: stale handles do nothing (doc/porting.md). timecb_remove,
 * lazycb_remove and tcpconnect_cancel twice, after the callback started or
 * ran, and after the handle's slot went to a new timer (lazycb, connection):
 * the new one still runs. Then a stress: a foreign thread sets thousands of
 * timers and removes them while they fire, and again long after they ran,
 * while workers remove some of them too: every timer that was not removed
 * runs exactly once, a removed one never, and every callback is freed once.
 *
 * same_slot() checks that a scenario "after reuse" really reuses: a handle is
 * (generation << 32) | (slot + 1), and the free slots are a stack.
 */
#include "async.h"

#include <thread>
#include <vector>

#include "ctest.h"

static bool same_slot(const void *a, const void *b)
{
    return a != b && ((uintptr_t)a & 0xffffffffu) == ((uintptr_t)b & 0xffffffffu);
}

static void never() { CHECK(!"a removed timer, lazycb or connection called back"); }
static void never_int(int) { never(); }

/* ---- timecb_remove ---- */

static timecb_t *g_t, *g_t3;
static void start_lazy();

static void t4_fired()
{
    CHECK(get_current_color() == 1);
    start_lazy();
}

/* t3's callback: its handle is dead from the start, its slot free again. */
static void t3_fired()
{
    timecb_remove(g_t3);
    timecb_t *t4 = delaycb(0, 20000000, cwrap(t4_fired, 1));
    CHECK(same_slot(t4, g_t3));
    timecb_remove(g_t3);
    timecb_remove(g_t);
    cpucb(cwrap(+[] { timecb_remove(g_t3); }, 2)); /* from another color, t4 pending */
}

static void t2_fired()
{
    g_t3 = delaycb(0, 1000000, cwrap(t3_fired, 1)); /* runs after this (same color) */
}

static void start_timers()
{
    g_t = delaycb(1, wrap(never));
    timecb_remove(g_t);
    timecb_remove(g_t); /* twice */
    timecb_t *t2 = delaycb(0, 20000000, cwrap(t2_fired, 1));
    CHECK(same_slot(t2, g_t));
    timecb_remove(g_t); /* after its slot went to t2 */
}

/* ---- lazycb_remove ---- */

static lazycb_t *g_l, *g_l2;
static int g_l_runs, g_l2_runs, g_l2_seen;
static void start_connects();

static void lazy_count() { g_l2_runs++; }

static void lazy_stopped()
{
    CHECK(g_l2_runs == g_l2_seen); /* removed from its color: no run after */
    lazycb_remove(g_l2);
    start_connects();
}

static void lazy_check()
{
    CHECK(g_l_runs == 1);
    CHECK(g_l2_runs > 0); /* the stale remove left it alone */
    lazycb_remove(g_l2);
    g_l2_seen = g_l2_runs;
    delaycb(0, 20000000, cwrap(lazy_stopped, 1));
}

/* After the removed lazycb's run ended: its slot is free. */
static void lazy_reuse()
{
    g_l2 = lazycb(0, cwrap(lazy_count, 1));
    CHECK(same_slot(g_l2, g_l));
    lazycb_remove(g_l);
    delaycb(0, 30000000, cwrap(lazy_check, 1));
}

static void lazy_first()
{
    g_l_runs++;
    lazycb_remove(g_l);
    lazycb_remove(g_l); /* twice, while it runs */
    cpucb_tail(cwrap(lazy_reuse, 1));
}

static void start_lazy()
{
    g_l = lazycb(0, cwrap(lazy_first, 1));
}

/* ---- tcpconnect_cancel ---- */

static int g_listener = -1;
static tcpconnect_t *g_tc;
static void start_stress();

static tcpconnect_t *connect_to_listener(callback<void, int> *cb)
{
    in_addr lo;
    lo.s_addr = htonl(INADDR_LOOPBACK);
    return tcpconnect(lo, ct_port_of(g_listener), cb);
}

static void tc2_connected(int fd)
{
    CHECK(fd >= 0);
    close(fd);
    tcpconnect_t *tc3 = connect_to_listener(cwrap(never_int, 6));
    tcpconnect_cancel(tc3);
    tcpconnect_cancel(tc3); /* twice */
    delaycb(0, 50000000, wrap(start_stress));
}

static void tc_connected(int fd)
{
    CHECK(fd >= 0);
    tcpconnect_cancel(g_tc); /* its callback runs: nothing, the fd stays open */
    CHECK(fcntl(fd, F_GETFD) != -1);
    close(fd);
    tcpconnect_t *tc2 = connect_to_listener(cwrap(tc2_connected, 6));
    CHECK(same_slot(tc2, g_tc));
    tcpconnect_cancel(g_tc); /* after its slot went to tc2 */
}

static void start_connects()
{
    g_listener = inetsocket(SOCK_STREAM, 0, INADDR_LOOPBACK);
    CHECK(g_listener >= 0 && listen(g_listener, 8) == 0);
    cpucb(cwrap(+[] { g_tc = connect_to_listener(cwrap(tc_connected, 6)); }, 6));
}

/* ---- Stress: removes racing fires, from a foreign thread and workers ---- */

static const int k_timers = 6000; /* thirds: kept, removed before firing, racing */
static std::atomic<int> g_live;   /* tokens alive: bound in callbacks not yet freed */
static std::atomic<int> g_kept_runs, g_removed_runs;
static std::vector<std::atomic<bool>> *g_ran;

struct token {
    token() { g_live++; }
    token(const token &) { g_live++; }
    ~token() { g_live--; }
};

static void kept_run(int i, token)
{
    CHECK(!(*g_ran)[i].exchange(true));
    g_kept_runs++;
}
static void removed_run(token) { g_removed_runs++; }
static void racing_run(token) {}

static void final_check()
{
    CHECK(g_live.load() == 0);
    printf("compat stale handles: ok\n");
    exit(0);
}

static void stress()
{
    std::vector<timecb_t *> h(k_timers);
    for (int i = 0; i < k_timers; i++) {
        int color = i % 8;
        if (i % 3 == 0) {
            h[i] = delaycb(0, (i % 50) * 1000, cwrap(kept_run, i, token(), color));
        } else if (i % 3 == 1) { /* removed twice at once: here and on a worker */
            h[i] = delaycb(10, cwrap(removed_run, token(), color));
            timecb_t *t = h[i];
            cpucb(cwrap(+[](timecb_t *t) { timecb_remove(t); }, t, (color + 1) % 8));
            timecb_remove(t);
        } else {
            h[i] = delaycb(0, (i % 20) * 1000, cwrap(racing_run, token(), color));
        }
        if (i >= 30 && (i - 30) % 3 == 2)
            timecb_remove(h[i - 30]); /* may be firing right now */
        /* a kept timer that ran: its handle is stale, and its slot likely
         * another timer's now, which must not be cancelled */
        if (i >= 60 && (i - 60) % 3 == 0 && (*g_ran)[i - 60].load())
            timecb_remove(h[i - 60]);
    }
    double t0 = ct_now_ms();
    while (g_kept_runs.load() < (k_timers + 2) / 3 && ct_now_ms() - t0 < 20000)
        usleep(1000);
    CHECK(g_kept_runs.load() == (k_timers + 2) / 3);
    for (int i = 0; i < k_timers; i += 3)
        timecb_remove(h[i]); /* all stale */
    CHECK(g_removed_runs.load() == 0);
    delaycb(0, 100000000, wrap(final_check)); /* the racing ones are done by then */
}

static void start_stress()
{
    std::thread(stress).detach();
}

int main()
{
    ct_watchdog(60);
    g_ran = new std::vector<std::atomic<bool>>(k_timers);
    start_timers();
    amain();
}
