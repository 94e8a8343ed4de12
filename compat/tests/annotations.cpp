/* SPDX-License-Identifier: MIT */
/*
 * annotations.cpp: time-left and penalty annotations reach the runtime's
 * stealing heuristics. Two workers, MELY_STEAL=timeleft: colors that all live
 * on worker 0 get heavy events annotated with their cost; the idle worker 1
 * steals some, and its statistics count the stolen work in cycles (only
 * annotated events count there). The same with penalty annotations under
 * MELY_STEAL=penalty: a stolen event counts its full time-left (the penalty
 * only orders worthy colors).
 * Each scene runs in a child process (the runtime reads the environment
 * once).
 */
#include "async.h"

#include <mely/mely.h>

#include "ctest.h"

static const int kEvents = 120;
static std::atomic<int> g_left;

static void spin_cycles(unsigned long long n)
{
    unsigned long long t0 = mely_now_ns(), ns = n / 3; /* ~3 cycles per ns */
    while (mely_now_ns() - t0 < ns)
        ;
}

static unsigned long long g_per_event; /* what one stolen event counts */

static void finish()
{
    mely_stats_t st;
    CHECK(mely_worker_stats(mely_compat_runtime(), 1, &st) == 0);
    printf("steals %llu, stolen events %llu, stolen cycles %llu\n",
           (unsigned long long)st.steals, (unsigned long long)st.stolen_events,
           (unsigned long long)st.stolen_cycles);
    CHECK(st.steals > 0 && st.stolen_events > 0);
    /* every stolen event counted its annotation (divided by its penalty) */
    CHECK(st.stolen_cycles == st.stolen_events * g_per_event);
    exit(0);
}

static void heavy(int i)
{
    if (i == 0) {
        /* hold worker 0 until worker 1 (idle) stole some of its colors, so
         * that a busy machine cannot let worker 0 finish everything first */
        double t0 = ct_now_ms();
        mely_stats_t st;
        do
            CHECK(mely_worker_stats(mely_compat_runtime(), 1, &st) == 0);
        while (st.steals == 0 && ct_now_ms() - t0 < 10000);
    }
    spin_cycles(600000);
    if (--g_left == 0)
        cpucb_tail(cwrap(finish, 1));
}

/* policy: MELY_STEAL; penalty: annotate penalty 2; per_event: what a stolen
 * event then counts. */
static void scene(const char *policy, bool penalty, unsigned long long per_event)
{
    setenv("MELY_WORKERS", "2", 1);
    setenv("MELY_STEAL", policy, 1);
    setenv("MELY_PIN", "0", 1);
    CHECK(task_get_nthreads() == 2);
    g_left = kEvents;
    g_per_event = per_event;
    /* even colors live on worker 0 (color % workers) */
    for (int i = 0; i < kEvents; i++) {
        int color = 2 * (1 + i % 8);
        if (penalty)
            cpucb_tail(cwrap_penalty(heavy, i, color, 600000, 2));
        else
            cpucb_tail(cwrap_timeleft(heavy, i, color, 600000));
    }
    amain();
}

int main()
{
    ct_watchdog(60);
    std::string err;
    static const struct {
        const char *policy;
        bool penalty;
        unsigned long long per_event;
    } scenes[] = {{"timeleft", false, 600000}, {"penalty", true, 600000}};
    for (const auto &sc : scenes) {
        int st = ct_fork([&sc] { scene(sc.policy, sc.penalty, sc.per_event); }, &err);
        if (!ct_exited(st, 0))
            fprintf(stderr, "%s: %s", sc.policy, err.c_str());
        CHECK(ct_exited(st, 0));
    }
    printf("compat annotations: ok\n");
    return 0;
}
