/* SPDX-License-Identifier: MIT */
/*
 * check_deliver.c: stress tests of the cross-core post path (mely/remote/deliver.c):
 * posts go through the owner's inbox, a full inbox keeps the rest staged,
 * foreign threads fall back to the owner's lock when it is full, and colors
 * move while posts to them are in flight.
 *
 * Every test checks, for each (poster, target color) pair, that the events
 * run exactly once and in post order, and that two events of one color never
 * run at once; each runs in every shape of testutil.c (both engines, with and
 * without stealing, 2 pinned and 8 unpinned workers).
 *  - flood: handlers on every worker post bursts of three inboxes' worth to
 *    colors of the other workers, which post back (a full inbox, both ways:
 *    nothing lost, reordered or deadlocked);
 *  - foreign_flood: two threads that are not workers post to colors of a
 *    worker held busy, past its inbox's capacity (the locked fallback);
 *  - causal: A posts to C, then to B, whose handler posts to C: A's event
 *    runs first, though the two travel from different workers;
 *  - moves_race_flushes: a thread moves the target colors around while
 *    handlers post to them (the move protocol).
 */
#include <check.h>
#include <ctype.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"

enum {
    NPOSTERS = 8,      /* poster colors 200.. */
    NTARGETS = 16,     /* target colors 100.. */
    BURST = 3 * 512,   /* per poster run: three inboxes' worth (MELY__INBOX_CAP) */
    POSTER0 = 200,
    TARGET0 = 100,
};

/* The posts of one (poster, target) pair are numbered 1, 2, ... Each keeps
 * a record of its way, for the soak (scripts/soak.sh): the worker that
 * posted it (-1: a thread that is no worker), the target's owner that
 * worker saw just before (the same worker: queued directly, "local"; else
 * staged in the outbox, "remote"), the worker that ran it, and both times. */
struct post {
    uint16_t poster, target;
    uint32_t seq;
    int8_t post_w, owner_seen, run_w;
    uint64_t t_post, t_run;
};

/* The mover's log: which target it moved where, when (a ring). */
enum { MOVELOG = 1 << 16 };
struct move_rec {
    uint64_t t;
    uint16_t target;
    int8_t to;
};

static struct {
    mely_t m;
    struct watchdog wd;
    unsigned quota;                        /* posts per poster */
    unsigned posted[NPOSTERS];             /* the poster color's (serialized) */
    uint32_t next_seq[NPOSTERS][NTARGETS]; /* the poster's */
    uint32_t last_seq[NPOSTERS][NTARGETS]; /* the target color's: not atomic on
                                              purpose (TSan checks the order) */
    atomic_int inflight[NTARGETS];
    atomic_uint ran, posters_done;
    struct post *posts;                    /* NPOSTERS * quota */
    atomic_bool stop_moving;
    unsigned ntargets;                     /* targets the posters use (NTARGETS) */
    unsigned posters;                      /* poster colors posting (NPOSTERS) */
    bool tight;                            /* the mover never sleeps */
    bool moving;                           /* a mover runs (and ends the run) */
    struct move_rec moves[MOVELOG];        /* the mover's */
    atomic_uint nmoves;
    atomic_bool broken;                    /* the first disorder: recorded */
    struct post first_bad;
} st;

static void reset(unsigned quota)
{
    free(st.posts);
    memset(&st, 0, sizeof(st));
    st.quota = quota;
    st.ntargets = NTARGETS;
    st.posters = NPOSTERS;
    st.posts = calloc((size_t)NPOSTERS * quota, sizeof(*st.posts));
    ck_assert_ptr_nonnull(st.posts);
}

static void consume(void *arg)
{
    struct post *p = arg;

    if (atomic_fetch_add(&st.inflight[p->target], 1) != 0)
        note("target %u: two events at once", p->target);
    p->run_w = (int8_t)mely_current_worker();
    p->t_run = now_ns();
    if (st.last_seq[p->poster][p->target] + 1 != p->seq) {
        note("poster %u -> target %u: event #%u ran after #%u", p->poster, p->target, p->seq,
             st.last_seq[p->poster][p->target]);
        if (!atomic_exchange(&st.broken, true))
            st.first_bad = *p;
    }
    st.last_seq[p->poster][p->target] = p->seq;
    atomic_fetch_sub(&st.inflight[p->target], 1);
    if (atomic_fetch_add(&st.ran, 1) + 1 == st.posters * st.quota && !st.moving)
        mely_stop(&st.m); /* with a mover, the mover stops the run */
}

/* Posts the next event of poster p to target t. */
static int post_next(unsigned p, unsigned t)
{
    struct post *e = &st.posts[(size_t)p * st.quota + st.posted[p]++];
    *e = (struct post){.poster = (uint16_t)p,
                       .target = (uint16_t)t,
                       .seq = ++st.next_seq[p][t],
                       .post_w = (int8_t)mely_current_worker(),
                       .owner_seen = (int8_t)mely_color_owner(&st.m, TARGET0 + t),
                       .run_w = -2,
                       .t_post = now_ns()};
    return mely_post(&st.m, TARGET0 + t, consume, e);
}

static void poster(void *arg)
{
    unsigned p = (unsigned)(uintptr_t)arg;

    for (unsigned k = 0; k < BURST && st.posted[p] < st.quota; k++) { /* bounded: BURST */
        if (post_next(p, (p + st.posted[p]) % st.ntargets) != 0) {
            note("poster %u: a post failed", p);
            mely_stop(&st.m);
            return;
        }
    }
    if (st.posted[p] < st.quota && mely_post(&st.m, POSTER0 + p, poster, arg) != 0)
        note("poster %u: re-post failed", p);
}

static const char *way(const struct post *e)
{
    return e->post_w < 0 ? "foreign" : e->post_w == e->owner_seen ? "local" : "remote";
}

/* After a disorder, with MELY_SOAK_DIR set: the records of its pair around
 * it and the mover's log over their time, into a file of that directory. */
static void dump_records(const char *test, const struct shape *sh)
{
    const char *dir = getenv("MELY_SOAK_DIR");
    if (!atomic_load(&st.broken) || !dir || !*dir)
        return;
    char path[512], shape[64];
    snprintf(shape, sizeof(shape), "%s", shape_name(sh));
    for (char *c = shape; *c; c++) /* bounded: the name */
        if (!isalnum((unsigned char)*c) && *c != '+')
            *c = '-';
    snprintf(path, sizeof(path), "%s/%s-%s-%d.txt", dir, test, shape, (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        return;
    }
    const struct post *bad = &st.first_bad;
    uint64_t lo = UINT64_MAX, hi = 0;
    fprintf(f, "%s, %s: poster %u -> target %u, #%u ran out of order\n", test, shape_name(sh),
            bad->poster, bad->target, bad->seq);
    fprintf(f, "seq way post_w owner_seen run_w t_post t_run (ns, monotonic)\n");
    for (unsigned k = 0; k < st.posted[bad->poster]; k++) { /* bounded: the poster's posts */
        const struct post *e = &st.posts[(size_t)bad->poster * st.quota + k];
        if (e->target != bad->target || e->seq + 16 < bad->seq || e->seq > bad->seq + 4)
            continue;
        fprintf(f, "%u %s %d %d %d %llu %llu\n", e->seq, way(e), e->post_w, e->owner_seen,
                e->run_w, (unsigned long long)e->t_post, (unsigned long long)e->t_run);
        lo = e->t_post < lo ? e->t_post : lo;
        hi = e->t_run > hi ? e->t_run : hi;
    }
    fprintf(f, "mover's moves: t target to\n");
    unsigned n = atomic_load(&st.nmoves);
    for (unsigned i = n > MOVELOG ? n - MOVELOG : 0; i < n; i++) { /* bounded: the ring */
        const struct move_rec *m = &st.moves[i % MOVELOG];
        if (m->target == bad->target && m->t + 1000000 >= lo && m->t <= hi)
            fprintf(f, "%llu %u %d\n", (unsigned long long)m->t, m->target, m->to);
    }
    fclose(f);
    fprintf(stderr, "records of the disorder: %s\n", path);
}

static void check_all_ran(const struct shape *sh, bool fired)
{
    ck_assert_msg(!fired, "%s: not done in time: %u of %u events ran", shape_name(sh),
                  atomic_load(&st.ran), st.posters * st.quota);
    ck_assert_uint_eq(atomic_load(&st.ran), st.posters * st.quota);
    for (unsigned p = 0; p < NPOSTERS; p++)
        for (unsigned t = 0; t < NTARGETS; t++)
            ck_assert_uint_eq(st.last_seq[p][t], st.next_seq[p][t]);
}

START_TEST(flood)
{
    const struct shape *sh = &shapes[_i];

    reset(scaled(20000, 2 * BURST, SCALED_MAX));
    init_runtime_shape(&st.m, sh, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    for (unsigned p = 0; p < NPOSTERS; p++)
        ck_assert_int_eq(mely_post(&st.m, POSTER0 + p, poster, (void *)(uintptr_t)p), 0);
    watchdog_start(&st.wd, &st.m, 60, __func__);
    ck_assert_int_eq(mely_run(&st.m), 0);
    bool fired = watchdog_end(&st.wd);
    dump_records("flood", sh);
    assert_no_notes();
    check_all_ran(sh, fired);
    ck_assert_int_eq(mely_shutdown(&st.m), 0);
}
END_TEST

/* ---- foreign threads past a full inbox ------------------------------------------- */

static atomic_bool blocker_go;

/* Holds worker 0 until the foreign threads have posted well past an inbox. */
static void blocker(void *arg)
{
    (void)arg;
    wait_flag(&blocker_go, 20000);
}

static void *foreign_poster(void *arg)
{
    unsigned p = (unsigned)(uintptr_t)arg;

    for (unsigned k = 0; k < st.quota; k++) { /* bounded: the quota */
        if (post_next(p, (p + k) % NTARGETS) != 0) {
            note("foreign poster %u: a post failed", p);
            break;
        }
        if (k == 4 * BURST && atomic_fetch_add(&st.posters_done, 1) == 1)
            atomic_store(&blocker_go, true);
    }
    return NULL;
}

START_TEST(foreign_flood)
{
    const struct shape *sh = &shapes[_i];

    reset(scaled(50000, 5 * BURST, SCALED_MAX));
    atomic_store(&blocker_go, false);
    init_runtime_shape(&st.m, sh, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    /* Every target on worker 0, each with its color-queue made (an empty
     * post), behind the blocker. */
    for (unsigned t = 0; t < NTARGETS; t++) {
        ck_assert_int_eq(mely_color_move(&st.m, TARGET0 + t, 0), 0);
        ck_assert_int_eq(mely_post(&st.m, TARGET0 + t, nop, NULL), 0);
    }
    ck_assert_int_eq(mely_post(&st.m, MELY_COLOR_PINNED(0), blocker, NULL), 0);
    /* Only the two foreign posters post: the others' quota counts as done. */
    atomic_store(&st.ran, (NPOSTERS - 2) * st.quota);
    pthread_t t[2];
    for (unsigned p = 0; p < 2; p++)
        ck_assert_int_eq(pthread_create(&t[p], NULL, foreign_poster, (void *)(uintptr_t)p), 0);
    watchdog_start(&st.wd, &st.m, 60, __func__);
    ck_assert_int_eq(mely_run(&st.m), 0);
    bool fired = watchdog_end(&st.wd);
    for (unsigned p = 0; p < 2; p++)
        pthread_join(t[p], NULL);
    dump_records("foreign_flood", sh);
    assert_no_notes();
    check_all_ran(sh, fired);
    ck_assert_int_eq(mely_shutdown(&st.m), 0);
}
END_TEST

/* ---- a post caused by a post, through another worker --------------------------------- */

enum { COLOR_A = 300, COLOR_B = 301, COLOR_C = 302, CAUSAL_CHUNK = 64 };

static struct {
    mely_t m;
    unsigned rounds, sent;  /* A's */
    uint8_t *first;         /* per round: 1 once A's event ran (C's handler only) */
    atomic_uint checked;
} cs;

static void c_from_a(void *arg)
{
    cs.first[(uintptr_t)arg] = 1;
}

static void c_from_b(void *arg)
{
    if (!cs.first[(uintptr_t)arg])
        note("round %u: B's event reached C before A's", (unsigned)(uintptr_t)arg);
    if (atomic_fetch_add(&cs.checked, 1) + 1 == cs.rounds)
        mely_stop(&cs.m);
}

static void b_relay(void *arg)
{
    if (mely_post(&cs.m, COLOR_C, c_from_b, arg) != 0)
        note("B: post failed");
}

static void a_source(void *arg)
{
    (void)arg;
    for (unsigned k = 0; k < CAUSAL_CHUNK && cs.sent < cs.rounds; k++, cs.sent++) {
        void *round = (void *)(uintptr_t)cs.sent;
        if (mely_post(&cs.m, COLOR_C, c_from_a, round) != 0 ||
            mely_post(&cs.m, COLOR_B, b_relay, round) != 0)
            note("A: post failed");
    }
    if (cs.sent < cs.rounds && mely_post(&cs.m, COLOR_A, a_source, NULL) != 0)
        note("A: re-post failed");
}

START_TEST(causal)
{
    const struct shape *sh = &shapes[_i];
    unsigned n = sh->workers;

    memset(&cs, 0, sizeof(cs));
    cs.rounds = scaled(100000, 1000, SCALED_MAX);
    cs.first = calloc(cs.rounds, 1);
    ck_assert_ptr_nonnull(cs.first);
    init_runtime_shape(&cs.m, sh, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    /* A, B and C on three different workers where there are three. */
    ck_assert_int_eq(mely_color_move(&cs.m, COLOR_A, 0), 0);
    ck_assert_int_eq(mely_color_move(&cs.m, COLOR_B, 1 % n), 0);
    ck_assert_int_eq(mely_color_move(&cs.m, COLOR_C, 2 % n), 0);
    ck_assert_int_eq(mely_post(&cs.m, COLOR_A, a_source, NULL), 0);
    run_bounded(&cs.m, 60, "causal");
    assert_no_notes();
    ck_assert_uint_eq(atomic_load(&cs.checked), cs.rounds);
    ck_assert_int_eq(mely_shutdown(&cs.m), 0);
    free(cs.first);
}
END_TEST

/* ---- moves while handlers post ------------------------------------------------------ */

static atomic_uint moves_ok;

/* Moves the targets round the workers until every event ran and a move
 * went through (the targets are idle then: on a loaded machine none may
 * have been idle before), or for 10 s after, then stops the run. */
static void *mover(void *arg)
{
    unsigned n = (unsigned)(uintptr_t)arg, i = 0;
    uint64_t all_ran_at = 0;

    while (!atomic_load(&st.stop_moving)) { /* bounded: until the runtime stops */
        if (atomic_load(&st.ran) == st.posters * st.quota) {
            if (!all_ran_at)
                all_ran_at = now_ns();
            if (atomic_load(&moves_ok) > 0 || now_ns() - all_ran_at > 10000000000ull) {
                mely_stop(&st.m);
                break;
            }
        }
        unsigned t = i % st.ntargets, to = (i / st.ntargets) % n;
        int err = mely_color_move(&st.m, TARGET0 + t, to);
        if (err == 0) { /* the moves that happened: the log spans more time */
            unsigned k = atomic_fetch_add(&st.nmoves, 1) % MOVELOG;
            st.moves[k] = (struct move_rec){.t = now_ns(), .target = (uint16_t)t, .to = (int8_t)to};
        }
        if (err == 0)
            atomic_fetch_add(&moves_ok, 1);
        else if (err != MELY_EBUSY)
            note("mely_color_move: %s", mely_strerror(err));
        i++;
        /* A tight mover yields instead of sleeping: preempted while it holds
         * two workers' locks, on a loaded machine, it held both workers for
         * seconds (a run of 100,000 events did not end in 60 s). */
        if (st.tight)
            sched_yield();
        else if (i % 64 == 0)
            sleep_us(10);
    }
    return NULL;
}

/* The posters post with the mover moving the targets; then every event ran,
 * each pair's in order, and some moves went through (the mover waits for
 * one). */
static void run_with_mover(const struct shape *sh, const char *test)
{
    atomic_store(&moves_ok, 0);
    st.moving = true;
    init_runtime_shape(&st.m, sh, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    for (unsigned p = 0; p < st.posters; p++)
        ck_assert_int_eq(mely_post(&st.m, POSTER0 + p, poster, (void *)(uintptr_t)p), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, mover, (void *)(uintptr_t)sh->workers), 0);
    watchdog_start(&st.wd, &st.m, 60, test);
    ck_assert_int_eq(mely_run(&st.m), 0);
    bool fired = watchdog_end(&st.wd);
    atomic_store(&st.stop_moving, true);
    pthread_join(t, NULL);
    dump_records(test, sh);
    assert_no_notes();
    check_all_ran(sh, fired);
    ck_assert_msg(atomic_load(&moves_ok) > 0, "%s: no move succeeded", shape_name(sh));
    ck_assert_int_eq(mely_shutdown(&st.m), 0);
}

START_TEST(moves_race_flushes)
{
    reset(scaled(20000, 2 * BURST, SCALED_MAX));
    run_with_mover(&shapes[_i], "moves_race_flushes");
}
END_TEST

/*
 * A worker's post to a color it owns goes straight to the color's queue,
 * after its outbox (which may hold an earlier post to that color, staged
 * while another worker owned it). Two posters, two targets, and a mover
 * that toggles the targets between the workers without pausing: the color
 * may move away between the poster's "mine" and its lock, after the flush
 * put the earlier post in the new owner's inbox. The direct queueing must
 * not pass it (it did: the rare reorder of issue 26).
 */
START_TEST(own_posts_race_moves)
{
    reset(scaled(200000, 2 * BURST, SCALED_MAX));
    st.ntargets = 2;
    st.posters = 2;
    st.tight = true;
    run_with_mover(&shapes[_i], "own_posts_race_moves");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("deliver");

    TCase *tc = new_tcase(s, "inbox", 240);
    tcase_add_loop_test(tc, flood, 0, NSHAPES);
    tcase_add_loop_test(tc, foreign_flood, 0, NSHAPES);
    tcase_add_loop_test(tc, causal, 0, NSHAPES);

    /* The soak's case (scripts/soak.sh): moves racing posts. */
    tc = new_tcase(s, "moves", 240);
    tcase_add_loop_test(tc, moves_race_flushes, 0, NSHAPES);
    tcase_add_loop_test(tc, own_posts_race_moves, 0, NSHAPES);
    int rc = mely_test_main(s);
    free(st.posts);
    return rc;
}
