/*
 * hooks.cpp: register_atempty_handler, the original Mely's benchmark hooks,
 * and the null callbacks of async.h.
 */
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "internal.h"
#include "mely.h" /* the legacy header (compat/include), for its declarations */

using namespace mely_compat;

/* ---- register_atempty_handler ----------------------------------------------------
 * The runtime has no idle hook. Approximation: once a handler is registered,
 * every worker runs a 2 ms timer on its pinned color; a tick that finds its
 * worker ran nothing else since the previous tick, after a busy period, runs
 * the handlers on that worker (so within ~2 ms of it going idle). */

namespace {

struct atempty_state {
    std::mutex mu;
    std::vector<void (*)(void)> fns;
    bool started = false;
};

atempty_state &atempty()
{
    static atempty_state *s = new atempty_state;
    return *s;
}

struct idle_probe {
    unsigned worker;
    uint64_t last_events;
    bool busy;
};

const uint64_t k_probe_ns = 2000000;

void probe(void *arg)
{
    idle_probe *p = static_cast<idle_probe *>(arg);
    mely_t *rt = runtime();
    mely_stats_t st;
    if (mely_worker_stats(rt, p->worker, &st) == 0) {
        uint64_t ran = st.events_run - p->last_events;
        p->last_events = st.events_run;
        if (ran > 1) {
            p->busy = true;
        } else if (p->busy) {
            p->busy = false;
            std::vector<void (*)(void)> fns;
            {
                std::lock_guard<std::mutex> g(atempty().mu);
                fns = atempty().fns;
            }
            for (auto fn : fns)
                fn();
        }
    }
    int err = mely_timer_after(rt, k_probe_ns, MELY_TO(MELY_COLOR_PINNED(p->worker)), probe, p,
                               nullptr);
    if (err)
        die("register_atempty_handler", err);
}

} // namespace

void register_atempty_handler(void (*fn)(void))
{
    if (!fn)
        return;
    mely_t *rt = runtime();
    atempty_state &s = atempty();
    std::lock_guard<std::mutex> g(s.mu);
    s.fns.push_back(fn);
    if (s.started)
        return;
    s.started = true;
    for (unsigned w = 0; w < workers(); w++) {
        idle_probe *p = new idle_probe{w, 0, true}; /* lives as long as the process */
        int err = mely_timer_after(rt, k_probe_ns, MELY_TO(MELY_COLOR_PINNED(w)), probe, p,
                                   nullptr);
        if (err)
            die("register_atempty_handler", err);
    }
}

/* ---- The original Mely's hooks -------------------------------------------------------- */

unsigned long long mely_compat_cycles()
{
    return (unsigned long long)mely_now_ns();
}

void save_bench_time(unsigned long t)
{
    static const char *env = getenv("MELY_COMPAT_BENCH");
    if (env && env[0] == '1')
        fprintf(stderr, "bench time: %lu\n", t);
}

void stop_hw_counters() {}

void register_EH_name(void *, char *) {}

void register_task_avg_duration(int cycles)
{
    void mely_compat_set_default_handler(const void *h);
    mely_compat_set_default_handler(cycles > 0 ? mely_compat_handler((uint64_t)cycles, 0)
                                               : nullptr);
}

namespace {
std::mutex *g_stats_mu = new std::mutex;
std::vector<mely_stats_t> *g_stats_base = new std::vector<mely_stats_t>;
} // namespace

void reset_runtime_stats()
{
    mely_t *rt = runtime();
    std::lock_guard<std::mutex> g(*g_stats_mu);
    g_stats_base->assign(workers(), mely_stats_t());
    for (unsigned w = 0; w < workers(); w++)
        mely_worker_stats(rt, w, &(*g_stats_base)[w]);
}

void dump_current_state(bool all)
{
    mely_t *rt = runtime();
    std::lock_guard<std::mutex> g(*g_stats_mu);
    for (unsigned w = 0; w < workers(); w++) {
        mely_stats_t st, base = mely_stats_t();
        if (mely_worker_stats(rt, w, &st) != 0)
            continue;
        if (w < g_stats_base->size())
            base = (*g_stats_base)[w];
        fprintf(stderr, "worker %u: events %llu, steals %llu/%llu, stolen events %llu",
                w, (unsigned long long)(st.events_run - base.events_run),
                (unsigned long long)(st.steals - base.steals),
                (unsigned long long)(st.steal_attempts - base.steal_attempts),
                (unsigned long long)(st.stolen_events - base.stolen_events));
        if (all)
            fprintf(stderr, ", parks %llu, polls %llu, io %llu, timers %llu",
                    (unsigned long long)(st.parks - base.parks),
                    (unsigned long long)(st.polls - base.polls),
                    (unsigned long long)(st.io_ready - base.io_ready),
                    (unsigned long long)(st.timers_fired - base.timers_fired));
        fputc('\n', stderr);
    }
}
