/* SPDX-License-Identifier: MIT */
/*
 * check_invariants.c: the runtime's delivery invariants (doc/runtime.md,
 * "Invariants and where they are tested") under load, checked through the
 * public API only (include/mely/mely.h):
 *  - every posted event runs exactly once, with many producers of every kind
 *    (the test thread before the run, foreign threads, handlers);
 *  - two events of one color never overlap;
 *  - one producer's events of one color run in its post order;
 *  - a running color is never stolen nor moved: every handler finds the color
 *    map naming its own worker, at its start and at its end;
 *  - colors moved by hand (mely_color_move()) while posts, runs and steals go
 *    on keep all of the above, and an idle color always moves;
 *  - across stop and shutdown, the events that ran plus those discarded are all
 *    of them, none twice; run, stop, run again loses and repeats nothing.
 * Each stress test runs in every runtime shape (tests/testutil.c: both
 * engines, every steal policy word, 2 pinned and 8 unpinned workers). Run
 * orders and parallelism are checked in check_order.c, wake-ups of parked
 * workers in check_wakeup.c, stealing decisions in check_steal.c.
 *
 * Handlers and helper threads never call ck_assert, every wait is bounded, and
 * MELY_TEST_SCALE multiplies the event counts (see tests/testutil.h). When a
 * watchdog has to stop a runtime, the test fails saying how far it got.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mely/mely.h>
#include "tests/testutil.h"

/* ---- producers and checked events --------------------------------------------- */

enum { NCOLORS = 4096, CHUNK = 64, MAX_PRODUCERS = 16, BEACON_COLOR = 4095 };

enum producer_kind {
    PRE_RUN,      /* the test thread, before mely_run() */
    EARLY_THREAD, /* a foreign thread that starts posting before the workers run */
    LIVE_THREAD,  /* a foreign thread that posts once handlers are running */
    GENERATOR,    /* a handler of its own color that posts CHUNK events, then
                     posts itself again until its quota is done */
};

static const char *const kind_name[] = {"pre-run", "early thread", "live thread", "generator"};

/* One posted event. A producer's events of one color get seq 1, 2, 3... in post
 * order, so each must run right after its predecessor. */
struct slot {
    uint32_t color;
    uint32_t seq;
    uint32_t producer;
    atomic_uint runs;
};

struct producer {
    enum producer_kind kind;
    unsigned id;
    unsigned n;         /* events to post */
    unsigned posted;    /* touched only by the producer */
    uint32_t rng;
    uint32_t *next_seq; /* [NCOLORS] */
    struct slot *slots; /* [n] */
    mely_color_t color; /* a generator's own color */
    pthread_t thread;
};

static struct {
    mely_t m;
    struct producer prod[MAX_PRODUCERS];
    unsigned nprod;
    atomic_int inflight[NCOLORS];
    /* The last seq run per (producer, color): touched only by handlers of that
     * color, so deliberately not atomic: the runtime must order same-color
     * handlers (happens-before), and ThreadSanitizer checks that it does. */
    uint32_t *last_seq;
    unsigned expected;   /* finish() calls after which the runtime stops */
    unsigned stop_after; /* if not 0: stop after this many finish() calls */
    atomic_uint done;
    atomic_uint gen_runs;
    atomic_bool running;
    struct watchdog wd;
} st;

/*
 * Handler descriptors, one per color % 4, so that every steal policy has
 * colors to take and colors to leave: unannotated (counts 0, or its measured
 * cost under "measured"), never worthy (time-left 1 cycle), always worthy
 * (10,000,000 cycles), and worthy but for its penalty (counts 100 cycles per
 * event under "penalty").
 */
static const mely_handler_t leaf_desc[4] = {
    {.name = "leaf"},
    {.name = "leaf, never worthy", .timeleft = 1},
    {.name = "leaf, always worthy", .timeleft = 10000000},
    {.name = "leaf, high penalty", .timeleft = 10000000, .penalty = 100000},
};
static const mely_handler_t gen_desc = {.name = "generator", .timeleft = 20000};

static uint32_t xorshift32(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

static void reset_state(void)
{
    memset(&st, 0, sizeof(st));
    reset_notes();
}

static struct producer *add_producer(enum producer_kind kind, unsigned n)
{
    ck_assert_uint_lt(st.nprod, MAX_PRODUCERS);
    struct producer *p = &st.prod[st.nprod];
    p->kind = kind;
    p->id = st.nprod++;
    p->n = n;
    p->rng = 0x9E3779B9u * (p->id + 1);
    p->next_seq = calloc(NCOLORS, sizeof(*p->next_seq));
    p->slots = calloc(n, sizeof(*p->slots));
    ck_assert(p->next_seq && p->slots);
    /* Generators sit on consecutive colors, hence on different workers. */
    p->color = 4000 + p->id;
    return p;
}

static void alloc_last_seq(void)
{
    free(st.last_seq);
    st.last_seq = calloc((size_t)st.nprod * NCOLORS, sizeof(*st.last_seq));
    ck_assert_ptr_nonnull(st.last_seq);
}

static void free_producers(void)
{
    for (unsigned i = 0; i < st.nprod; i++) {
        free(st.prod[i].next_seq);
        free(st.prod[i].slots);
    }
    free(st.last_seq);
    st.last_seq = NULL;
    st.nprod = 0;
}

static unsigned total_events(void)
{
    unsigned n = 0;
    for (unsigned i = 0; i < st.nprod; i++)
        n += st.prod[i].n;
    return n;
}

static void enter(uint32_t color)
{
    if (atomic_exchange(&st.inflight[color], 1) != 0)
        note("two events of color %u ran at the same time", color);
    if (mely_current_color() != (int)color)
        note("mely_current_color() is %d in a handler of color %u", mely_current_color(), color);
    check_owner(&st.m, color); /* a running color is never stolen (nor moved) */
}

static void leave(uint32_t color)
{
    check_owner(&st.m, color);
    atomic_store(&st.inflight[color], 0);
}

/* Keeps a handler inside its color for a moment, and now and then gives up the
 * CPU there, so that a second event of the color started elsewhere meanwhile
 * would find the in-handler flag set. */
static void dawdle(uint32_t k)
{
    if (k % 64 == 0) {
        sched_yield();
    } else {
        for (volatile int i = 0; i < 16; i++) {
        }
    }
}

static void finish(void)
{
    unsigned n = atomic_fetch_add(&st.done, 1) + 1;
    if (n == st.expected || n == st.stop_after)
        mely_stop(&st.m);
}

static void give_up(int err)
{
    note("mely_post_ex failed: %d (%s)", err, mely_strerror(err));
    mely_stop(&st.m);
}

static void leaf(void *arg)
{
    struct slot *s = arg;

    enter(s->color);
    unsigned runs = atomic_fetch_add(&s->runs, 1) + 1;
    if (runs != 1)
        note("event #%u of producer %u to color %u ran %u times", s->seq, s->producer, s->color,
             runs);
    uint32_t *last = &st.last_seq[(size_t)s->producer * NCOLORS + s->color];
    if (s->seq != *last + 1)
        note("color %u, producer %u (%s): event #%u ran right after #%u", s->color, s->producer,
             kind_name[st.prod[s->producer].kind], s->seq, *last);
    *last = s->seq;
    dawdle(s->seq * 2654435761u ^ s->color);
    leave(s->color);
    finish();
}

/* Posts p's next event to a pseudo-random color at a pseudo-random priority
 * (priorities reorder color-queues, never the events of one color). */
static int post_next(struct producer *p)
{
    struct slot *s = &p->slots[p->posted];
    uint32_t r = xorshift32(&p->rng);

    s->color = r % NCOLORS;
    s->producer = p->id;
    s->seq = p->next_seq[s->color] + 1;
    int err = mely_post_ex(&st.m, s->color, (int)((r >> 24) % MELY_PRIO_LEVELS),
                           &leaf_desc[s->color % 4], leaf, s, 0);
    if (err == 0) {
        p->next_seq[s->color] = s->seq;
        p->posted++;
    }
    return err;
}

static void generator(void *arg)
{
    struct producer *p = arg;

    enter(p->color);
    atomic_fetch_add(&st.gen_runs, 1);
    for (unsigned k = 0; k < CHUNK && p->posted < p->n; k++) {
        int err = post_next(p);
        if (err) {
            give_up(err);
            break;
        }
    }
    /* Posted while still inside the color: it must not start before we leave. */
    if (p->posted < p->n) {
        int err = mely_post_ex(&st.m, p->color, MELY_PRIO_DEFAULT, &gen_desc, generator, p, 0);
        if (err)
            give_up(err);
    }
    leave(p->color);
}

/* The first event of a scenario: LIVE_THREAD producers wait for it. */
static void mark_running(void *arg)
{
    (void)arg;
    enter(BEACON_COLOR);
    atomic_store(&st.running, true);
    leave(BEACON_COLOR);
    finish();
}

static void *producer_thread(void *arg)
{
    struct producer *p = arg;

    if (mely_current_worker() != -1 || mely_current_color() != -1)
        note("a foreign thread sees worker %d, color %d", mely_current_worker(),
             mely_current_color());
    if (p->kind == LIVE_THREAD && !wait_flag(&st.running, 20000)) {
        note("no handler ran within 20 s of mely_run()");
        mely_stop(&st.m);
        return NULL;
    }
    while (p->posted < p->n && !watchdog_fired(&st.wd)) {
        int err = post_next(p);
        if (err) {
            give_up(err);
            break;
        }
        if (p->posted % 4096 == 0)
            sched_yield(); /* lets workers interleave with posting */
    }
    return NULL;
}

/* Asserts that every slot ran exactly `want` times (want < 0: at most once,
 * returning how many never ran). */
static unsigned check_runs(int want)
{
    unsigned bad = 0, never = 0;
    const struct slot *first = NULL;
    unsigned first_runs = 0;

    for (unsigned i = 0; i < st.nprod; i++) {
        for (unsigned k = 0; k < st.prod[i].posted; k++) {
            const struct slot *s = &st.prod[i].slots[k];
            unsigned r = atomic_load(&s->runs);
            never += r == 0;
            if (want >= 0 ? r != (unsigned)want : r > 1) {
                if (!bad++) {
                    first = s;
                    first_runs = r;
                }
            }
        }
    }
    ck_assert_msg(bad == 0,
                  "%u events did not run %s; e.g. #%u of producer %u to color %u ran %u times",
                  bad, want >= 0 ? "exactly once" : "at most once", first ? first->seq : 0,
                  first ? first->producer : 0, first ? first->color : 0, first_runs);
    return never;
}

/* ---- exactly once, mutual exclusion, FIFO, under load ------------------------ */

struct scenario {
    unsigned pre_run, early, live, gens; /* producers of each kind */
    unsigned n_pre, n_thread, n_gen;     /* events per producer, before scaling */
};

/*
 * Runs the producers of `sc` against a runtime of shape `sh` until every event
 * ran, then checks: each ran exactly once, never overlapping its color, in its
 * producer's order; generators ran the expected number of times; the counters
 * add up; shutdown finds nothing left.
 */
static void run_scenario(const struct scenario *sc, const struct shape *sh)
{
    reset_state();
    init_runtime_shape(&st.m, sh, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);

    for (unsigned i = 0; i < sc->pre_run; i++)
        add_producer(PRE_RUN, scaled(sc->n_pre, 64, SCALED_MAX));
    for (unsigned i = 0; i < sc->early; i++)
        add_producer(EARLY_THREAD, scaled(sc->n_thread, 64, SCALED_MAX));
    for (unsigned i = 0; i < sc->live; i++)
        add_producer(LIVE_THREAD, scaled(sc->n_thread, 64, SCALED_MAX));
    for (unsigned i = 0; i < sc->gens; i++)
        add_producer(GENERATOR, scaled(sc->n_gen, CHUNK, SCALED_MAX));
    alloc_last_seq();
    unsigned total = total_events();
    st.expected = total + 1; /* + mark_running */

    ck_assert_int_eq(mely_post(&st.m, BEACON_COLOR, mark_running, NULL), 0);
    unsigned foreign_posts = 1, gen_expected = 0;
    for (unsigned i = 0; i < st.nprod; i++) {
        struct producer *p = &st.prod[i];
        switch (p->kind) {
        case PRE_RUN:
            while (p->posted < p->n)
                ck_assert_int_eq(post_next(p), 0);
            foreign_posts += p->n;
            break;
        case EARLY_THREAD:
        case LIVE_THREAD:
            foreign_posts += p->n;
            break;
        case GENERATOR:
            ck_assert_int_eq(mely_post_ex(&st.m, p->color, 0, &gen_desc, generator, p, 0), 0);
            foreign_posts++;
            gen_expected += (p->n + CHUNK - 1) / CHUNK;
            break;
        }
    }
    for (unsigned i = 0; i < st.nprod; i++) {
        struct producer *p = &st.prod[i];
        if (p->kind == EARLY_THREAD || p->kind == LIVE_THREAD)
            ck_assert_int_eq(pthread_create(&p->thread, NULL, producer_thread, p), 0);
    }

    watchdog_start(&st.wd, &st.m, 100, __func__);
    uint64_t t0 = now_ns();
    int rc = mely_run(&st.m);
    uint64_t t1 = now_ns();
    bool fired = watchdog_end(&st.wd);
    for (unsigned i = 0; i < st.nprod; i++) {
        struct producer *p = &st.prod[i];
        if (p->kind == EARLY_THREAD || p->kind == LIVE_THREAD)
            pthread_join(p->thread, NULL);
    }

    ck_assert_int_eq(rc, 0);
    assert_no_notes();
    ck_assert_msg(!fired, "%s: not done after 100 s: %u of %u events ran", shape_name(sh),
                  atomic_load(&st.done), st.expected);
    ck_assert_uint_eq(atomic_load(&st.done), st.expected);
    check_runs(1);
    ck_assert_uint_eq(atomic_load(&st.gen_runs), gen_expected);

    mely_stats_t sum;
    ck_assert_int_eq(stats_sum(&st.m, &sum), 0);
    ck_assert_uint_eq(sum.events_run, (uint64_t)st.expected + gen_expected);
    ck_assert_uint_eq(sum.posts_foreign, foreign_posts);
    /* Handlers post the generators' events and their re-posts, nothing else. */
    unsigned handler_posts = total + gen_expected - foreign_posts + 1;
    ck_assert_uint_eq(sum.posts_local + sum.posts_remote, handler_posts);
    ck_assert_int_eq(mely_shutdown(&st.m), 0);

    if (getenv("MELY_TEST_VERBOSE"))
        fprintf(stderr, "%s: %u events in %.3f s\n", shape_name(sh), st.expected,
                (t1 - t0) / 1e9);
    free_producers();
}

/* Producers of every kind at once: the test thread before the run, foreign
 * threads before and during it, and handlers posting from every worker. */
START_TEST(stress_all_producers)
{
    const struct scenario sc = {.pre_run = 1, .early = 1, .live = 1, .gens = 4,
                                .n_pre = 5000, .n_thread = 200000, .n_gen = 80000};
    run_scenario(&sc, &shapes[_i]);
}
END_TEST

START_TEST(events_posted_before_run_run)
{
    const struct scenario sc = {.pre_run = 2, .n_pre = 50000};
    run_scenario(&sc, &shapes[_i]);
}
END_TEST

START_TEST(foreign_threads_post_while_running)
{
    const struct scenario sc = {.live = 2, .n_thread = 50000};
    run_scenario(&sc, &shapes[_i]);
}
END_TEST

/* ---- mely_color_move() racing posts, runs and steals ------------------------------ */

enum { MV_COLORS = 16, MV_BURST = 8, MV_FIRST = 100, MV_WAIT_MS = 10000 };

static struct {
    mely_t m;
    const struct shape *sh;
    unsigned workers, rounds;
    unsigned next_seq[MV_COLORS];       /* the mover thread's */
    unsigned last_seq[MV_COLORS];       /* handlers of the color only (not atomic: see st) */
    atomic_int inside[MV_COLORS];
    atomic_int expect_worker[MV_COLORS]; /* where the color must run; -1: anywhere */
    atomic_uint ran;
    unsigned posted, moves_ok, moves_busy; /* the mover thread's */
    struct watchdog wd;
} mv;

static void mv_event(void *arg)
{
    uintptr_t a = (uintptr_t)arg;
    unsigned c = (unsigned)(a >> 24), seq = (unsigned)(a & 0xffffff);
    mely_color_t color = MV_FIRST + c;
    int self = mely_current_worker();

    if (atomic_fetch_add(&mv.inside[c], 1) != 0)
        note("color %u: two handlers at once", color);
    int owner = mely_color_owner(&mv.m, color);
    if (owner != self)
        note("color %u runs on worker %d while the map says worker %d", color, self, owner);
    int want = atomic_load(&mv.expect_worker[c]);
    if (want >= 0 && self != want)
        note("color %u, moved to worker %d, ran event %u on worker %d", color, want, seq, self);
    if (seq != mv.last_seq[c] + 1)
        note("color %u: event %u ran right after %u", color, seq, mv.last_seq[c]);
    mv.last_seq[c] = seq;
    dawdle(seq * 2654435761u ^ color);
    owner = mely_color_owner(&mv.m, color);
    if (owner != self)
        note("color %u runs on worker %d while the map says worker %d (at its end)", color, self,
             owner);
    atomic_fetch_sub(&mv.inside[c], 1);
    atomic_fetch_add(&mv.ran, 1);
}

/* mely_color_move() until the color is idle: a color whose last handler is
 * returning may still be running for a moment. Bounded by 2 s. */
static int move_when_idle(mely_color_t color, unsigned worker)
{
    uint64_t deadline = now_ns() + 2000000000u;
    int rc;
    while ((rc = mely_color_move(&mv.m, color, worker)) == MELY_EBUSY && now_ns() < deadline)
        sleep_us(50);
    return rc;
}

/*
 * Round after round: (1) every color is idle: move it to a worker of the
 * round's choosing (must succeed, and the map must say so); (2) post a burst
 * to every color, and meanwhile try to move random colors to random workers
 * (each move succeeds, when the color happens to be idle, or refuses with
 * MELY_EBUSY); (3) wait until the burst ran.
 */
static void *mover(void *arg)
{
    (void)arg;
    uint32_t rng = 12345;
    bool stealing = mv.sh->steal != NULL;

    for (unsigned r = 0; r < mv.rounds && !watchdog_fired(&mv.wd); r++) {
        for (unsigned c = 0; c < MV_COLORS; c++) {
            unsigned to = (r * 7 + c) % mv.workers;
            int rc = move_when_idle(MV_FIRST + c, to);
            if (rc != 0) {
                note("round %u: moving idle color %u to worker %u: %d (%s)", r, MV_FIRST + c, to,
                     rc, mely_strerror(rc));
                goto out;
            }
            mv.moves_ok++;
            int owner = mely_color_owner(&mv.m, MV_FIRST + c);
            if (owner != (int)to)
                note("round %u: color %u moved to worker %u, but the map says %d", r,
                     MV_FIRST + c, to, owner);
            /* With stealing, a color with events may move on again. */
            atomic_store(&mv.expect_worker[c], stealing ? -1 : (int)to);
        }
        for (unsigned k = 0; k < MV_BURST; k++) {
            for (unsigned c = 0; c < MV_COLORS; c++) {
                uintptr_t a = (uintptr_t)c << 24 | ++mv.next_seq[c];
                int err = mely_post_ex(&mv.m, MV_FIRST + c, MELY_PRIO_DEFAULT,
                                       &leaf_desc[(c + k) % 4], mv_event, (void *)a, 0);
                if (err) {
                    note("post: %s", mely_strerror(err));
                    goto out;
                }
                mv.posted++;
            }
            unsigned c = xorshift32(&rng) % MV_COLORS, to = xorshift32(&rng) % mv.workers;
            /* The color is idle only if all its events ran: then the next
             * ones must follow it, and no handler of it runs now. */
            int rc = mely_color_move(&mv.m, MV_FIRST + c, to);
            if (rc == 0) {
                mv.moves_ok++;
                if (!stealing)
                    atomic_store(&mv.expect_worker[c], (int)to);
            } else if (rc == MELY_EBUSY) {
                mv.moves_busy++;
            } else {
                note("round %u: moving color %u: %d (%s)", r, MV_FIRST + c, rc,
                     mely_strerror(rc));
                goto out;
            }
        }
        uint64_t deadline = now_ns() + MV_WAIT_MS * 1000000ull;
        while (atomic_load(&mv.ran) < mv.posted && now_ns() < deadline)
            sleep_us(20);
        if (atomic_load(&mv.ran) != mv.posted) {
            note("round %u: %u of %u events ran within %u ms", r, atomic_load(&mv.ran), mv.posted,
                 MV_WAIT_MS);
            goto out;
        }
    }
out:
    mely_stop(&mv.m);
    return NULL;
}

/* Colors moved by hand while foreign posts, runs and steals go on: every
 * event runs once, in order, never two of a color at once, and on the worker
 * the map names. */
START_TEST(moves_race_posts)
{
    const struct shape *sh = &shapes[_i];

    reset_notes();
    memset(&mv, 0, sizeof(mv));
    mv.sh = sh;
    mv.workers = sh->workers;
    mv.rounds = scaled(100, 10, 100000);
    for (unsigned c = 0; c < MV_COLORS; c++)
        atomic_store(&mv.expect_worker[c], -1);
    init_runtime_shape(&mv.m, sh, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);

    pthread_t t;
    watchdog_start(&mv.wd, &mv.m, 60, __func__);
    ck_assert_int_eq(pthread_create(&t, NULL, mover, NULL), 0);
    int rc = mely_run(&mv.m);
    bool fired = watchdog_end(&mv.wd);
    pthread_join(t, NULL);
    ck_assert_int_eq(rc, 0);
    assert_no_notes();
    ck_assert_msg(!fired, "%s: not done after 60 s: %u of %u events ran", shape_name(sh),
                  atomic_load(&mv.ran), mv.posted);
    ck_assert_uint_eq(mv.posted, mv.rounds * MV_COLORS * MV_BURST);
    ck_assert_uint_eq(atomic_load(&mv.ran), mv.posted);
    for (unsigned c = 0; c < MV_COLORS; c++)
        ck_assert_uint_eq(mv.last_seq[c], mv.rounds * MV_BURST);
    ck_assert_uint_ge(mv.moves_ok, mv.rounds * MV_COLORS);
    ck_assert_int_eq(mely_shutdown(&mv.m), 0);
}
END_TEST

/* ---- exactly once across stop, run and shutdown -------------------------------- */

static const struct shape stop_shapes[] = {
    {.workers = 1, .pin = 1},
    {.workers = 2, .pin = 1},
    {.workers = 8, .pin = 0},
    {.workers = 1, .pin = 1, .engine = "legacy"},
    {.workers = 8, .pin = 0, .engine = "legacy"},
};

/*
 * The first handler stops the runtime with thousands of events queued: those
 * that ran plus those shutdown discards must be all of them, none twice, and
 * the ones that ran must be, per color, a prefix of the post order.
 */
START_TEST(exactly_once_across_shutdown)
{
    const struct shape *sh = &stop_shapes[_i];
    unsigned workers = sh->workers;

    reset_state();
    init_runtime_shape(&st.m, sh, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    struct producer *p = add_producer(PRE_RUN, scaled(20000, 1000, SCALED_MAX));
    alloc_last_seq();
    st.expected = p->n;
    st.stop_after = 1;
    while (p->posted < p->n)
        ck_assert_int_eq(post_next(p), 0);

    watchdog_start(&st.wd, &st.m, 30, __func__);
    int rc = mely_run(&st.m);
    bool fired = watchdog_end(&st.wd);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(!fired, "mely_stop() from the first handler did not end mely_run() in 30 s");
    assert_no_notes();

    unsigned ran = atomic_load(&st.done);
    int discarded = mely_shutdown(&st.m);
    ck_assert_int_ge(discarded, 0);
    ck_assert_uint_eq(ran + (unsigned)discarded, p->n);
    /* Checked after shutdown: a discarded event must not have run either. */
    unsigned never = check_runs(-1);
    ck_assert_uint_eq(never, (unsigned)discarded);
    /* With one worker, the thread that asked to stop is the only one that
     * could start another handler, and it knows of the request. */
    if (workers == 1)
        ck_assert_uint_eq(ran, 1);
    free_producers();
}
END_TEST

/*
 * Run 1 stops after its first event; then more events are posted to the same
 * colors; run 2 must run what run 1 left queued and the new ones, each once, in
 * post order across both runs, and shutdown must find nothing left.
 */
START_TEST(run_stop_run)
{
    const struct shape *sh = &shapes[_i];

    reset_state();
    init_runtime_shape(&st.m, sh, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    struct producer *p = add_producer(PRE_RUN, 2 * scaled(10000, 500, SCALED_MAX));
    alloc_last_seq();
    unsigned n1 = p->n / 2;

    while (p->posted < n1)
        ck_assert_int_eq(post_next(p), 0);
    st.expected = n1;
    st.stop_after = 1;
    watchdog_start(&st.wd, &st.m, 30, __func__);
    int rc = mely_run(&st.m);
    bool fired = watchdog_end(&st.wd);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(!fired, "run 1: mely_stop() from a handler did not end mely_run() in 30 s");
    unsigned ran1 = atomic_load(&st.done);
    ck_assert_uint_ge(ran1, 1);

    /* Between runs: no worker runs, so these fields need no synchronization
     * beyond what mely_run() gives (its threads are joined and restarted). */
    while (p->posted < p->n)
        ck_assert_int_eq(post_next(p), 0);
    st.stop_after = 0;
    st.expected = p->n;
    watchdog_start(&st.wd, &st.m, 60, __func__);
    rc = mely_run(&st.m);
    fired = watchdog_end(&st.wd);
    ck_assert_int_eq(rc, 0);
    assert_no_notes();
    ck_assert_msg(!fired, "run 2: not done after 60 s: %u of %u events ran (%u in run 1)",
                  atomic_load(&st.done), p->n, ran1);
    ck_assert_uint_eq(atomic_load(&st.done), p->n);
    check_runs(1);
    ck_assert_int_eq(mely_shutdown(&st.m), 0);
    free_producers();
}
END_TEST

/* ---- the suite ------------------------------------------------------------------ */

/* new_tcase()'s fixture clears MELY_* overrides from the caller's environment
 * before each test: the tests choose their runtime shapes. */
int main(void)
{
    Suite *s = suite_create("invariants");

    TCase *tc = new_tcase(s, "stress", 120);
    tcase_add_loop_test(tc, stress_all_producers, 0, NSHAPES);
    tcase_add_loop_test(tc, events_posted_before_run_run, 0, NSHAPES);
    tcase_add_loop_test(tc, foreign_threads_post_while_running, 0, NSHAPES);
    tcase_add_loop_test(tc, moves_race_posts, 0, NSHAPES);

    tc = new_tcase(s, "stop", 120);
    tcase_add_loop_test(tc, exactly_once_across_shutdown, 0, NELEM(stop_shapes));
    tcase_add_loop_test(tc, run_stop_run, 0, NSHAPES);
    return mely_test_main(s);
}
