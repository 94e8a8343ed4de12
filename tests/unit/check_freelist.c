/* SPDX-License-Identifier: MIT */
/* Unit tests of the event and color-queue allocators (mely/queue/freelist.h):
 * magazines, the depot, foreign allocation, allocation failure, the event
 * budget, and the trim that gives whole free slabs back. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mely/runtime.h"
#include "tests/testutil.h"

static mely_t m;

static void setup(void)
{
    init_runtime(&m, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
}

static void teardown(void)
{
    ck_assert_int_ge(mely_shutdown(&m), 0);
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

static void assert_distinct(struct mely__event **v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_ptr);
    for (size_t i = 1; i < n; i++)
        ck_assert_ptr_ne(v[i - 1], v[i]);
}

/* Worker 0 allocates, worker 1 frees (as a cross-core producer and consumer do):
 * events flow back through the depot, nothing is handed out twice, and the
 * number of slabs stays bounded by the peak in use. */
START_TEST(magazines_flow_between_workers)
{
    enum { N = 5000, ROUNDS = 20 };
    struct mely__rt *rt = m.rt;
    struct mely__evcache *a = &rt->workers[0].evcache, *b = &rt->workers[1].evcache;
    static struct mely__event *v[N];

    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < N; i++) {
            v[i] = mely__evcache_alloc(rt, a);
            ck_assert_ptr_nonnull(v[i]);
        }
        for (int i = 0; i < N; i++)
            mely__evcache_free(rt, b, v[i]);
        ck_assert_uint_le(b->nloaded, MELY__MAG);
    }
    for (int i = 0; i < N; i++)
        v[i] = mely__evcache_alloc(rt, a);
    assert_distinct(v, N);
    for (int i = 0; i < N; i++)
        mely__evcache_free(rt, a, v[i]);

    /* Peak in use was N (+ at most 3 magazines cached per worker), plus the
     * workers' reserves for moves (deliver.c: MELY__INBOX_CAP events each). */
    size_t peak = N + rt->nworkers * (3 * MELY__MAG + MELY__INBOX_CAP);
    ck_assert_uint_le(mely__slabs_hot(&rt->depot.ev_slabs), peak / MELY__SLAB_EVENTS + 2);
}
END_TEST

START_TEST(foreign_threads_use_the_depot)
{
    enum { N = 1000 };
    struct mely__rt *rt = m.rt;
    static struct mely__event *v[N];

    for (int i = 0; i < N; i++) {
        v[i] = mely__depot_alloc_one(rt, false);
        ck_assert_ptr_nonnull(v[i]);
    }
    assert_distinct(v, N);
    for (int i = 0; i < N; i++)
        mely__depot_free_one(rt, v[i]);
    /* Freed events are reused before any new slab. */
    size_t before = mely__slabs_hot(&rt->depot.ev_slabs);
    for (int i = 0; i < N; i++)
        v[i] = mely__depot_alloc_one(rt, false);
    ck_assert_uint_eq(mely__slabs_hot(&rt->depot.ev_slabs), before);
    for (int i = 0; i < N; i++)
        mely__depot_free_one(rt, v[i]);
}
END_TEST

/* Takes every free event the depot holds (through cache a, then single
 * events), so that the next allocation needs a new slab; returns them in
 * v (at most `max`). */
static size_t drain_depot(struct mely__rt *rt, struct mely__evcache *a, struct mely__event **v,
                          size_t max)
{
    size_t n = 0;
    size_t hot = mely__slabs_hot(&rt->depot.ev_slabs);
    while (n < max) {
        struct mely__event *ev = mely__evcache_alloc(rt, a);
        ck_assert_ptr_nonnull(ev);
        v[n++] = ev;
        if (mely__slabs_hot(&rt->depot.ev_slabs) != hot)
            break; /* that one came from a new slab: the depot is empty */
    }
    /* The rest of that new slab's magazines, and any loose events. */
    while (n < max && (atomic_load(&rt->depot.nfree) > 0 || a->nloaded > 0 || a->spare)) {
        struct mely__event *ev = a->nloaded || a->spare ? mely__evcache_alloc(rt, a)
                                                        : mely__depot_alloc_one(rt, false);
        ck_assert_ptr_nonnull(ev);
        v[n++] = ev;
    }
    ck_assert_uint_lt(n, max);
    return n;
}

START_TEST(allocation_failure_returns_null)
{
    static struct mely__event *v[4 * MELY__SLAB_EVENTS];
    struct mely__rt *rt = m.rt;
    struct mely__evcache *a = &rt->workers[0].evcache;
    struct mely__cqslab cs = {0};
    size_t n = drain_depot(rt, a, v, NELEM(v));

    atomic_store(&mely__test_fail_slabs, 3);
    errno = 0;
    ck_assert_ptr_null(mely__evcache_alloc(rt, a));
    ck_assert_int_eq(errno, ENOMEM);
    ck_assert_ptr_null(mely__depot_alloc_one(rt, false));
    ck_assert_ptr_null(mely__cq_alloc(rt, &cs));
    ck_assert_int_eq(atomic_load(&mely__test_fail_slabs), 0);
    struct mely__event *ev = mely__evcache_alloc(rt, a);
    ck_assert_ptr_nonnull(ev);
    mely__evcache_free(rt, a, ev);
    struct mely__colorq *cq = mely__cq_alloc(rt, &cs);
    ck_assert_ptr_nonnull(cq);
    ck_assert_ptr_ne(mely__cq_alloc(rt, &cs), cq);
    for (size_t i = 0; i < n; i++)
        mely__evcache_free(rt, a, v[i]);
}
END_TEST

static void noop(void *arg) { (void)arg; }

/* Through the API: a post that cannot get memory reports MELY_ENOMEM and
 * queues nothing; the next one works. */
START_TEST(post_reports_enomem)
{
    atomic_store(&mely__test_fail_slabs, 1);
    ck_assert_int_eq(mely_post(&m, 5, noop, NULL), MELY_ENOMEM);
    ck_assert_int_eq(mely_post(&m, 5, noop, NULL), 0);
    /* Event memory now exists; the color-queue of a new color needs a slab. */
    for (int c = 100; c < 164; c++) /* use up worker 0's first color-queue slab */
        ck_assert_int_eq(mely_post(&m, (mely_color_t)c * 2, noop, NULL), 0);
    atomic_store(&mely__test_fail_slabs, 1);
    int err = 0, ok = 0;
    for (int c = 200; c < 400 && !err; c++)
        if (!(err = mely_post(&m, (mely_color_t)c * 2, noop, NULL)))
            ok++;
    ck_assert_int_eq(err, MELY_ENOMEM);
    ck_assert_int_eq(atomic_load(&mely__test_fail_slabs), 0);
    ck_assert_int_eq(mely_shutdown(&m), 1 + 64 + ok);
    setup(); /* for teardown */
}
END_TEST

/* ---- the budget --------------------------------------------------------------------- */

static mely_t small;

/* A runtime of 2 workers with the least budget, 2 MiB (51,200 events). */
static void init_small(void)
{
    mely_config_t cfg;
    mely_config_init(&cfg);
    cfg.workers = 2;
    cfg.event_budget_mb = 2;
    ck_assert_int_eq(mely_init(&small, &cfg), 0);
}

/* Allocations beyond the budget fail with EAGAIN and raise the flag; owed
 * ones still succeed; giving events back lowers the flag at 7/8. */
START_TEST(budget_refuses_but_owed_pass)
{
    enum { MAX = 80000 };
    static struct mely__event *v[MAX];
    init_small();
    struct mely__rt *rt = small.rt;
    struct mely__evcache *a = &rt->workers[0].evcache, *b = &rt->workers[1].evcache;
    size_t limit = rt->depot.limit, n = 0;

    ck_assert_uint_eq(limit, 2 * 16 * MELY__SLAB_EVENTS);
    errno = 0;
    while (n < MAX && (v[n] = mely__evcache_alloc(rt, a)) != NULL)
        n++;
    ck_assert_int_eq(errno, EAGAIN);
    ck_assert(atomic_load(&rt->budget_hit));
    /* Everything handed out is counted: the reserves (2 x 512) are out
     * too, and the refused refill's magazine would have passed the limit. */
    ck_assert_uint_le(n + 2 * MELY__INBOX_CAP, limit);
    ck_assert_uint_gt(n + 2 * MELY__INBOX_CAP + MELY__MAG, limit);
    ck_assert_ptr_null(mely__depot_alloc_one(rt, false));
    /* Slabs follow: none was cut beyond the budget. */
    ck_assert_uint_le(mely__slabs_hot(&rt->depot.ev_slabs), 2 * 16);

    /* Owed allocations pass (a drain must never stop for the budget). */
    struct mely__event *owed[3 * MELY__MAG];
    for (unsigned i = 0; i < NELEM(owed); i++) {
        owed[i] = mely__evcache_alloc_owed(rt, b);
        ck_assert_ptr_nonnull(owed[i]);
    }
    struct mely__event *one = mely__depot_alloc_one(rt, true);
    ck_assert_ptr_nonnull(one);
    mely__depot_free_one(rt, one);
    for (unsigned i = 0; i < NELEM(owed); i++)
        mely__evcache_free(rt, b, owed[i]);

    /* Give back a little: the flag stays up until 7/8 of the budget. */
    size_t i = n;
    while (i > n - limit / 16)
        mely__evcache_free(rt, b, v[--i]);
    ck_assert(atomic_load(&rt->budget_hit));
    while (i > 0)
        mely__evcache_free(rt, b, v[--i]);
    ck_assert(!atomic_load(&rt->budget_hit));
    ck_assert_ptr_nonnull(v[0] = mely__evcache_alloc(rt, a));
    mely__evcache_free(rt, a, v[0]);
    ck_assert_int_ge(mely_shutdown(&small), 0);
}
END_TEST

/* The trim gives back every whole free slab beyond one per worker, and
 * none that still holds an event in use; what it keeps is handed out
 * again, and new slabs reuse the address ranges given back. */
START_TEST(trim_gives_whole_slabs_back)
{
    enum { N = 40 * MELY__SLAB_EVENTS };
    static struct mely__event *v[N];
    struct mely__rt *rt = m.rt;
    struct mely__evcache *a = &rt->workers[0].evcache, *b = &rt->workers[1].evcache;
    struct mely__slabs *sl = &rt->depot.ev_slabs;

    for (size_t i = 0; i < N; i++) {
        v[i] = mely__evcache_alloc(rt, a);
        ck_assert_ptr_nonnull(v[i]);
        v[i]->arg = v[i];
    }
    size_t peak = mely__slabs_hot(sl), mapped = sl->mapped;
    ck_assert_uint_ge(peak, 40);
    /* Hold one event in each of three slabs; free the rest (on worker b,
     * as a consumer would). */
    struct mely__event *held[3] = {v[N / 4], v[N / 2], v[N - 1]};
    for (size_t i = 0; i < N; i++)
        if (v[i] != held[0] && v[i] != held[1] && v[i] != held[2])
            mely__evcache_free(rt, b, v[i]);
    while (b->nloaded || b->spare) /* bounded: two magazines */
        mely__depot_free_one(rt, mely__evcache_alloc(rt, b));

    size_t released = mely__trim_all(&rt->depot);
    size_t hot = mely__slabs_hot(sl);
    ck_assert_uint_eq(hot, peak - released);
    /* Left: the slabs of the reserves and the held events, a's cache, and
     * one kept per worker. */
    ck_assert_uint_le(hot, 2 + 3 + 2 + rt->nworkers);
    ck_assert_uint_ge(hot, 3);
    for (unsigned k = 0; k < 3; k++)
        ck_assert_ptr_eq(held[k]->arg, held[k]); /* their slabs are intact */
    /* A second pass finds at most the cache the first left in the depot
     * (a slab per worker), and leaves a cache in turn. */
    ck_assert_uint_le(mely__trim_all(&rt->depot), rt->nworkers);
    ck_assert_uint_ge(atomic_load(&rt->depot.nfree), rt->nworkers * MELY__SLAB_EVENTS);

    /* Everything free is handed out again, each event once, and new slabs
     * come from the ranges given back: nothing more is mapped. */
    for (size_t i = 0; i < N - 3; i++) {
        v[i] = mely__evcache_alloc(rt, a);
        ck_assert_ptr_nonnull(v[i]);
    }
    v[N - 3] = held[0], v[N - 2] = held[1], v[N - 1] = held[2];
    ck_assert_uint_eq(sl->mapped, mapped);
    static struct mely__event *sorted[N];
    memcpy(sorted, v, sizeof(v));
    assert_distinct(sorted, N);
    for (size_t i = 0; i < N; i++)
        mely__evcache_free(rt, a, v[i]);
}
END_TEST

/* The window: memory used again within a window stays; memory unused for
 * a whole window goes, in steps; afterwards an idle runtime is not woken. */
START_TEST(trim_waits_for_unused_memory)
{
    enum { N = 20 * MELY__SLAB_EVENTS };
    static struct mely__event *v[N];
    struct mely__rt *rt = m.rt;
    struct mely__evcache *a = &rt->workers[0].evcache, *b = &rt->workers[1].evcache;
    struct mely__depot *d = &rt->depot;
    const uint64_t t0 = 1000000000ull, win = MELY__TRIM_WINDOW_NS;

    for (size_t i = 0; i < N; i++)
        ck_assert_ptr_nonnull(v[i] = mely__evcache_alloc(rt, a));
    for (size_t i = 0; i < N; i++)
        mely__evcache_free(rt, b, v[i]);
    size_t hot = mely__slabs_hot(&d->ev_slabs);

    /* Worker 1 begins a window and is to wake at its end; worker 0 is not. */
    ck_assert_uint_eq(mely__trim_idle(d, 1, t0), t0 + win);
    ck_assert_uint_eq(mely__trim_idle(d, 0, t0 + win / 2), UINT64_MAX);
    ck_assert_uint_eq(mely__trim_idle(d, 1, t0 + win / 2), t0 + win);
    /* The burst comes back within the window: all is used again. */
    for (size_t i = 0; i < N; i++)
        ck_assert_ptr_nonnull(v[i] = mely__evcache_alloc(rt, a));
    for (size_t i = 0; i < N; i++)
        mely__evcache_free(rt, b, v[i]);
    uint64_t t1 = t0 + win + 1;
    ck_assert_uint_eq(mely__trim_idle(d, 1, t1), t1 + win); /* a new window, no pass */
    ck_assert(!mely__trim_passing(&d->trim));
    ck_assert_uint_eq(mely__slabs_hot(&d->ev_slabs), hot);

    /* Unused for the next window: a pass begins, and runs in steps. */
    ck_assert_uint_eq(mely__trim_idle(d, 1, t1 + win), 0);
    unsigned steps = 1;
    while (mely__trim_passing(&d->trim) && steps < 1000) /* bounded: the pass's steps */
        steps += mely__trim_step(d);
    ck_assert(!mely__trim_passing(&d->trim));
    ck_assert_uint_ge(steps, 3); /* count, filter, release at least */
    ck_assert_uint_le(mely__slabs_hot(&d->ev_slabs), hot - 20 + rt->nworkers + 1);
    /* Nothing new is free: no window, the workers may sleep. */
    ck_assert_uint_eq(mely__trim_idle(d, 1, t1 + 3 * win), UINT64_MAX);
    ck_assert_uint_eq(mely__trim_idle(d, 0, t1 + 4 * win), UINT64_MAX);

    /* A window in which half the memory was used again gives back only
     * the other half; the rest is not forgotten: the next idle worker
     * begins a window at once, and its pass gives it back. */
    for (size_t i = 0; i < N; i++)
        ck_assert_ptr_nonnull(v[i] = mely__evcache_alloc(rt, a));
    for (size_t i = 0; i < N; i++)
        mely__evcache_free(rt, b, v[i]);
    size_t high = mely__slabs_hot(&d->ev_slabs);
    uint64_t t2 = t1 + 10 * win;
    ck_assert_uint_eq(mely__trim_idle(d, 1, t2), t2 + win);
    for (size_t i = 0; i < N / 2; i++)
        ck_assert_ptr_nonnull(v[i] = mely__evcache_alloc(rt, a));
    for (size_t i = 0; i < N / 2; i++)
        mely__evcache_free(rt, b, v[i]);
    ck_assert_uint_eq(mely__trim_idle(d, 1, t2 + win), 0);
    while (mely__trim_passing(&d->trim)) /* bounded: the pass's steps */
        mely__trim_step(d);
    size_t mid = mely__slabs_hot(&d->ev_slabs);
    ck_assert_uint_lt(mid, high - 5);
    ck_assert_uint_gt(mid, high - 15);
    uint64_t t3 = t2 + 2 * win;
    ck_assert_uint_eq(mely__trim_idle(d, 0, t3), t3 + win);
    ck_assert_uint_eq(mely__trim_idle(d, 0, t3 + win), 0);
    while (mely__trim_passing(&d->trim)) /* bounded: the pass's steps */
        mely__trim_step(d);
    ck_assert_uint_le(mely__slabs_hot(&d->ev_slabs), high - 20 + rt->nworkers + 2);

    /* Events freed while a pass runs are not forgotten either (a pass may
     * begin before a burst's last events have run). */
    for (size_t i = 0; i < N; i++)
        ck_assert_ptr_nonnull(v[i] = mely__evcache_alloc(rt, a));
    for (size_t i = 0; i < N / 2; i++)
        mely__evcache_free(rt, b, v[i]);
    uint64_t t4 = t3 + 10 * win;
    ck_assert_uint_eq(mely__trim_idle(d, 1, t4), t4 + win);
    ck_assert_uint_eq(mely__trim_idle(d, 1, t4 + win), 0);
    for (size_t i = N / 2; i < N; i++)
        mely__evcache_free(rt, b, v[i]);
    while (mely__trim_passing(&d->trim)) /* bounded: the pass's steps */
        mely__trim_step(d);
    uint64_t t5 = t4 + 3 * win;
    ck_assert_uint_eq(mely__trim_idle(d, 0, t5), t5 + win);
    ck_assert_uint_eq(mely__trim_idle(d, 0, t5 + win), 0);
    while (mely__trim_passing(&d->trim)) /* bounded: the pass's steps */
        mely__trim_step(d);
    ck_assert_uint_le(mely__slabs_hot(&d->ev_slabs), high - 20 + rt->nworkers + 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("freelist");
    TCase *tc = new_tcase(s, "freelist", 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, magazines_flow_between_workers);
    tcase_add_test(tc, foreign_threads_use_the_depot);
    tcase_add_test(tc, allocation_failure_returns_null);
    tcase_add_test(tc, post_reports_enomem);
    tcase_add_test(tc, budget_refuses_but_owed_pass);
    tcase_add_test(tc, trim_gives_whole_slabs_back);
    tcase_add_test(tc, trim_waits_for_unused_memory);
    return mely_test_main(s);
}
