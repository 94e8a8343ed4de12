/* SPDX-License-Identifier: MIT */
/*
 * check_placement.c: color pools and placement by load (mely.h, "Placement
 * by load"), through the public API:
 *  - the calls' errors: a handle never initialized or shut down, n 0, NULL
 *    arguments, a pool of another runtime, a color not of the pool, a
 *    second release; a full pool says -ENOSPC and takes nothing;
 *  - colors are reused: a released color is placed again, and a long run of
 *    place/release cycles (from a foreign thread and from handlers) never
 *    runs out of colors and leaves every count at zero;
 *  - placement spreads colors evenly over idle workers (exactly, with up to
 *    4 workers; within a few colors with 16, where two workers are drawn),
 *    and each placed color is owned by the worker it was counted on;
 *  - placement steers around a loaded worker: with 40 posts waiting in
 *    worker 0's inbox (the runtime stopped; or running, while a handler
 *    blocks worker 0), new colors go to worker 1 until the loads are
 *    equal; a worker that owns no free color gets one moved to it;
 *  - the stress test: every worker and two foreign threads place, use and
 *    release colors at once, in every runtime shape (both engines, every
 *    steal policy, 2 pinned and 8 unpinned workers): no color is handed out
 *    twice at a time, a placed color's events never overlap and run in post
 *    order, also right after a release from the color's own last handler,
 *    and every count is back to zero at the end.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mely/mely.h>
#include "tests/testutil.h"

static int placed_on(const mely_t *m, const mely_color_pool_t *p, unsigned w)
{
    int n = mely_color_pool_placed(m, p, w);
    ck_assert_msg(n >= 0, "mely_color_pool_placed(%u): %s", w, mely_strerror(n));
    return n;
}

static mely_color_t place(mely_t *m, mely_color_pool_t *p)
{
    mely_color_t c;
    int err = mely_color_place(m, p, &c);
    ck_assert_msg(err == 0, "mely_color_place: %s", mely_strerror(err));
    return c;
}

/* ---- errors, exhaustion, reuse ------------------------------------------------ */

START_TEST(pool_errors)
{
    mely_t none = {0}, other = {0};
    mely_color_pool_t *p, *q;
    mely_color_t c;
    ck_assert_int_eq(mely_color_pool(&none, 4, &p), MELY_ESHUTDOWN);
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    init_runtime(&other, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_color_pool(&rt, 0, &p), MELY_EINVAL);
    ck_assert_int_eq(mely_color_pool(&rt, 4, NULL), MELY_EINVAL);
    ck_assert_int_eq(mely_color_pool(&rt, MELY_COLORS, &p), -ENOSPC);
    ck_assert_int_eq(mely_color_pool(&rt, 4, &p), 0);
    ck_assert_int_eq(mely_color_pool(&other, 4, &q), 0);
    ck_assert_int_eq(mely_color_place(&rt, NULL, &c), MELY_EINVAL);
    ck_assert_int_eq(mely_color_place(&rt, p, NULL), MELY_EINVAL);
    ck_assert_int_eq(mely_color_place(&other, p, &c), MELY_EINVAL); /* p is rt's */
    ck_assert_int_eq(mely_color_place(&none, p, &c), MELY_ESHUTDOWN);
    c = place(&rt, p);
    ck_assert_int_eq(mely_color_release(&other, p, c), MELY_EINVAL);
    ck_assert_int_eq(mely_color_release(&rt, q, c), MELY_EINVAL); /* not q's color */
    ck_assert_int_eq(mely_color_release(&rt, p, 5), MELY_EINVAL);
    ck_assert_int_eq(mely_color_release(&rt, NULL, c), MELY_EINVAL);
    ck_assert_int_eq(mely_color_release(&rt, p, c), 0);
    ck_assert_int_eq(mely_color_release(&rt, p, c), MELY_EINVAL); /* twice */
    ck_assert_int_eq(mely_color_pool_placed(&rt, p, 2), MELY_EINVAL);
    ck_assert_int_eq(mely_color_pool_placed(&rt, NULL, 0), MELY_EINVAL);
    ck_assert_int_eq(mely_color_pool_placed(&other, p, 0), MELY_EINVAL);
    ck_assert_int_ge(mely_shutdown(&other), 0);
    ck_assert_int_ge(mely_shutdown(&rt), 0);
    ck_assert_int_eq(mely_color_place(&rt, p, &c), MELY_ESHUTDOWN);
    ck_assert_int_eq(mely_color_release(&rt, p, c), MELY_ESHUTDOWN);
    ck_assert_int_eq(mely_color_pool_placed(&rt, p, 0), MELY_ESHUTDOWN);
}
END_TEST

/* A pool of 6: six distinct colors of its range, then -ENOSPC; a release
 * makes that very color placeable again; the pool's range is shared with
 * no range reserved later. */
START_TEST(full_pool_and_reuse)
{
    enum { N = 6 };
    mely_color_pool_t *p;
    mely_color_t c[N], extra;
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_color_pool(&rt, N, &p), 0);
    for (int i = 0; i < N; i++) {
        c[i] = place(&rt, p);
        ck_assert_uint_ge(c[i], MELY_COLOR_RANGE_FLOOR);
        ck_assert_uint_lt(c[i], MELY_COLORS);
        for (int j = 0; j < i; j++)
            ck_assert_msg(c[i] != c[j], "color %u handed out twice", (unsigned)c[i]);
    }
    ck_assert_int_eq(mely_color_place(&rt, p, &extra), -ENOSPC);
    ck_assert_int_eq(placed_on(&rt, p, 0) + placed_on(&rt, p, 1), N);
    mely_color_range_t r;
    ck_assert_int_eq(mely_color_range(&rt, 16, &r), 0);
    for (int i = 0; i < N; i++)
        ck_assert_msg(c[i] < r.base || c[i] >= r.base + r.n, "color %u in a later range",
                      (unsigned)c[i]);
    ck_assert_int_eq(mely_color_release(&rt, p, c[3]), 0);
    ck_assert_uint_eq(place(&rt, p), c[3]);
    ck_assert_int_eq(mely_color_place(&rt, p, &extra), -ENOSPC);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(mely_color_release(&rt, p, c[i]), 0);
    ck_assert_int_eq(placed_on(&rt, p, 0) + placed_on(&rt, p, 1), 0);
    ck_assert_uint_eq(stats_of(&rt, 0).placed_now + stats_of(&rt, 1).placed_now, 0);
    ck_assert_uint_eq(stats_of(&rt, 0).places + stats_of(&rt, 1).places, N + 1);
    ck_assert_int_ge(mely_shutdown(&rt), 0);
}
END_TEST

/* Handlers that place a color, post to it, and release it from that color's
 * own handler, round after round, beside a foreign thread doing the same:
 * a pool of 8 never runs dry, and at the end nothing is counted placed. */
static struct {
    mely_color_pool_t *pool;
    unsigned rounds;
    atomic_uint done;    /* rounds finished, by every cycler */
    atomic_uint cyclers; /* still cycling */
} cyc;

static void cycle(void *arg);

static void release_then_cycle(void *arg)
{
    uintptr_t self = (uintptr_t)arg; /* the cycler's own color */
    int err = mely_color_release(&rt, cyc.pool, (mely_color_t)mely_current_color());
    if (err)
        note("release from the color's own handler: %s", mely_strerror(err));
    if (mely_post(&rt, (mely_color_t)self, cycle, arg) != 0)
        note("post back to the cycler failed");
}

static void cycle(void *arg)
{
    unsigned n = atomic_fetch_add(&cyc.done, 1) + 1;
    if (n >= cyc.rounds) {
        if (atomic_fetch_sub(&cyc.cyclers, 1) == 1)
            mely_stop(&rt);
        return;
    }
    mely_color_t c;
    int err = mely_color_place(&rt, cyc.pool, &c);
    if (err) {
        note("place in round %u: %s", n, mely_strerror(err));
        if (atomic_fetch_sub(&cyc.cyclers, 1) == 1)
            mely_stop(&rt);
        return;
    }
    if (mely_post(&rt, c, release_then_cycle, arg) != 0)
        note("post to a placed color failed");
}

static void *foreign_cycler(void *arg)
{
    (void)arg;
    mely_color_t held[4];
    for (unsigned i = 0; i < cyc.rounds / 4; i++) {
        for (int k = 0; k < 4; k++)
            if (mely_color_place(&rt, cyc.pool, &held[k]) != 0) {
                note("foreign place failed");
                return NULL;
            }
        for (int k = 0; k < 4; k++)
            if (mely_color_release(&rt, cyc.pool, held[k]) != 0)
                note("foreign release failed");
    }
    return NULL;
}

START_TEST(long_runs_reuse_colors)
{
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_color_pool(&rt, 8, &cyc.pool), 0);
    cyc.rounds = scaled(100000, 5000, SCALED_MAX);
    atomic_store(&cyc.done, 0);
    atomic_store(&cyc.cyclers, 2);
    ck_assert_int_eq(mely_post(&rt, 2, cycle, (void *)(uintptr_t)2), 0); /* worker 0 */
    ck_assert_int_eq(mely_post(&rt, 3, cycle, (void *)(uintptr_t)3), 0); /* worker 1 */
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, foreign_cycler, NULL), 0);
    run_bounded(&rt, 60, "place/release cycles");
    pthread_join(t, NULL);
    assert_no_notes();
    ck_assert_uint_ge(atomic_load(&cyc.done), cyc.rounds);
    for (unsigned w = 0; w < 2; w++) {
        ck_assert_int_eq(placed_on(&rt, cyc.pool, w), 0);
        ck_assert_uint_eq(stats_of(&rt, w).placed_now, 0);
    }
    /* All 8 are free again. */
    for (int i = 0; i < 8; i++)
        place(&rt, cyc.pool);
    mely_color_t c;
    ck_assert_int_eq(mely_color_place(&rt, cyc.pool, &c), -ENOSPC);
    ck_assert_int_ge(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- spreading ------------------------------------------------------------------ */

/* Idle workers: 2, 3 and 4 workers get exactly their share (every worker
 * is looked at), 16 within a few colors (two drawn at random). Each color
 * is owned by the worker it is counted on. */
START_TEST(spreads_over_idle_workers)
{
    static const unsigned sizes[] = {2, 3, 4, 16};
    for (int s = 0; s < NELEM(sizes); s++) {
        unsigned nw = sizes[s], per = 50;
        mely_color_pool_t *p;
        init_runtime(&rt, nw, 0, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
        ck_assert_int_eq(mely_color_pool(&rt, 4 * per * nw, &p), 0);
        unsigned count[16] = {0};
        for (unsigned i = 0; i < per * nw; i++) {
            mely_color_t c = place(&rt, p);
            int o = mely_color_owner(&rt, c);
            ck_assert_int_ge(o, 0);
            count[o]++;
        }
        unsigned lo = UINT32_MAX, hi = 0;
        for (unsigned w = 0; w < nw; w++) {
            ck_assert_int_eq(placed_on(&rt, p, w), (int)count[w]);
            ck_assert_uint_eq(stats_of(&rt, w).placed_now, count[w]);
            lo = count[w] < lo ? count[w] : lo;
            hi = count[w] > hi ? count[w] : hi;
        }
        /* Random placement leaves 16 workers 12 to 46 apart (2,000
         * simulated runs); two choices 2 to 9 (20,000 runs): the gap is
         * O(log log n). */
        unsigned allowed = nw <= 4 ? 0 : 11;
        ck_assert_msg(hi - lo <= allowed, "%u workers: %u to %u colors each (allowed gap %u)", nw,
                      lo, hi, allowed);
        ck_assert_int_ge(mely_shutdown(&rt), 0);
    }
}
END_TEST

/* Runs one event on each of colors 2, 4, .. 2n (worker 0's), so that they
 * have color-queues: posts to them from outside a worker then wait in
 * worker 0's inbox (a color's first event is queued directly). */
static void warm(unsigned n)
{
    atomic_store(&ran, 0);
    stop_at = n;
    for (unsigned i = 1; i <= n; i++)
        ck_assert_int_eq(mely_post(&rt, 2 * (mely_color_t)i, count_and_stop, NULL), 0);
    run_bounded(&rt, 30, "warming colors");
    ck_assert_uint_eq(atomic_load(&ran), n);
}

/* With the runtime stopped, 40 events wait in worker 0's inbox (posted to
 * its colors by this thread): the first 40 colors go to worker 1, then they
 * alternate (the pool has 50 colors per worker: no move). Each is owned by
 * the worker it is counted on. */
START_TEST(steers_around_queued_events)
{
    enum { QUEUED = 40, PLACE = 50 };
    mely_color_pool_t *p;
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_color_pool(&rt, 100, &p), 0);
    warm(QUEUED);
    for (int i = 0; i < QUEUED; i++)
        ck_assert_int_eq(mely_post(&rt, 2 * (mely_color_t)(i + 1), count_and_stop, NULL), 0);
    ck_assert_int_eq(mely_color_owner(&rt, 2), 0);
    mely_color_t c[PLACE];
    for (int i = 0; i < PLACE; i++) {
        c[i] = place(&rt, p);
        int o = mely_color_owner(&rt, c[i]);
        if (i < QUEUED)
            ck_assert_msg(o == 1, "color %d of %d placed on worker %d with %d events queued on 0",
                          i, PLACE, o, QUEUED);
    }
    int p0 = placed_on(&rt, p, 0), p1 = placed_on(&rt, p, 1);
    ck_assert_int_eq(p0 + p1, PLACE);
    ck_assert_msg(abs((p0 + QUEUED) - p1) <= 1, "loads %d+%d and %d are not equal", p0, QUEUED, p1);
    for (int w = 0; w < 2; w++) {
        int n = 0;
        for (int i = 0; i < PLACE; i++)
            n += mely_color_owner(&rt, c[i]) == w;
        ck_assert_int_eq(n, w ? p1 : p0);
    }
    /* The queued events still run, each once. */
    atomic_store(&ran, 0);
    stop_at = QUEUED;
    run_bounded(&rt, 30, "the queued events");
    ck_assert_uint_eq(atomic_load(&ran), QUEUED);
    ck_assert_int_ge(mely_shutdown(&rt), 0);
}
END_TEST

/* A worker that owns no free color gets one moved to it: a pool of 4 (2
 * per worker), worker 0 loaded by 40 posts in its inbox; the first three
 * colors are all owned by worker 1, one of them moved from worker 0 (the
 * move drains worker 0's inbox, and a queued event does not count until
 * worker 0's polls find it waiting: the fourth goes to worker 0). */
START_TEST(moves_a_free_color_to_the_less_loaded)
{
    mely_color_pool_t *p;
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_color_pool(&rt, 4, &p), 0);
    mely_color_t all[4];
    int first_owner[4];
    for (int i = 0; i < 4; i++) { /* the pool's colors, and where they start */
        all[i] = place(&rt, p);
        first_owner[i] = mely_color_owner(&rt, all[i]);
    }
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(mely_color_release(&rt, p, all[i]), 0);
    warm(40);
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(mely_post(&rt, 2 * (mely_color_t)(i + 1), count_and_stop, NULL), 0);
    int from0 = 0;
    for (int i = 0; i < 3; i++) {
        mely_color_t c = place(&rt, p);
        ck_assert_int_eq(mely_color_owner(&rt, c), 1);
        for (int k = 0; k < 4; k++)
            from0 += all[k] == c && first_owner[k] == 0;
    }
    ck_assert_int_eq(from0, 1);
    ck_assert_int_eq(placed_on(&rt, p, 1), 3);
    ck_assert_int_eq(stats_of(&rt, 1).placed_now, 3);
    mely_color_t last = place(&rt, p);
    ck_assert_int_eq(mely_color_owner(&rt, last), 0);
    atomic_store(&ran, 0);
    stop_at = 40;
    run_bounded(&rt, 30, "the queued events");
    ck_assert_uint_eq(atomic_load(&ran), 40);
    ck_assert_int_ge(mely_shutdown(&rt), 0);
}
END_TEST

/* While running: worker 0 is inside a handler that waits, and a handler of
 * worker 1 posts 40 events to worker 0's colors, which wait in its inbox;
 * a foreign thread then places 100 colors. Worker 1 gets 40 more than
 * worker 0 (within one), then worker 0 is let go and runs the 40. */
static struct {
    mely_color_pool_t *pool;
    atomic_bool blocked, posted, release;
    int p0, p1;
} busy;

static void blocker(void *arg)
{
    (void)arg;
    atomic_store(&busy.blocked, true);
    if (!wait_flag(&busy.release, 20000))
        note("the blocker was never released");
}

static void mark_posted(void *arg)
{
    (void)arg;
    atomic_store(&busy.posted, true); /* the posts before were flushed */
}

static void post_to_blocked(void *arg)
{
    (void)arg;
    if (!wait_flag(&busy.blocked, 20000))
        note("the blocker never ran");
    for (int i = 0; i < 40; i++)
        if (mely_post(&rt, 2 * (mely_color_t)(i + 2), count_and_stop, NULL) != 0)
            note("post to the blocked worker failed");
    if (mely_post(&rt, 3, mark_posted, NULL) != 0)
        note("post failed");
}

static void *place_while_blocked(void *arg)
{
    (void)arg;
    if (!wait_flag(&busy.posted, 20000)) {
        note("the posts to the blocked worker never left");
        atomic_store(&busy.release, true);
        mely_stop(&rt);
        return NULL;
    }
    for (int i = 0; i < 100; i++) {
        mely_color_t c;
        if (mely_color_place(&rt, busy.pool, &c) != 0)
            note("place failed");
    }
    busy.p0 = mely_color_pool_placed(&rt, busy.pool, 0);
    busy.p1 = mely_color_pool_placed(&rt, busy.pool, 1);
    atomic_store(&busy.release, true);
    return NULL;
}

START_TEST(steers_around_a_blocked_worker)
{
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_color_pool(&rt, 1000, &busy.pool), 0);
    atomic_store(&busy.blocked, false);
    atomic_store(&busy.posted, false);
    atomic_store(&busy.release, false);
    warm(41); /* colors 4 .. 82 below, and 2 */
    atomic_store(&ran, 0);
    stop_at = 40;
    ck_assert_int_eq(mely_color_owner(&rt, 2), 0);
    ck_assert_int_eq(mely_color_owner(&rt, 3), 1);
    ck_assert_int_eq(mely_post(&rt, 2, blocker, NULL), 0);
    ck_assert_int_eq(mely_post(&rt, 3, post_to_blocked, NULL), 0);
    run_with_helper(&rt, place_while_blocked, NULL, 60, "placing beside a blocked worker");
    ck_assert_int_eq(busy.p0 + busy.p1, 100);
    ck_assert_msg(busy.p1 - busy.p0 >= 39 && busy.p1 - busy.p0 <= 41,
                  "placed %d on the blocked worker (40 posts in its inbox) and %d on the idle one",
                  busy.p0, busy.p1);
    ck_assert_int_ge(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- stress: placing and releasing from everywhere at once --------------------------- */

enum { CHAIN = 4, DRIVERS_MAX = 16, POOL = 64 };

static struct {
    mely_t m;
    mely_color_pool_t *pool;
    unsigned per_driver;         /* connections each driver opens */
    unsigned ndrivers;
    atomic_uint token[MELY_COLORS]; /* nonzero while a color is handed out */
    atomic_uint running[MELY_COLORS];
    uint32_t next_seq[MELY_COLORS]; /* on the color only */
    atomic_uint opened, closed, full;
    atomic_uint drivers_left;
} st;

/* One connection: CHAIN events on its color, the last releases it. */
struct conn {
    mely_color_t color;
    unsigned token;
    uint32_t first_seq; /* next_seq of the color when placed (read on the color) */
    unsigned left;
};

static void conn_step(void *arg);
static void maybe_done(void);

/* Places a color and posts a connection's steps to it. false: the pool is
 * empty right now (every color out at once), try again later. */
static bool open_conn(unsigned token)
{
    mely_color_t c;
    int err = mely_color_place(&st.m, st.pool, &c);
    if (err == -ENOSPC) {
        atomic_fetch_add(&st.full, 1);
        return false;
    }
    if (err) {
        note("place: %s", mely_strerror(err));
        return true; /* counted as done: the note fails the test */
    }
    unsigned was = atomic_exchange(&st.token[c], token);
    if (was != 0)
        note("color %u handed out again while conn %u holds it", (unsigned)c, was);
    struct conn *k = malloc(sizeof(*k));
    if (!k) {
        note("out of memory");
        return true;
    }
    *k = (struct conn){ .color = c, .token = token, .left = CHAIN };
    atomic_fetch_add(&st.opened, 1);
    for (unsigned i = 0; i < CHAIN; i++)
        if (mely_post(&st.m, c, conn_step, k) != 0)
            note("post to a placed color failed");
    return true;
}

static void conn_step(void *arg)
{
    struct conn *k = arg;
    mely_color_t c = k->color;
    if ((int)c != mely_current_color())
        note("conn of color %u ran on color %d", (unsigned)c, mely_current_color());
    if (atomic_exchange(&st.running[c], 1) != 0)
        note("two events of color %u at once", (unsigned)c);
    if (atomic_load(&st.token[c]) != k->token)
        note("color %u: conn %u runs while the token says %u", (unsigned)c, k->token,
             atomic_load(&st.token[c]));
    /* Order: this connection's steps run one after the other, after every
     * step of the connections that held the color before. */
    if (k->left == CHAIN)
        k->first_seq = st.next_seq[c];
    else if (st.next_seq[c] != k->first_seq + (CHAIN - k->left))
        note("color %u: step out of order", (unsigned)c);
    st.next_seq[c]++;
    bool last = --k->left == 0;
    if (last)
        atomic_store(&st.token[c], 0);
    atomic_store(&st.running[c], 0);
    if (!last)
        return;
    free(k);
    int err = mely_color_release(&st.m, st.pool, c);
    if (err)
        note("release from the color's last handler: %s", mely_strerror(err));
    atomic_fetch_add(&st.closed, 1);
    maybe_done();
}

/* Stops the run once every driver is done and every connection closed. The
 * last driver and the last close both look (sequentially consistent: at
 * least one of them sees the other's count). */
static void maybe_done(void)
{
    if (atomic_load(&st.drivers_left) == 0 && atomic_load(&st.closed) == atomic_load(&st.opened))
        mely_stop(&st.m);
}

static void finish_driver(void)
{
    atomic_fetch_sub(&st.drivers_left, 1);
    maybe_done();
}

/* A driver handler: opens a few connections per run, then posts itself (at
 * once too when the pool is empty: the connections then close meanwhile). */
static void driver(void *arg)
{
    uintptr_t n = (uintptr_t)arg;
    mely_color_t self = (mely_color_t)mely_current_color();
    for (int i = 0; i < 4 && n < st.per_driver; i++) {
        if (!open_conn((unsigned)(self * 100000u + n + 1)))
            break;
        n++;
    }
    if (n >= st.per_driver) {
        finish_driver();
        return;
    }
    if (mely_post(&st.m, self, driver, (void *)n) != 0)
        note("driver repost failed");
}

static void *foreign_driver(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t give_up = now_ns() + 60000000000ull;
    for (unsigned n = 0; n < st.per_driver;) {
        if (open_conn(900000000u + id * 1000000u + n + 1)) {
            n++;
        } else if (now_ns() > give_up) {
            note("foreign driver %u: the pool stayed empty for a minute", id);
            break;
        } else {
            sleep_us(20);
        }
    }
    finish_driver();
    return NULL;
}

static void *foreign_drivers(void *arg)
{
    (void)arg;
    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, foreign_driver, (void *)i) != 0)
            note("pthread_create failed");
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    return NULL;
}

START_TEST(place_release_from_everywhere)
{
    const struct shape *sh = &shapes[_i];
    memset(&st, 0, sizeof(st));
    init_runtime_shape(&st.m, sh, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_color_pool(&st.m, POOL, &st.pool), 0);
    st.ndrivers = 2 * sh->workers;
    if (st.ndrivers > DRIVERS_MAX)
        st.ndrivers = DRIVERS_MAX;
    st.per_driver = scaled(4000, 400, SCALED_MAX) / st.ndrivers;
    atomic_store(&st.drivers_left, st.ndrivers + 2);
    for (unsigned d = 0; d < st.ndrivers; d++) /* colors 2.., spread by the hash */
        ck_assert_int_eq(mely_post(&st.m, 2 + d, driver, (void *)(uintptr_t)0), 0);
    run_with_helper(&st.m, foreign_drivers, NULL, 120, shape_name(sh));
    ck_assert_uint_eq(atomic_load(&st.closed), atomic_load(&st.opened));
    ck_assert_uint_eq(atomic_load(&st.opened), st.per_driver * (st.ndrivers + 2));
    uint64_t places = 0;
    for (unsigned w = 0; w < sh->workers; w++) {
        ck_assert_int_eq(placed_on(&st.m, st.pool, w), 0);
        mely_stats_t s = stats_of(&st.m, w);
        ck_assert_uint_eq(s.placed_now, 0);
        places += s.places;
    }
    ck_assert_uint_eq(places, atomic_load(&st.opened));
    for (unsigned c = 0; c < MELY_COLORS; c++)
        ck_assert_msg(atomic_load(&st.token[c]) == 0, "color %u still handed out", c);
    /* Every color is free again. */
    for (int i = 0; i < POOL; i++)
        place(&st.m, st.pool);
    mely_color_t c;
    ck_assert_int_eq(mely_color_place(&st.m, st.pool, &c), -ENOSPC);
    ck_assert_int_ge(mely_shutdown(&st.m), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("placement");
    TCase *tc = new_tcase(s, "pools", 60);
    tcase_add_test(tc, pool_errors);
    tcase_add_test(tc, full_pool_and_reuse);
    tcase_add_test(tc, long_runs_reuse_colors);
    tcase_add_test(tc, spreads_over_idle_workers);
    tcase_add_test(tc, steers_around_queued_events);
    tcase_add_test(tc, moves_a_free_color_to_the_less_loaded);
    tcase_add_test(tc, steers_around_a_blocked_worker);
    tc = new_tcase(s, "stress", 240);
    tcase_add_loop_test(tc, place_release_from_everywhere, 0, NSHAPES);
    return mely_test_main(s);
}
