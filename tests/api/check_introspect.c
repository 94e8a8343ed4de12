/* SPDX-License-Identifier: MIT */
/*
 * check_introspect.c: what the public API (include/mely/mely.h) tells about a
 * runtime: the current color and worker, pinned colors, the color map's
 * initial placement (mely_color_owner()) and moves by hand (mely_color_move(),
 * on both engines), the statistics counters, and what an idle runtime costs.
 *
 * Handlers and helper threads never call ck_assert; every wait is bounded (see
 * tests/testutil.h). MELY_TEST_SCALE (default 1) multiplies the event counts.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <mely/mely.h>
#include "tests/testutil.h"

/* ---- introspection ---------------------------------------------------------------- */

static const mely_color_t intro_colors[] = {0, 1, 4095, MELY_COLORS - 1, MELY_COLOR_PINNED(0),
                                            MELY_COLOR_PINNED(1)};
enum { NINTRO = sizeof(intro_colors) / sizeof(intro_colors[0]) };

static struct {
    pthread_t main_thread;
    int color[NINTRO], worker[NINTRO];
    bool on_main[NINTRO];
    int foreign_color, foreign_worker;
} intro;

static void record_identity(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    intro.color[i] = mely_current_color();
    intro.worker[i] = mely_current_worker();
    intro.on_main[i] = pthread_equal(pthread_self(), intro.main_thread);
    atomic_fetch_add(&ran, 1);
}

static void *foreign_identity(void *arg)
{
    (void)arg;
    uint64_t deadline = now_ns() + 20000000000ull;
    while (atomic_load(&ran) < NINTRO && now_ns() < deadline)
        sleep_us(100);
    if (atomic_load(&ran) < NINTRO)
        note("only %u of %u handlers ran in 20 s", atomic_load(&ran), NINTRO);
    /* Asked while the runtime runs. */
    intro.foreign_color = mely_current_color();
    intro.foreign_worker = mely_current_worker();
    mely_stop(&rt);
    return NULL;
}

START_TEST(current_color_and_worker)
{
    ck_assert_int_eq(mely_current_color(), -1);
    ck_assert_int_eq(mely_current_worker(), -1);
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_current_color(), -1);
    ck_assert_int_eq(mely_current_worker(), -1);
    intro.main_thread = pthread_self();
    intro.foreign_color = intro.foreign_worker = 99;
    atomic_store(&ran, 0);
    for (unsigned i = 0; i < NINTRO; i++)
        ck_assert_int_eq(mely_post(&rt, intro_colors[i], record_identity, (void *)(uintptr_t)i), 0);
    run_with_helper(&rt, foreign_identity, NULL, 40, "identity handlers");

    for (unsigned i = 0; i < NINTRO; i++) {
        mely_color_t c = intro_colors[i];
        ck_assert_msg(intro.color[i] == (int)c, "color %u: mely_current_color() = %d", c,
                      intro.color[i]);
        ck_assert_msg(intro.worker[i] >= 0 && intro.worker[i] < 2,
                      "color %u: mely_current_worker() = %d", c, intro.worker[i]);
        ck_assert_msg(intro.on_main[i] == (intro.worker[i] == 0),
                      "color %u ran on worker %d, %s the thread that called mely_run", c,
                      intro.worker[i], intro.on_main[i] ? "which is" : "which is not");
        if (c >= MELY_COLORS)
            ck_assert_int_eq(intro.worker[i], (int)(c - MELY_COLORS));
    }
    ck_assert_int_eq(intro.foreign_color, -1);
    ck_assert_int_eq(intro.foreign_worker, -1);
    ck_assert_int_eq(mely_current_color(), -1);
    ck_assert_int_eq(mely_current_worker(), -1);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

enum { PIN_WORKERS = 3, PIN_THREADS = 3, PIN_CHILD_EVERY = 8 };

static unsigned pin_per_thread;

/* arg: the worker the event is pinned to, and whether it posts a child to the
 * next worker's pinned color. */
static void pinned_event(void *arg)
{
    uintptr_t a = (uintptr_t)arg;
    unsigned w = (unsigned)(a >> 1);

    if (mely_current_worker() != (int)w || mely_current_color() != (int)MELY_COLOR_PINNED(w))
        note("an event of MELY_COLOR_PINNED(%u) ran on worker %d with color %d", w,
             mely_current_worker(), mely_current_color());
    if (a & 1) {
        unsigned next = (w + 1) % PIN_WORKERS;
        int err = mely_post(&rt, MELY_COLOR_PINNED(next), pinned_event,
                            (void *)(uintptr_t)(next << 1));
        if (err)
            note("post from a handler: %s", mely_strerror(err));
    }
    count_and_stop(NULL);
}

static void *pin_poster(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < pin_per_thread; i++) {
        unsigned w = (t + i) % PIN_WORKERS;
        bool child = i % PIN_CHILD_EVERY == 0;
        int err = mely_post(&rt, MELY_COLOR_PINNED(w), pinned_event,
                            (void *)(uintptr_t)(w << 1 | child));
        if (err) {
            note("post from thread %u: %s", t, mely_strerror(err));
            mely_stop(&rt);
            break;
        }
    }
    return NULL;
}

/* Events of MELY_COLOR_PINNED(w), from foreign threads and from handlers on
 * other workers, all run on worker w (more workers than CPUs, unpinned). */
START_TEST(pinned_colors_run_on_their_worker)
{
    pthread_t t[PIN_THREADS];

    pin_per_thread = scaled(3000, 100, 1000000);
    init_runtime(&rt, PIN_WORKERS, 0, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    atomic_store(&ran, 0);
    stop_at = PIN_THREADS * (pin_per_thread + (pin_per_thread + PIN_CHILD_EVERY - 1) /
                                                  PIN_CHILD_EVERY);
    for (unsigned i = 0; i < PIN_THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, pin_poster, (void *)(uintptr_t)i), 0);
    run_bounded(&rt, 60, "pinned events");
    for (unsigned i = 0; i < PIN_THREADS; i++)
        pthread_join(t[i], NULL);
    assert_no_notes();
    ck_assert_uint_eq(atomic_load(&ran), stop_at);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

static const unsigned owner_workers[] = {1, 2, 3, 7};

/* Colors start on worker color % workers (libasync-smp's placement); pinned
 * color w belongs to worker w. */
START_TEST(color_owner_initial_placement)
{
    unsigned n = owner_workers[_i];
    mely_t m = {0};

    init_runtime(&m, n, 0, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    for (mely_color_t c = 0; c < MELY_COLORS; c++) {
        int o = mely_color_owner(&m, c);
        if (o != (int)(c % n))
            ck_abort_msg("%u workers: color %u owned by %d, expected %u", n, c, o, c % n);
    }
    for (unsigned w = 0; w < n; w++)
        ck_assert_int_eq(mely_color_owner(&m, MELY_COLOR_PINNED(w)), (int)w);
    ck_assert_int_eq(mely_color_owner(&m, MELY_COLOR_PINNED(n)), MELY_ECOLOR);
    ck_assert_int_eq(mely_color_owner(&m, MELY_COLORS + MELY_MAX_WORKERS), MELY_ECOLOR);
    ck_assert_int_eq(mely_color_owner(&m, UINT32_MAX), MELY_ECOLOR);
    ck_assert_int_eq(mely_shutdown(&m), 0);
    ck_assert_int_eq(mely_color_owner(&m, 0), MELY_ESHUTDOWN);
}
END_TEST

/* ---- mely_color_move() ---------------------------------------------------------------- */

static const char *const move_engines[] = {"mely", "legacy"};

static struct {
    int worker[8]; /* by tag */
    int move_self, move_pending, move_idle, owner_after;
} mvr;

enum { TAG_A, TAG_B, TAG_C, TAG_D, TAG_E };

static void record_worker(void *arg)
{
    unsigned tag = (unsigned)(uintptr_t)arg;
    mvr.worker[tag] = mely_current_worker();
    count_and_stop(NULL);
}

/* Color 0's handler (worker 0, color 2 pending behind it on worker 0, color 4
 * never posted): it may move the idle color only. */
static void mover_handler(void *arg)
{
    (void)arg;
    mvr.worker[TAG_A] = mely_current_worker();
    mvr.move_self = mely_color_move(&rt, 0, 1);
    mvr.move_pending = mely_color_move(&rt, 2, 1);
    mvr.move_idle = mely_color_move(&rt, 4, 1);
    mvr.owner_after = mely_color_owner(&rt, 4);
    int err = mely_post(&rt, 4, record_worker, (void *)(uintptr_t)TAG_B);
    if (err)
        note("post to the moved color: %s", mely_strerror(err));
    count_and_stop(NULL);
}

/*
 * mely_color_move() on each engine: an idle color moves (also one never
 * posted to, also to where it already is) and its next events run there; a
 * color with pending events, or running, does not (MELY_EBUSY), and neither
 * do pinned or out-of-range colors (MELY_ECOLOR) nor moves to a worker out of
 * range (MELY_EINVAL); a refused move leaves the map as it was.
 */
START_TEST(color_move_places_idle_colors)
{
    const char *engine = move_engines[_i];
    mely_t m = {0};

    memset(&mvr, 0, sizeof(mvr));
    init_runtime_engine(&rt, 3, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, NULL, engine);

    /* Idle colors, never posted to: color 10 starts on worker 1 (10 % 3). */
    ck_assert_int_eq(mely_color_owner(&rt, 10), 1);
    ck_assert_int_eq(mely_color_move(&rt, 10, 2), 0);
    ck_assert_int_eq(mely_color_owner(&rt, 10), 2);
    ck_assert_int_eq(mely_color_move(&rt, 10, 2), 0);
    ck_assert_int_eq(mely_color_owner(&rt, 10), 2);
    ck_assert_int_eq(mely_color_move(&rt, 10, 0), 0);
    ck_assert_int_eq(mely_color_owner(&rt, 10), 0);
    ck_assert_int_eq(mely_color_move(&rt, MELY_COLORS - 1, 1), 0);
    ck_assert_int_eq(mely_color_owner(&rt, MELY_COLORS - 1), 1);
    ck_assert_int_eq(mely_color_owner(&rt, 11), 2); /* its neighbours did not move */
    ck_assert_int_eq(mely_color_owner(&rt, 9), 0);

    /* Pinned and out-of-range colors; workers out of range. */
    const mely_color_t bad_colors[] = {MELY_COLOR_PINNED(0), MELY_COLOR_PINNED(2),
                                       MELY_COLOR_PINNED(3), MELY_COLORS + MELY_MAX_WORKERS,
                                       UINT32_MAX};
    for (unsigned i = 0; i < NELEM(bad_colors); i++) {
        ck_assert_int_eq(mely_color_move(&rt, bad_colors[i], 0), MELY_ECOLOR);
        ck_assert_int_eq(mely_color_move(&rt, bad_colors[i], 1), MELY_ECOLOR);
    }
    for (unsigned w = 0; w < 3; w++)
        ck_assert_int_eq(mely_color_owner(&rt, MELY_COLOR_PINNED(w)), (int)w);
    ck_assert_int_eq(mely_color_move(&rt, 10, 3), MELY_EINVAL);
    ck_assert_int_eq(mely_color_move(&rt, 10, MELY_MAX_WORKERS), MELY_EINVAL);
    ck_assert_int_eq(mely_color_move(&rt, 10, UINT_MAX), MELY_EINVAL);
    ck_assert_int_eq(mely_color_owner(&rt, 10), 0);

    /* A color with pending events stays where they are, and they run there. */
    ck_assert_int_eq(mely_post(&rt, 10, record_worker, (void *)(uintptr_t)TAG_C), 0);
    ck_assert_int_eq(mely_color_move(&rt, 10, 2), MELY_EBUSY);
    ck_assert_int_eq(mely_color_move(&rt, 10, 1), MELY_EBUSY);
    ck_assert_int_eq(mely_color_owner(&rt, 10), 0);
    atomic_store(&ran, 0);
    stop_at = 1;
    run_bounded(&rt, 20, "an event of a color that could not move");
    assert_no_notes();
    ck_assert_int_eq(mvr.worker[TAG_C], 0);

    /* Once they ran, it is idle again: it moves, and its next event follows. */
    ck_assert_int_eq(mely_color_move(&rt, 10, 2), 0);
    ck_assert_int_eq(mely_color_owner(&rt, 10), 2);
    ck_assert_int_eq(mely_post(&rt, 10, record_worker, (void *)(uintptr_t)TAG_D), 0);
    ck_assert_int_eq(mely_color_owner(&rt, 10), 2);
    atomic_store(&ran, 0);
    run_bounded(&rt, 20, "an event of a moved color");
    assert_no_notes();
    ck_assert_int_eq(mvr.worker[TAG_D], 2);

    ck_assert_int_eq(mely_shutdown(&rt), 0);
    ck_assert_int_eq(mely_color_move(&rt, 10, 1), MELY_ESHUTDOWN);
    ck_assert_int_eq(mely_color_move(&m, 10, 1), MELY_ESHUTDOWN);
}
END_TEST

/* From a handler: its own color is running (MELY_EBUSY), a color with an
 * event queued is busy too, an idle one moves and its event runs there. */
START_TEST(color_move_from_a_handler)
{
    const char *engine = move_engines[_i];

    memset(&mvr, 0, sizeof(mvr));
    init_runtime_engine(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, NULL, engine);
    ck_assert_int_eq(mely_color_owner(&rt, 0), 0);
    ck_assert_int_eq(mely_color_owner(&rt, 2), 0);
    ck_assert_int_eq(mely_color_owner(&rt, 4), 0);
    ck_assert_int_eq(mely_post(&rt, 0, mover_handler, NULL), 0);
    ck_assert_int_eq(mely_post(&rt, 2, record_worker, (void *)(uintptr_t)TAG_C), 0);
    atomic_store(&ran, 0);
    stop_at = 3;
    run_bounded(&rt, 20, "a handler moving colors");
    assert_no_notes();
    ck_assert_int_eq(mvr.worker[TAG_A], 0);
    ck_assert_int_eq(mvr.move_self, MELY_EBUSY);
    ck_assert_int_eq(mvr.move_pending, MELY_EBUSY);
    ck_assert_int_eq(mvr.move_idle, 0);
    ck_assert_int_eq(mvr.owner_after, 1);
    ck_assert_int_eq(mvr.worker[TAG_B], 1);
    ck_assert_int_eq(mvr.worker[TAG_C], 0);
    ck_assert_int_eq(mely_color_owner(&rt, 0), 0);
    ck_assert_int_eq(mely_color_owner(&rt, 2), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- statistics ---------------------------------------------------------------------- */

START_TEST(stats_start_at_zero_and_check_arguments)
{
    mely_t m = {0};
    mely_stats_t s, zero;

    memset(&zero, 0, sizeof(zero));
    init_runtime(&m, 3, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    for (unsigned w = 0; w < 3; w++) {
        memset(&s, 0xa5, sizeof(s));
        ck_assert_int_eq(mely_worker_stats(&m, w, &s), 0);
        ck_assert_msg(memcmp(&s, &zero, sizeof(s)) == 0, "worker %u: counters not zero after init",
                      w);
    }
    ck_assert_int_eq(mely_worker_stats(&m, 3, &s), MELY_EINVAL);
    ck_assert_int_eq(mely_worker_stats(&m, UINT_MAX, &s), MELY_EINVAL);
    ck_assert_int_eq(mely_worker_stats(&m, 0, NULL), MELY_EINVAL);
    ck_assert_int_eq(mely_shutdown(&m), 0);
}
END_TEST

enum { MAXW = 2 };

static struct {
    unsigned n_handler, n_foreign;
    mely_color_t seed_color;
    /* expected counts, tallied by the poster from mely_color_owner() just
     * before each post to a color that has never had an event (so no steal can
     * move it in between) */
    unsigned local[MAXW], remote[MAXW], foreign[MAXW];
    atomic_bool seeded;
} sc;

static void seeder(void *arg)
{
    (void)arg;
    int self = mely_current_worker();
    if (self < 0 || self >= MAXW) {
        note("seeder on worker %d", self);
        return;
    }
    for (unsigned i = 0; i < sc.n_handler; i++) {
        mely_color_t c = 1000 + i;
        int o = mely_color_owner(&rt, c);
        if (o == self)
            sc.local[self]++;
        else
            sc.remote[self]++;
        int err = mely_post(&rt, c, count_and_stop, NULL);
        if (err)
            note("post from seeder: %s", mely_strerror(err));
    }
    atomic_store(&sc.seeded, true);
    count_and_stop(NULL);
}

static void *foreign_poster(void *arg)
{
    (void)arg;
    if (!wait_flag(&sc.seeded, 20000)) {
        note("the seeder did not run within 20 s");
        mely_stop(&rt);
        return NULL;
    }
    for (unsigned i = 0; i < sc.n_foreign; i++) {
        mely_color_t c = 20000 + i;
        int o = mely_color_owner(&rt, c);
        if (o >= 0 && o < MAXW)
            sc.foreign[o]++;
        int err = mely_post(&rt, c, count_and_stop, NULL);
        if (err)
            note("post from a foreign thread: %s", mely_strerror(err));
    }
    return NULL;
}

/* Each post counts once, where the header says: local or remote for the
 * posting worker, foreign for the owner when the poster is no worker; every
 * handler that ran counts once in events_run. */
START_TEST(stats_count_posts_and_runs)
{
    unsigned workers = _i + 1;

    memset(&sc, 0, sizeof(sc));
    sc.n_handler = scaled(2000, 100, 15000);
    sc.n_foreign = scaled(2000, 100, 40000);
    sc.seed_color = 100;
    init_runtime(&rt, workers, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    atomic_store(&ran, 0);
    stop_at = 1 + sc.n_handler + sc.n_foreign;
    int seed_owner = mely_color_owner(&rt, sc.seed_color);
    ck_assert_int_ge(seed_owner, 0);
    sc.foreign[seed_owner]++;
    ck_assert_int_eq(mely_post(&rt, sc.seed_color, seeder, NULL), 0);
    run_with_helper(&rt, foreign_poster, NULL, 60, "counted events");
    ck_assert_uint_eq(atomic_load(&ran), stop_at);

    uint64_t events = 0, posts = 0;
    for (unsigned w = 0; w < workers; w++) {
        mely_stats_t s;
        ck_assert_int_eq(mely_worker_stats(&rt, w, &s), 0);
        ck_assert_msg(s.posts_local == sc.local[w] && s.posts_remote == sc.remote[w] &&
                          s.posts_foreign == sc.foreign[w],
                      "worker %u: posts local/remote/foreign %" PRIu64 "/%" PRIu64 "/%" PRIu64
                      ", expected %u/%u/%u",
                      w, s.posts_local, s.posts_remote, s.posts_foreign, sc.local[w], sc.remote[w],
                      sc.foreign[w]);
        events += s.events_run;
        posts += s.posts_local + s.posts_remote + s.posts_foreign;
    }
    ck_assert_uint_eq(events, stop_at);
    ck_assert_uint_eq(posts, stop_at);
    if (workers == 1)
        ck_assert_uint_eq(sc.local[0], sc.n_handler);
    else
        ck_assert_uint_gt(sc.remote[0] + sc.remote[1], 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

static struct {
    atomic_bool a, b;
} pk;

static void set_pk_a(void *arg)
{
    (void)arg;
    atomic_store(&pk.a, true);
}

static void set_pk_b(void *arg)
{
    (void)arg;
    atomic_store(&pk.b, true);
}

static void relay_to_worker1(void *arg)
{
    (void)arg;
    int err = mely_post(&rt, MELY_COLOR_PINNED(1), set_pk_b, NULL);
    if (err)
        note("relay: %s", mely_strerror(err));
}

static void *park_observer(void *arg)
{
    (void)arg;
    if (!wait_flag(&beacon_ran, 20000)) {
        note("no handler ran within 20 s");
        goto out;
    }
    sleep_us(100000); /* idle, with spin_us 0 */
    for (unsigned w = 0; w < 2; w++)
        if (!wait_stat(&rt, w, offsetof(mely_stats_t, parks), 0, 5000))
            note("worker %u did not park while idle", w);

    mely_stats_t before = stats_of(&rt, 1);
    if (mely_post(&rt, MELY_COLOR_PINNED(1), set_pk_a, NULL) != 0 || !wait_flag(&pk.a, 5000)) {
        note("a post to parked worker 1 did not run within 5 s");
        goto out;
    }
    if (!wait_stat(&rt, 1, offsetof(mely_stats_t, wakeups), before.wakeups, 5000))
        note("worker 1 was woken by a post but its wakeups stayed %" PRIu64, before.wakeups);
    /* Compared with the count from before the post: worker 1 may have parked
     * again already. */
    if (!wait_stat(&rt, 1, offsetof(mely_stats_t, parks), before.parks, 5000))
        note("worker 1 went idle again but its parks stayed %" PRIu64, before.parks);

    /* Worker 0, woken by us, wakes parked worker 1 with a post. */
    uint64_t sent = stats_of(&rt, 0).wakes_sent;
    if (mely_post(&rt, MELY_COLOR_PINNED(0), relay_to_worker1, NULL) != 0 ||
        !wait_flag(&pk.b, 5000)) {
        note("a relayed post to parked worker 1 did not run within 5 s");
        goto out;
    }
    if (!wait_stat(&rt, 0, offsetof(mely_stats_t, wakes_sent), sent, 5000))
        note("worker 0 woke worker 1 but its wakes_sent stayed %" PRIu64, sent);
out:
    mely_stop(&rt);
    return NULL;
}

START_TEST(stats_count_parks_and_wakeups)
{
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, 0);
    ck_assert_int_eq(mely_post(&rt, 3, beacon, NULL), 0);
    run_with_helper(&rt, park_observer, NULL, 60, "parks and wake-ups");
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- idle cost ------------------------------------------------------------------------ */

static struct idle_check idle_m;

/* The idle test runs in every shape (11): a short window keeps it quick, and
 * a worker that spins (say, in the steal driver) would use all of it. */
enum { IDLE_SETTLE_US = 50000, IDLE_WINDOW_US = 250000 };

static void *idle_meter(void *arg)
{
    (void)arg;
    if (!wait_flag(&beacon_ran, 20000)) {
        note("no handler ran within 20 s");
        mely_stop(&rt);
        return NULL;
    }
    idle_m = idle_against_spinner(IDLE_SETTLE_US, IDLE_WINDOW_US); /* after the workers settle */
    mely_stop(&rt);
    return NULL;
}

/* The column header names mely_stats_t's fields, every one of them, in order. */
static void check_stats_header(const char *line)
{
    static const char *const fields[] = {
        "worker",         "events_run",     "posts_local",         "posts_remote",
        "posts_foreign",  "parks",          "wakeups",             "wakes_sent",
        "lock_contended", "lock_cycles",    "steal_attempts",      "steals",
        "steal_cycles",   "steal_cycles_median", "stolen_events",  "stolen_cycles",
        "polls",          "io_ready",       "timers_fired",        "watch_moves",
        "stalls",         "stream_sends",   "stream_bytes",        "spins",
        "spins_found",    "spin_ns",        "park_ns",             "places",
        "placed_now",
        "steal_fail_cycles", "steal_hold_cycles", "idle_cycles",
    };
    _Static_assert(sizeof(fields) / sizeof(fields[0]) - 1 ==
                       sizeof(mely_stats_t) / sizeof(uint64_t),
                   "a name per field");
    char copy[1024], *save = NULL;
    snprintf(copy, sizeof(copy), "%s", line);
    unsigned n = 0;
    for (char *tok = strtok_r(copy, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save), n++)
        ck_assert_msg(n < sizeof(fields) / sizeof(fields[0]) && strcmp(tok, fields[n]) == 0,
                      "MELY_STATS column %u is \"%s\"", n, tok);
    ck_assert_uint_eq(n, sizeof(fields) / sizeof(fields[0]));
}

/* What a MELY_STATS table in f says: its lines, its worker rows (numbered
 * from 0, in order) and their events_run total, and whether the cache map
 * follows it (its lines are not counted). Checks the header line. Lines
 * before the table's title are passed over: on a loaded machine a worker
 * preempted in a handler for MELY_STALL_MS may have been warned about. */
struct stats_table {
    unsigned lines, workers;
    uint64_t events;
    bool map;
    char text[4096]; /* the lines read, for failure messages */
};

static const struct stats_table *read_stats_table(FILE *f)
{
    static struct stats_table t;

    memset(&t, 0, sizeof(t));
    char line[1024];

    rewind(f);
    while (fgets(line, sizeof(line), f)) {
        size_t used = strlen(t.text);
        snprintf(t.text + used, sizeof(t.text) - used, "%s", line);
        if (t.lines == 0 && strncmp(line, "mely statistics (", 17) != 0)
            continue;
        if (strncmp(line, "mely cache map (", 16) == 0) {
            t.map = true;
            break;
        }
        unsigned w;
        uint64_t events;
        if (++t.lines == 2)
            check_stats_header(line);
        if (sscanf(line, "%u %" SCNu64, &w, &events) == 2) {
            ck_assert_uint_eq(w, t.workers);
            t.workers++;
            t.events += events;
        }
    }
    return &t;
}

/* MELY_STATS=1: shutdown prints a header and one line per worker, whose
 * events_run column adds up to what ran. (Check runs each test in its own
 * process, so redirecting stderr here touches no other test.) */
START_TEST(stats_printed_at_shutdown)
{
    enum { N = 300 };
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    atomic_store(&ran, 0);
    stop_at = N;
    for (mely_color_t c = 0; c < N; c++)
        ck_assert_int_eq(mely_post(&rt, c, count_and_stop, NULL), 0);
    run_bounded(&rt, 30, "stats run");

    FILE *out = tmpfile();
    ck_assert_ptr_nonnull(out);
    int saved = dup(2);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_eq(dup2(fileno(out), 2), 2);
    setenv("MELY_STATS", "1", 1);
    int discarded = mely_shutdown(&rt);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    unsetenv("MELY_STATS");
    ck_assert_int_eq(discarded, 0);

    const struct stats_table *t = read_stats_table(out);
    fclose(out);
    ck_assert_msg(t->lines == 2 + 2, "%u lines:\n%s", t->lines, t->text);
    ck_assert_uint_eq(t->workers, 2);
    ck_assert_uint_eq(t->events, N);
    ck_assert_msg(t->map, "no cache map after the table");
}
END_TEST

/* ---- MELY_STATS=1 at exit() --------------------------------------------------------- */

enum { EXIT_EVENTS = 300, CHILD_FAILED = 99 };
static atomic_uint exit_ran;

/* Counts; the last one calls exit() from the handler, as legacy programs do. */
static void count_then_exit(void *arg)
{
    (void)arg;
    if (atomic_fetch_add(&exit_ran, 1) + 1 == EXIT_EVENTS)
        exit(0);
}

/* The child: EXIT_EVENTS events on 2 workers with MELY_STATS=1 and stderr in
 * `out`; then exit(0) without mely_shutdown(), from the last handler or after
 * mely_run() (which count_and_stop makes return). No ck_assert here: a
 * failure is the exit status CHILD_FAILED. */
static void exit_child(void *arg, bool from_handler)
{
    FILE *out = arg;
    mely_t m = {0};
    mely_config_t cfg;

    if (dup2(fileno(out), 2) != 2 || setenv("MELY_STATS", "1", 1) != 0)
        _exit(CHILD_FAILED);
    mely_config_init(&cfg);
    cfg.workers = 2;
    if (mely_init(&m, &cfg) != 0)
        _exit(CHILD_FAILED);
    rt = m;
    atomic_store(&ran, 0);
    stop_at = EXIT_EVENTS;
    for (mely_color_t c = 0; c < EXIT_EVENTS; c++)
        if (mely_post(&m, c, from_handler ? count_then_exit : count_and_stop, NULL) != 0)
            _exit(CHILD_FAILED);
    mely_run(&m);
    if (from_handler)
        _exit(CHILD_FAILED); /* the last handler should have exited */
    exit(0);
}

/* MELY_STATS=1 prints the tables of the runtimes still live at exit(): from
 * main() after mely_run() (every event counted), and from inside a handler
 * while the workers still run (the batches running then are not counted
 * yet: each worker's is at most the batch threshold). */
START_TEST(stats_printed_at_exit)
{
    bool from_handler = _i;
    FILE *out = tmpfile();
    ck_assert_ptr_nonnull(out);
    run_child(exit_child, out, from_handler);
    const struct stats_table *t = read_stats_table(out);
    fclose(out);
    ck_assert_msg(t->lines == 2 + 2, "%u lines:\n%s", t->lines, t->text);
    ck_assert_uint_eq(t->workers, 2);
    ck_assert_uint_le(t->events, EXIT_EVENTS);
    ck_assert_uint_ge(t->events, from_handler ? EXIT_EVENTS - 2 * MELY_BATCH_DEFAULT : EXIT_EVENTS);
    ck_assert_msg(t->map, "no cache map after the table");
}
END_TEST

/* A runtime with nothing to do must sleep. What the test means is "no
 * worker spins" (idle workers run the steal driver before they park,
 * whatever the engine and the steal policy): so it compares each thread of
 * the process (workers, the stall monitor's 40 wake-ups a second, a
 * sanitizer's threads) with a thread that spins beside them in the same
 * window, which gets what a spinning worker would get on this machine under
 * its present load. The busiest must use under a quarter of that (on a
 * quiet machine: a spinner gets the whole window, an idle worker well under
 * 1%). An absolute bound (10% of a core for the process) failed under the
 * load of CI running two test programs at a time; the process's total is
 * bench/dispatch's idle row. */
START_TEST(idle_runtime_uses_no_cpu)
{
    init_runtime_shape(&rt, &shapes[_i], MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_post(&rt, 1, beacon, NULL), 0);
    run_with_helper(&rt, idle_meter, NULL, 30, "idle runtime");
    ck_assert_msg(idle_m.wall_s >= IDLE_WINDOW_US / 1e6 - 0.01, "the idle period lasted %.3f s",
                  idle_m.wall_s);
    printf("idle (%s): the busiest thread %.2f ms, all %.2f ms of CPU in %.3f s; a spinning "
           "thread got %.1f ms\n",
           shape_name(&shapes[_i]), idle_m.busiest_s * 1e3, idle_m.others_s * 1e3,
           idle_m.wall_s, idle_m.spinner_s * 1e3);
    ck_assert_msg(idle_m.busiest_s < idle_m.spinner_s / 4,
                  "%s: an idle thread used %.1f ms of CPU in %.3f s, a spinning one %.1f ms "
                  "(bound: a quarter of it)",
                  shape_name(&shapes[_i]), idle_m.busiest_s * 1e3, idle_m.wall_s,
                  idle_m.spinner_s * 1e3);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- the suite ------------------------------------------------------------------------- */

int main(void)
{
    Suite *s = suite_create("introspect");

    TCase *tc = new_tcase(s, "introspection", 60);
    tcase_add_test(tc, current_color_and_worker);
    tcase_add_test(tc, pinned_colors_run_on_their_worker);
    tcase_add_loop_test(tc, color_owner_initial_placement, 0, NELEM(owner_workers));
    tcase_add_loop_test(tc, color_move_places_idle_colors, 0, NELEM(move_engines));
    tcase_add_loop_test(tc, color_move_from_a_handler, 0, NELEM(move_engines));

    tc = new_tcase(s, "stats", 60);
    tcase_add_test(tc, stats_start_at_zero_and_check_arguments);
    tcase_add_loop_test(tc, stats_count_posts_and_runs, 0, MAXW);
    tcase_add_test(tc, stats_count_parks_and_wakeups);
    tcase_add_test(tc, stats_printed_at_shutdown);
    tcase_add_loop_test(tc, stats_printed_at_exit, 0, 2);

    tc = new_tcase(s, "idle", 60);
    tcase_add_loop_test(tc, idle_runtime_uses_no_cpu, 0, NSHAPES);
    return mely_test_main(s);
}
