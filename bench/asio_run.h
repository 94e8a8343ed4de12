/* SPDX-License-Identifier: MIT */
/*
 * asio_run.h: running one Boost.Asio io_context on W pinned threads, for the
 * Asio peers (dispatch_asio.cpp, compat_post_asio.cpp). Thread i runs on the
 * i-th allowed CPU (modulo their number), the calling thread being thread 0;
 * a watchdog stops a run that takes far longer than it should.
 * Needs Boost.Asio's headers and common/measure.h (first_cpus, pin_self).
 */
#ifndef MELY_BENCH_ASIO_RUN_H
#define MELY_BENCH_ASIO_RUN_H

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>

#include "common/measure.h"

namespace mely_bench_asio {

/* The index of the calling thread in run_context() (0: the caller). */
inline thread_local unsigned tl_thread = 0;

/* The allowed CPUs (thread i runs on the i-th, modulo their number). */
inline std::vector<int> allowed_cpus()
{
    std::vector<int> cpus(CPU_SETSIZE);
    cpus.resize(std::max(1u, first_cpus(cpus.data(), CPU_SETSIZE)));
    cpus[0] = std::max(cpus[0], 0);
    return cpus;
}

/*
 * Runs ctx on `workers` threads until ctx.stop(): threads 1..W-1 are started
 * here, the caller is thread 0 (its affinity is restored afterwards). A
 * watchdog stops the context after `limit_ns`; returns false if it had to.
 */
inline bool run_context(boost::asio::io_context &ctx, unsigned workers, uint64_t limit_ns)
{
    static const std::vector<int> cpus = allowed_cpus();
    auto guard = boost::asio::make_work_guard(ctx); /* threads wait for work until stop() */
    std::mutex mu;
    std::condition_variable cv;
    bool finished = false;
    bool expired = false;

    std::thread watchdog([&] {
        std::unique_lock<std::mutex> lock(mu);
        if (!cv.wait_for(lock, std::chrono::nanoseconds(limit_ns), [&] { return finished; })) {
            expired = true;
            ctx.stop();
        }
    });

    std::vector<std::thread> threads;
    for (unsigned i = 1; i < workers; i++)
        threads.emplace_back([&ctx, i] {
            tl_thread = i;
            pin_self(cpus[i % cpus.size()]);
            ctx.run();
        });

    cpu_set_t saved;
    bool restore = pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) == 0;
    tl_thread = 0;
    pin_self(cpus[0]);
    ctx.run();
    for (auto &t : threads)
        t.join();
    if (restore)
        (void)pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);

    {
        std::lock_guard<std::mutex> lock(mu);
        finished = true;
    }
    cv.notify_one();
    watchdog.join();
    return !expired;
}

/* A run's time limit: generous, only there so that a stuck run cannot hang. */
inline uint64_t limit_for(uint64_t count, uint64_t ns_per_item)
{
    return 30000000000ull + count * ns_per_item;
}

} // namespace mely_bench_asio

#endif
