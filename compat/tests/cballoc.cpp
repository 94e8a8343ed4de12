/* SPDX-License-Identifier: MIT */
/*
 * cballoc.cpp: callback memory (compat/lib/alloc.cpp). A callback binding a
 * function and two words is one 64-byte line of its own; freed callbacks are
 * reused, on one thread and when another thread frees them, so that the
 * memory stops growing once a workload's peak was reached; an exiting
 * thread's free blocks go to other threads; callbacks too large for a class
 * use malloc. AddressSanitizer builds use malloc for every callback: there,
 * the per-thread stacks must stay absent (ThreadSanitizer builds check the
 * stacks and the depot). No event loop: callbacks are made and
 * released directly, as the runtime does.
 */
#include "async.h"

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "ctest.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif

static long g_sink;
static void two(int a, long b) { g_sink += a + b; }

/* A callback as a post makes it: fresh, counted once, released after use. */
static callback<void> *make(int i) { return cwrap(two, i, (long)i, 1); }
static void drop(callback<void> *cb)
{
    cb->refcount_inc_maybe_fresh();
    (*cb)();
    cb->release();
}

static void layout()
{
    static_assert(sizeof(callback_base) == 32, "color, priority, flag, descriptor, count, vptr");
    callback<void> *cb = make(1);
#ifndef SANITIZED
    /* One line of its own: 64-byte aligned, from the 64-byte class. */
    CHECK(mely_compat_cb_stacks != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(cb) % 64 == 0);
    void **top = mely_compat_cb_stacks[0].top;
    drop(cb);
    CHECK(mely_compat_cb_stacks[0].top == top + 1 && top[0] == cb);
    CHECK(make(2) == cb); /* the last freed comes back first */
    drop(cb);
#else
    CHECK(mely_compat_cb_stacks == nullptr);
    drop(cb);
#endif
}

/* Rounds of `batch` callbacks made, then all freed: from the first round on,
 * the same blocks serve (a refill cuts 64 blocks from a chunk at a time, so
 * up to 63 more than a round's may take turns). Without reuse, every round
 * would add `batch` blocks. */
static void one_thread()
{
    const int batch = 5000;
    std::set<void *> seen;
    std::vector<callback<void> *> v(batch);
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < batch; i++)
            v[i] = make(i);
        seen.insert(v.begin(), v.end());
        for (callback<void> *cb : v)
            drop(cb);
    }
#ifndef SANITIZED
    CHECK(seen.size() >= (size_t)batch && seen.size() < (size_t)batch + 64);
#else
    CHECK(seen.size() >= (size_t)batch);
#endif
    CHECK(g_sink != 0);
}

/* A producer thread makes callbacks that a consumer thread frees (the
 * cross-core case: the consumer gives the blocks back through the depot),
 * in rounds: the distinct blocks ever used stay within a round's, plus what
 * the consumer's stack keeps (2048) and a few magazines by which that moves
 * (without the depot, they grew by a batch every round). */
static void two_threads()
{
    const int batch = 5000, rounds = 60;
    std::mutex mu;
    std::condition_variable cv;
    std::vector<callback<void> *> handoff;
    bool full = false, quit = false;
    std::set<void *> seen;

    std::thread consumer([&] {
        for (;;) {
            std::vector<callback<void> *> mine;
            {
                std::unique_lock<std::mutex> l(mu);
                cv.wait(l, [&] { return full || quit; });
                if (!full)
                    return;
                mine.swap(handoff);
            }
            for (callback<void> *cb : mine)
                drop(cb);
            std::lock_guard<std::mutex> l(mu);
            full = false;
            cv.notify_all();
        }
    });
    for (int round = 0; round < rounds; round++) {
        std::vector<callback<void> *> v(batch);
        for (int i = 0; i < batch; i++)
            v[i] = make(i);
        seen.insert(v.begin(), v.end());
        std::unique_lock<std::mutex> l(mu);
        handoff.swap(v);
        full = true;
        cv.notify_all();
        cv.wait(l, [&] { return !full; });
    }
    {
        std::lock_guard<std::mutex> l(mu);
        quit = true;
        cv.notify_all();
    }
    consumer.join();
#ifndef SANITIZED
    CHECK(seen.size() >= (size_t)batch && seen.size() <= (size_t)batch + 2048 + 4 * 64);
#else
    CHECK(seen.size() >= (size_t)batch);
#endif
}

/* A thread's free blocks outlive it: a thread that starts afterwards gets
 * them (the depot hands out the last magazines it got first). Up to two
 * magazines' worth may be blocks the first thread cut but never used; without
 * the hand-over, only the ~960 it spilled while running would come back. */
static void thread_exit()
{
    const int n = 3000;
    std::set<void *> gone;
    std::thread([&] {
        std::vector<callback<void> *> v(n);
        for (int i = 0; i < n; i++)
            v[i] = make(i);
        gone.insert(v.begin(), v.end());
        for (callback<void> *cb : v)
            drop(cb);
    }).join();
    int reused = 0;
    std::thread([&] {
        std::vector<callback<void> *> v(n);
        for (int i = 0; i < n; i++)
            v[i] = make(i);
        for (callback<void> *cb : v) {
            reused += (int)gone.count(cb);
            drop(cb);
        }
    }).join();
#ifndef SANITIZED
    CHECK(reused >= n - 128);
#else
    CHECK(reused >= 0);
#endif
}

/* A callback too large for the classes (over 256 bytes) comes from malloc,
 * and its bound arguments are destroyed when it is freed. */
static int g_big_alive;
struct big {
    char bytes[400];
    big() { g_big_alive++; }
    big(const big &) { g_big_alive++; }
    ~big() { g_big_alive--; }
};
static void take_big(big b, int x) { g_sink += b.bytes[0] + x; }

static void large()
{
    {
        big b;
        b.bytes[0] = 1;
        callback<void> *cb = wrap(take_big, b, 2);
        CHECK(g_big_alive >= 2);
        drop(cb);
    }
    CHECK(g_big_alive == 0);
}

int main()
{
    ct_watchdog(60);
    layout();
    one_thread();
    two_threads();
    thread_exit();
    large();
    printf("cballoc: ok\n");
    return 0;
}
