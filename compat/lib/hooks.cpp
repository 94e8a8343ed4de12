/* SPDX-License-Identifier: MIT */
/*
 * hooks.cpp: register_atempty_handler, the original Mely's benchmark hooks,
 * and the null callbacks of async.h.
 */
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "internal.h"
#include "mely.h" /* the legacy header (compat/include), for its declarations */

using namespace mely_compat;

/* ---- register_atempty_handler ----------------------------------------------------
 * The runtime's idle hook (mely_on_idle), installed when the runtime is
 * created, runs the registered handlers on a worker each time it is about to
 * sleep. Handlers are appended to a fixed array and published by the count,
 * so the hook reads them without a lock. */

namespace {

const unsigned k_atempty_max = 64;
void (*g_atempty[k_atempty_max])(void);
std::atomic<unsigned> g_natempty{0};
std::mutex g_atempty_mu; /* serializes registrations */

} // namespace

namespace mely_compat {

void run_atempty(void *arg) noexcept
{
    (void)arg;
    unsigned n = g_natempty.load(std::memory_order_acquire);
    for (unsigned i = 0; i < n; i++) {
        try {
            g_atempty[i]();
        } catch (...) { /* never through the runtime's frames (guard() in internal.h) */
            callback_threw(nullptr, reinterpret_cast<const void *>(g_atempty[i]),
                           "register_atempty_handler", -1);
        }
    }
}

} // namespace mely_compat

void register_atempty_handler(void (*fn)(void))
{
    if (!fn)
        return;
    runtime(); /* creates the runtime, and with it the hook */
    std::lock_guard<std::mutex> g(g_atempty_mu);
    unsigned n = g_natempty.load(std::memory_order_relaxed);
    if (n == k_atempty_max) {
        fprintf(stderr, "mely-compat: register_atempty_handler: more than %u handlers\n",
                k_atempty_max);
        exit(EXIT_FAILURE);
    }
    g_atempty[n] = fn;
    g_natempty.store(n + 1, std::memory_order_release);
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
