/* SPDX-License-Identifier: MIT */
/*
 * posting.cpp: cpucb (head) and cpucb_tail (tail) before and after amain(),
 * colors and priorities of posted callbacks, pinned negative colors,
 * get_current_color/get_current_proc, task_get_nthreads/async_get_nthreads,
 * posts from a foreign thread, auto-free of Mely-style raw callbacks, the
 * errors for colors out of range, the original Mely's priorities outside
 * 0..7 (kept, clamped when posted), a callback class of the program's own
 * posted, and a posted wrap() that a handle holds.
 */
#include "async.h"

#include <atomic>
#include <thread>
#include <vector>

#include "ctest.h"

static int g_workers;
static std::vector<int> *g_order = new std::vector<int>; /* touched by color 5 only */

static void record(int v)
{
    CHECK(get_current_color() == 5);
    g_order->push_back(v);
}

static void check_order()
{
    /* posted before amain: tail 1, tail 2, head 0, tail 3 -> 0 1 2 3 */
    CHECK(g_order->size() == 4);
    for (int i = 0; i < 4; i++)
        CHECK((*g_order)[i] == i);
    /* from a handler: tail 10, head 11 -> 11 runs before 10, then this
     * color's next check */
    g_order->clear();
    cpucb_tail(cwrap(record, 10, 5));
    cpucb(cwrap(record, 11, 5));
    cpucb_tail(cwrap(+[] {
        CHECK(g_order->size() == 2 && (*g_order)[0] == 11 && (*g_order)[1] == 10);
        ct_done();
    }, 5));
    ct_done();
}

static void pinned(int i)
{
    CHECK(get_current_proc() == (unsigned)i);
    CHECK(get_current_color() == -(i + 1));
    ct_done();
}

static void colored(int c, int prio)
{
    CHECK(get_current_color() == c);
    CHECK(get_current_proc() < (unsigned)g_workers);
    (void)prio;
    ct_done();
}

/* One worker: the order in which colors of different priorities run. */
static std::vector<int> *g_prio_order = new std::vector<int>;
static void prio_record(int v)
{
    g_prio_order->push_back(v);
}
static void prio_check()
{
    /* 65535 (clamped to the highest) first, then 0 and -400 (clamped to 0)
     * in the order they were posted */
    bool ok = g_prio_order->size() == 3 && (*g_prio_order)[0] == 2 && (*g_prio_order)[1] == 1 &&
              (*g_prio_order)[2] == 3;
    _exit(ok ? 0 : 3);
}
static void prio_run()
{
    setenv("MELY_WORKERS", "1", 1);
    setenv("MELY_STEAL", "off", 1);
    callback<void> *hi = cpwrap(prio_record, 2, 21, 65535);
    callback<void> *neg = cpwrap(prio_record, 3, 22, -400);
    if (hi->getprio() != 65535 || neg->getprio() != -400)
        _exit(4);
    cpucb_tail(cwrap(prio_record, 1, 20));
    cpucb_tail(hi);
    cpucb_tail(neg);
    cpucb_tail(cwrap(prio_check, 23));
    amain();
}

static std::atomic<int> g_live; /* counted_arg objects alive */
struct counted_arg {
    counted_arg() { g_live++; }
    counted_arg(const counted_arg &) { g_live++; }
    ~counted_arg() { g_live--; }
};
static void takes(counted_arg) {}

static void autofree_check()
{
    /* a posted callback (auto-free on) is freed after its run, with its
     * bound argument: color 3 ran it just before this one */
    CHECK(g_live.load() == 0);
    ct_done();
}

static callback<void> *g_again; /* Mely style: a raw pointer posted several times */
static int g_again_runs;
static void again()
{
    if (++g_again_runs < 3) {
        cpucb_tail(g_again);
        return;
    }
    CHECK(!g_again->getFlagAutoFree());
    g_again->setFlagAutoFree(true); /* the running post still holds it */
    ct_done();
}

/* A callback class of the program's own, posted: run once, then freed (the
 * trampoline's default path; wrap()'s callbacks take their own). */
static std::atomic<int> g_own_runs, g_own_freed;
struct own_cb : public callback<void> {
    void operator()() override
    {
        CHECK(get_current_color() == 7);
        g_own_runs++;
    }
    ~own_cb() override { g_own_freed++; }
};
static void own_check()
{
    CHECK(g_own_runs.load() == 1 && g_own_freed.load() == 1);
    ct_done();
}

/* A wrap() that a handle holds while posted: the run drops the post's count
 * only, and the callback can be called again after it. */
static callback<void>::ptr *g_held = new callback<void>::ptr;
static int g_held_runs;
static void held() { g_held_runs++; }
static void held_check()
{
    CHECK(g_held_runs == 1 && (*g_held)->refcount_getcnt() == 1);
    (**g_held)();
    CHECK(g_held_runs == 2);
    *g_held = nullptr;
    ct_done();
}

int main()
{
    ct_watchdog(30);
    std::string err;
    /* The message names the pinned colors there are (none known before the
     * runtime exists: it said "-1..-0" then). */
    int st = ct_fork([] {
        setenv("MELY_WORKERS", "2", 1);
        cpucb(cwrap(+[] {}, -1000));
    }, &err);
    CHECK(ct_exited(st, EXIT_FAILURE) &&
          err == "mely-compat: incorrect color -1000 (colors are 0..65535, or -1..-2 for a "
                 "worker's pinned color)\n");
    st = ct_fork([] {
        setenv("MELY_WORKERS", "1", 1);
        cpucb(cwrap(+[] {}, -2));
    }, &err);
    CHECK(ct_exited(st, EXIT_FAILURE) &&
          err == "mely-compat: incorrect color -2 (colors are 0..65535, or -1 for the worker's "
                 "pinned color)\n");
    st = ct_fork([] { cpucb_tail(cwrap(+[] {}, MAX_COLORS + 3)); }, &err);
    CHECK(ct_exited(st, EXIT_FAILURE) &&
          err == "mely-compat: incorrect color 65539 (colors are 0..65535, or -(i+1) for worker "
                 "i's pinned color)\n");
    st = ct_fork(prio_run, &err);
    CHECK(ct_exited(st, 0));

    g_workers = task_get_nthreads();
    CHECK(g_workers >= 1 && g_workers <= MAX_THREADS && async_get_nthreads() == g_workers);
    CHECK(get_current_color() == 0 && get_current_proc() == 0); /* outside the loop */

    /* order on one color, posted before amain() */
    cpucb_tail(cwrap(record, 1, 5));
    cpucb_tail(cwrap(record, 2, 5));
    cpucb(cwrap(record, 0, 5));
    cpucb_tail(cwrap(record, 3, 5));
    ct_expect(2);
    cpucb_tail(cwrap(check_order, 5));

    /* pinned colors: -(i+1) runs on worker i */
    for (int i = 0; i < g_workers; i++) {
        ct_expect(2);
        cpucb_tail(cwrap(pinned, i, -(i + 1)));
        cpucb(cpwrap(pinned, i, -(i + 1), 7));
    }
    /* many colors, with priorities */
    for (int c = 0; c < 64; c++) {
        ct_expect(1);
        cpucb_tail(cpwrap(colored, c * 1000, c % 8, c * 1000, c % 8));
    }
    /* auto-free: the runtime drops a posted callback after its run */
    ct_expect(2);
    cpucb_tail(cwrap(takes, counted_arg(), 3));
    CHECK(g_live.load() == 1); /* the callback's copy */
    cpucb_tail(cwrap(autofree_check, 3));
    ct_expect(1);
    own_cb *own = new own_cb;
    own->setcolor(7);
    cpucb_tail(own);
    cpucb_tail(cwrap(own_check, 7));
    *g_held = cwrap(held, 8);
    ct_expect(1);
    cpucb_tail(*g_held);
    cpucb_tail(cwrap(held_check, 8));
    g_again = cwrap(again, 6);
    g_again->setFlagAutoFree(false);
    cpucb_tail(g_again);

    /* posts from a thread the runtime does not know, while it runs */
    ct_expect(100);
    std::thread([] {
        for (int i = 0; i < 100; i++)
            cpucb_tail(cwrap(colored, 100 + i % 10, 0, 100 + i % 10));
    }).detach();

    amain();
}
