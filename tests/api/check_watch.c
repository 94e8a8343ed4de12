/* SPDX-License-Identifier: MIT */
/*
 * check_watch.c: the semantics of single fd watches, through the public API
 * (include/mely/mely.h):
 *  - a ready watch is queued once: a handler that does not read runs again
 *    and again, never twice at once, and not once more after it has read;
 *  - mely_watch_remove(): a queued event of the watch never starts (removal
 *    from the watch's color, from a handler of another color, from a foreign
 *    thread); a run in progress finishes and is the last; removal racing with
 *    readiness on hundreds of watches; removal from the watch's own handler
 *    is synchronous (its argument is freed there: ASan checks);
 *  - a color stolen or moved with mely_color_move() takes its watch along
 *    (data keeps arriving, watch_moves counts the moves);
 *  - MELY_ONESHOT and mely_watch_rearm(); mely_watch_pause() and
 *    mely_watch_resume(); mely_close(); argument errors;
 *    watches set before mely_run() and between runs.
 *
 * Handlers and helper threads never call ck_assert; every wait is bounded;
 * MELY_TEST_SCALE scales the counts (see tests/testutil.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mely/mely.h>
#include "tests/testutil.h"

/* Always worthy under the time-left policies, so that "all" steals too. */
static const mely_handler_t d_heavy = {.name = "heavy", .timeleft = 10000000};

static const struct shape watch_shapes[] = {
    {.workers = 2, .pin = 1},
    {.workers = 2, .pin = 1, .steal = "base"},
    {.workers = 2, .pin = 1, .steal = "all"},
    {.workers = 8, .pin = 0, .steal = "all"},
};

static void make_pipe(int p[2])
{
    ck_assert_int_eq(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
}

static void drain(int fd)
{
    char b[4096];
    while (read(fd, b, sizeof(b)) > 0) {
    }
}

/* ---- a ready watch is queued once ------------------------------------------------------ */

enum { ONCE_PIPES = 4, ONCE_HOLD_MS = 100 };

static struct {
    int p[ONCE_PIPES][2];
    atomic_int inside[ONCE_PIPES];
    atomic_uint runs[ONCE_PIPES], late[ONCE_PIPES], drained;
    uint64_t first[ONCE_PIPES]; /* first run's time (its color only) */
    bool done[ONCE_PIPES];      /* read everything (its color only) */
} once;

/* Runs for ONCE_HOLD_MS without reading (sleeping 1 ms a run), then reads all. */
static void once_handler(int fd, unsigned ready, void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    (void)fd;
    (void)ready;
    if (atomic_fetch_add(&once.inside[i], 1) != 0)
        note("watch %u runs twice at once", i);
    atomic_fetch_add(&once.runs[i], 1);
    if (once.done[i])
        atomic_fetch_add(&once.late[i], 1);
    uint64_t t = now_ns();
    if (!once.first[i])
        once.first[i] = t;
    if (t - once.first[i] < ONCE_HOLD_MS * 1000000ull) {
        sleep_us(1000);
    } else if (!once.done[i]) {
        drain(once.p[i][0]);
        once.done[i] = true;
        atomic_fetch_add(&once.drained, 1);
    }
    atomic_fetch_sub(&once.inside[i], 1);
}

static void *once_helper(void *arg)
{
    (void)arg;
    if (!wait_count(&once.drained, ONCE_PIPES, 10000))
        note("%u of %u watches read their data within 10 s", atomic_load(&once.drained),
             ONCE_PIPES);
    sleep_us(50000); /* a flood would go on running here */
    mely_stop(&rt);
    return NULL;
}

/*
 * Four pipes with data whose handlers do not read for 100 ms (each run sleeps
 * 1 ms): a level-triggered watch runs again after each run, never twice at
 * once, at most once per 1 ms run (no flood: io_ready counts exactly the
 * runs); after the run that reads everything, it never runs again.
 */
START_TEST(ready_watch_is_queued_once)
{
    const struct shape *sh = &watch_shapes[_i];
    mely_watch_t *w[ONCE_PIPES];

    memset(&once, 0, sizeof(once));
    init_runtime_shape(&rt, sh, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    for (unsigned i = 0; i < ONCE_PIPES; i++) {
        make_pipe(once.p[i]);
        ck_assert_int_eq(write(once.p[i][1], "0123456789", 10), 10);
        mely_to_t to = {10 + i, MELY_PRIO_DEFAULT, &d_heavy};
        ck_assert_int_eq(
            mely_watch(&rt, once.p[i][0], MELY_READ, to, once_handler, (void *)(uintptr_t)i, &w[i]),
            0);
    }
    uint64_t t0 = now_ns();
    run_with_helper(&rt, once_helper, NULL, 60, shape_name(sh));
    double ms = (now_ns() - t0) / 1e6;

    unsigned total = 0;
    for (unsigned i = 0; i < ONCE_PIPES; i++) {
        unsigned runs = atomic_load(&once.runs[i]);
        total += runs;
        ck_assert_msg(atomic_load(&once.late[i]) == 0,
                      "%s: watch %u ran %u more times after it had read everything",
                      shape_name(sh), i, atomic_load(&once.late[i]));
        ck_assert_msg(runs >= 10 && runs <= ms + 2,
                      "%s: watch %u ran %u times in %.0f ms (each run takes 1 ms; level-"
                      "triggered, it must come back)",
                      shape_name(sh), i, runs, ms);
    }
    mely_stats_t sum;
    ck_assert_int_eq(stats_sum(&rt, &sum), 0);
    ck_assert_msg(sum.io_ready == total,
                  "%s: the pollers queued %" PRIu64 " watch events for %u runs", shape_name(sh),
                  sum.io_ready, total);
    for (unsigned i = 0; i < ONCE_PIPES; i++) {
        ck_assert_int_eq(mely_watch_remove(w[i]), 0);
        close(once.p[i][0]);
        close(once.p[i][1]);
    }
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- removal of a queued event ----------------------------------------------------------- */

/* Who removes the watch whose event is queued behind X (an event of its color). */
enum remover { BY_OWN_COLOR, BY_OTHER_COLOR, BY_FOREIGN_THREAD, NREMOVERS };
static const char *const remover_names[] = {"its own color", "another color's handler",
                                            "a foreign thread"};

enum { QUEUED_ROUNDS = 20, WAIT_MS = 5000 };

#define QUEUED_COLOR ((mely_color_t)2) /* owned by worker 0 of 2 */

static struct {
    enum remover by;
    int p[2];
    mely_watch_t *w;
    int *warg;                /* freed once removed */
    atomic_bool d_running, release, x_waiting, removed;
    atomic_uint w_runs, x_done;
    uint64_t io_before;
    unsigned queued_rounds;   /* X saw the watch's event queued behind it */
} rq;

static void rq_watch(int fd, unsigned ready, void *arg)
{
    (void)fd;
    (void)ready;
    (void)arg;
    atomic_fetch_add(&rq.w_runs, 1);
    note("%s: a removed watch's queued event ran", remover_names[rq.by]);
}

/* Keeps worker 0 busy while the pipe becomes ready and X is posted. */
static void rq_blocker(void *arg)
{
    (void)arg;
    atomic_store(&rq.d_running, true);
    if (!wait_flag(&rq.release, WAIT_MS))
        note("the blocker was not released");
}

static void rq_remove(void *arg)
{
    (void)arg;
    int err = mely_watch_remove(rq.w);
    if (err)
        note("mely_watch_remove: %s", mely_strerror(err));
    atomic_store(&rq.removed, true);
}

/* X: ahead of the watch's event in its color; the watch is removed while X runs. */
static void rq_x(void *arg)
{
    (void)arg;
    mely_stats_t st;
    uint64_t io = 0;
    for (unsigned w = 0; w < mely_workers(&rt); w++)
        if (mely_worker_stats(&rt, w, &st) == 0)
            io += st.io_ready;
    if (io > rq.io_before)
        rq.queued_rounds++;
    if (rq.by == BY_OWN_COLOR) {
        rq_remove(NULL);
        free(rq.warg); /* synchronous from the watch's color */
        rq.warg = NULL;
    } else {
        atomic_store(&rq.x_waiting, true);
        if (!wait_flag(&rq.removed, WAIT_MS))
            note("%s did not remove the watch within %u ms", remover_names[rq.by], WAIT_MS);
    }
    atomic_fetch_add(&rq.x_done, 1);
}

static void rq_round(unsigned r)
{
    atomic_store(&rq.d_running, false);
    atomic_store(&rq.release, false);
    atomic_store(&rq.x_waiting, false);
    atomic_store(&rq.removed, false);
    if (mely_post(&rt, MELY_COLOR_PINNED(0), rq_blocker, NULL) != 0 ||
        !wait_flag(&rq.d_running, WAIT_MS)) {
        note("round %u: the blocker did not start", r);
        return;
    }
    if (pipe2(rq.p, O_NONBLOCK | O_CLOEXEC) != 0) {
        note("pipe: %s", strerror(errno));
        return;
    }
    rq.warg = malloc(sizeof(int));
    rq.io_before = 0;
    for (unsigned w = 0; w < mely_workers(&rt); w++) {
        mely_stats_t st;
        if (mely_worker_stats(&rt, w, &st) == 0)
            rq.io_before += st.io_ready;
    }
    int err = mely_watch(&rt, rq.p[0], MELY_READ, MELY_TO(QUEUED_COLOR), rq_watch, rq.warg, &rq.w);
    if (err)
        note("mely_watch: %s", mely_strerror(err));
    if (write(rq.p[1], "x", 1) != 1)
        note("write: %s", strerror(errno));
    unsigned x_before = atomic_load(&rq.x_done);
    if (mely_post(&rt, QUEUED_COLOR, rq_x, NULL) != 0)
        note("post X failed");
    atomic_store(&rq.release, true);
    if (rq.by != BY_OWN_COLOR) {
        if (!wait_flag(&rq.x_waiting, WAIT_MS))
            note("round %u: X did not run", r);
        else if (rq.by == BY_FOREIGN_THREAD)
            rq_remove(NULL);
        else if (mely_post(&rt, MELY_COLOR_PINNED(1), rq_remove, NULL) != 0)
            note("post to worker 1 failed");
    }
    if (!wait_count(&rq.x_done, x_before + 1, WAIT_MS))
        note("round %u: X did not finish", r);
    sleep_us(20000); /* the queued event would run now */
    free(rq.warg);
    rq.warg = NULL;
    close(rq.p[0]);
    close(rq.p[1]);
}

static void *rq_driver(void *arg)
{
    (void)arg;
    unsigned rounds = scaled(QUEUED_ROUNDS, 10, 1000);
    for (unsigned r = 0; r < rounds; r++)
        rq_round(r);
    mely_stop(&rt);
    return NULL;
}

/*
 * Worker 0 is held by a blocker while its pipe becomes ready and an event X
 * of the watch's color is posted; once released, the watch's event queues
 * behind X, and X has it removed (by itself, by a handler on worker 1, by a
 * foreign thread) while it runs: the queued event never starts. (That the
 * event was queued before the removal shows in io_ready; the poll between the
 * blocker's batch and X's, doc/io.md, makes it so in most rounds.)
 */
START_TEST(removal_cancels_a_queued_event)
{
    memset(&rq, 0, sizeof(rq));
    rq.by = (enum remover)(_i % NREMOVERS);
    init_runtime_steal(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT,
                       _i >= NREMOVERS ? "base" : NULL);
    ck_assert_int_eq(mely_color_owner(&rt, QUEUED_COLOR), 0);
    run_with_helper(&rt, rq_driver, NULL, 120, remover_names[rq.by]);
    ck_assert_uint_eq(atomic_load(&rq.w_runs), 0);
    printf("removal by %s: the event was queued before the removal in %u of %u rounds\n",
           remover_names[rq.by], rq.queued_rounds, scaled(QUEUED_ROUNDS, 10, 1000));
    ck_assert_msg(rq.queued_rounds > 0,
                  "removal by %s: in no round was the watch's event queued while X ran (the "
                  "test proved nothing about queued events)",
                  remover_names[rq.by]);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- removal while the handler runs ------------------------------------------------------------ */

static struct {
    int p[2];
    mely_watch_t *w;
    bool then;                    /* mely_watch_remove_then() */
    atomic_uint fins;
    atomic_bool fin_after_handler; /* fin ran once the handler had returned */
    atomic_bool running, remove_called, removed;
    atomic_uint runs;
    bool returned_before_handler; /* the removal returned while the handler still ran */
    atomic_bool handler_done;
} rr;

static void rr_watch(int fd, unsigned ready, void *arg)
{
    (void)fd;
    (void)ready;
    (void)arg;
    if (atomic_fetch_add(&rr.runs, 1) != 0)
        note("the handler started again after its removal");
    atomic_store(&rr.running, true);
    if (!wait_flag(&rr.remove_called, WAIT_MS))
        note("the watch was not removed");
    sleep_us(20000); /* still running while mely_watch_remove() runs elsewhere */
    atomic_store(&rr.handler_done, true);
}

/* mely_watch_remove_then()'s fin: runs once the handler is not running. */
static void rr_fin(void *arg)
{
    (void)arg;
    atomic_store(&rr.fin_after_handler, atomic_load(&rr.handler_done));
    atomic_fetch_add(&rr.fins, 1);
}

static void *rr_driver(void *arg)
{
    (void)arg;
    if (write(rr.p[1], "x", 1) != 1 || !wait_flag(&rr.running, WAIT_MS)) {
        note("the handler did not run");
    } else {
        atomic_store(&rr.remove_called, true);
        int err = rr.then ? mely_watch_remove_then(rr.w, rr_fin, NULL) : mely_watch_remove(rr.w);
        if (err)
            note("mely_watch_remove: %s", mely_strerror(err));
        rr.returned_before_handler = !atomic_load(&rr.handler_done);
        atomic_store(&rr.removed, true);
        sleep_us(50000); /* the pipe stays readable: a live watch would run again */
    }
    mely_stop(&rt);
    return NULL;
}

/*
 * A foreign thread removes a watch while its handler runs (the pipe stays
 * readable, the handler never reads): the run finishes, and is the last.
 * With mely_watch_remove_then(), fin runs once, after the handler returned.
 */
START_TEST(removal_while_running_is_the_last_run)
{
    const struct shape *sh = &watch_shapes[_i / 2];
    memset(&rr, 0, sizeof(rr));
    rr.then = _i % 2;
    init_runtime_shape(&rt, sh, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    make_pipe(rr.p);
    ck_assert_int_eq(mely_watch(&rt, rr.p[0], MELY_READ, MELY_TO(5), rr_watch, NULL, &rr.w), 0);
    run_with_helper(&rt, rr_driver, NULL, 30, shape_name(sh));
    ck_assert_uint_eq(atomic_load(&rr.runs), 1);
    printf("foreign %s during a run (%s): returned %s the handler\n",
           rr.then ? "mely_watch_remove_then" : "mely_watch_remove", shape_name(sh),
           rr.returned_before_handler ? "before" : "after");
    if (rr.then) {
        ck_assert_uint_eq(atomic_load(&rr.fins), 1);
        ck_assert_msg(atomic_load(&rr.fin_after_handler),
                      "mely_watch_remove_then's fin ran while the handler still ran");
    }
    close(rr.p[0]);
    close(rr.p[1]);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- removal racing with readiness --------------------------------------------------------------- */

enum { RACE_WATCHES = 300, RACE_LIMIT_MS = 20000 };

#define TOKEN_MAGIC 0x5a17c0deu

/* The watch's argument; the own-color remover frees it right after removing. */
struct token {
    uint32_t magic;
    unsigned i;
};

struct race_watch {
    int sv[2];
    mely_watch_t *w;
    struct token *tok;
    enum remover by;
    bool then;              /* from elsewhere: mely_watch_remove_then() frees the token */
    unsigned remove_after;  /* own color: removes itself at this run */
    atomic_bool removed;    /* set right after mely_watch_remove() returned */
    atomic_uint starts, late;
    atomic_int inside;
};

static struct {
    struct race_watch *w;
    unsigned n;
    atomic_uint removed;
    atomic_bool stop_maker;
} race;

static void race_removed(struct race_watch *rw)
{
    atomic_store(&rw->removed, true);
    atomic_fetch_add(&race.removed, 1);
}

static void race_handler(int fd, unsigned ready, void *arg)
{
    struct token *tok = arg;
    (void)ready;
    if (tok->magic != TOKEN_MAGIC) {
        note("a watch ran with a freed argument (fd %d)", fd);
        return;
    }
    struct race_watch *rw = &race.w[tok->i];
    if (atomic_load(&rw->removed))
        atomic_fetch_add(&rw->late, 1);
    unsigned run = atomic_fetch_add(&rw->starts, 1) + 1;
    if (atomic_fetch_add(&rw->inside, 1) != 0)
        note("watch %u runs twice at once", tok->i);
    drain(fd);
    atomic_fetch_sub(&rw->inside, 1);
    if (rw->by == BY_OWN_COLOR && run == rw->remove_after) {
        int err = mely_watch_remove(rw->w);
        if (err)
            note("watch %u: removing itself: %s", tok->i, mely_strerror(err));
        race_removed(rw);
        tok->magic = 0;
        free(tok); /* synchronous: the handler runs nowhere else */
    }
}

/* mely_watch_remove_then()'s fin: the handler will not run again. */
static void race_free_token(void *arg)
{
    struct token *tok = arg;
    tok->magic = 0;
    free(tok);
}

/* Removes from outside the watch's color. */
static void race_remove_elsewhere(struct race_watch *rw)
{
    int err = rw->then ? mely_watch_remove_then(rw->w, race_free_token, rw->tok)
                       : mely_watch_remove(rw->w);
    if (err)
        note("removing watch %u by %s: %s", (unsigned)(rw - race.w), remover_names[rw->by],
             mely_strerror(err));
    race_removed(rw);
}

static void race_remove_event(void *arg)
{
    race_remove_elsewhere(arg);
}

/* Makes every watch ready, over and over, until all are removed. */
static void *race_maker(void *arg)
{
    (void)arg;
    while (!atomic_load(&race.stop_maker)) {
        for (unsigned i = 0; i < race.n; i++)
            if (write(race.w[i].sv[1], "x", 1) < 0 && errno != EAGAIN)
                note("maker: write: %s", strerror(errno));
        sleep_us(100);
    }
    return NULL;
}

/* Removes the foreign thread's share directly and posts removal events for
 * the other colors' share, at random moments. */
static void *race_driver(void *arg)
{
    (void)arg;
    pthread_t maker;
    if (pthread_create(&maker, NULL, race_maker, NULL) != 0) {
        note("pthread_create failed");
        mely_stop(&rt);
        return NULL;
    }
    unsigned seed = 12345;
    for (unsigned i = 0; i < race.n; i++) {
        struct race_watch *rw = &race.w[(i * 7919u) % race.n];
        sleep_us(rand_r(&seed) % 300);
        if (rw->by == BY_FOREIGN_THREAD) {
            race_remove_elsewhere(rw);
        } else if (rw->by == BY_OTHER_COLOR) {
            mely_color_t c = 30000 + (unsigned)(rw - race.w) % 64;
            if (mely_post(&rt, c, race_remove_event, rw) != 0)
                note("post of a removal failed");
        }
    }
    if (!wait_count(&race.removed, race.n, RACE_LIMIT_MS))
        note("%u of %u watches removed within %u ms", atomic_load(&race.removed), race.n,
             RACE_LIMIT_MS);
    sleep_us(20000);
    atomic_store(&race.stop_maker, true);
    pthread_join(maker, NULL);
    mely_stop(&rt);
    return NULL;
}

/*
 * 300 watched socketpairs made ready over and over by one thread while they
 * are removed: a third by a foreign thread, a third by events of other colors,
 * a third by their own handler after 1 to 5 runs (which then frees the
 * handler's argument); half of the removals from elsewhere are
 * mely_watch_remove_then(), whose fin frees the argument. A handler never starts after a removal from its own
 * color returned; after a removal from elsewhere, at most the one run that
 * had already started may still begin (the removal and the worker race to
 * it).
 */
START_TEST(removal_races_with_readiness)
{
    const struct shape *sh = &watch_shapes[_i];

    memset(&race, 0, sizeof(race));
    race.n = scaled(RACE_WATCHES, 60, 3000);
    ck_assert_uint_ge(raise_fd_limit(2 * race.n + 100), 2 * race.n + 100);
    race.w = calloc(race.n, sizeof(*race.w));
    ck_assert_ptr_nonnull(race.w);
    init_runtime_shape(&rt, sh, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    for (unsigned i = 0; i < race.n; i++) {
        struct race_watch *rw = &race.w[i];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, rw->sv), 0);
        rw->by = (enum remover)(i % NREMOVERS);
        rw->then = (i / NREMOVERS) % 2;
        rw->remove_after = 1 + i % 5;
        rw->tok = malloc(sizeof(*rw->tok));
        ck_assert_ptr_nonnull(rw->tok);
        *rw->tok = (struct token){TOKEN_MAGIC, i};
        mely_to_t to = {100 + i, MELY_PRIO_DEFAULT, &d_heavy};
        ck_assert_int_eq(mely_watch(&rt, rw->sv[0], MELY_READ, to, race_handler, rw->tok, &rw->w),
                         0);
    }
    run_with_helper(&rt, race_driver, NULL, 60, shape_name(sh));

    unsigned late = 0, starts = 0;
    for (unsigned i = 0; i < race.n; i++) {
        struct race_watch *rw = &race.w[i];
        ck_assert_msg(atomic_load(&rw->removed), "watch %u not removed", i);
        unsigned l = atomic_load(&rw->late);
        late += l;
        starts += atomic_load(&rw->starts);
        ck_assert_msg(rw->by == BY_OWN_COLOR ? l == 0 : l <= 1,
                      "%s: watch %u, removed by %s, started %u times after its removal returned",
                      shape_name(sh), i, remover_names[rw->by], l);
        if (rw->by != BY_OWN_COLOR && !rw->then)
            free(rw->tok);
        close(rw->sv[0]);
        close(rw->sv[1]);
    }
    printf("removal race (%s): %u watches, %u runs, %u started as a removal from elsewhere "
           "returned\n",
           shape_name(sh), race.n, starts, late);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    free(race.w);
}
END_TEST

/* ---- stolen and moved colors take their watches ---------------------------------------------------- */

enum { STEAL_COLORS = 8, STEAL_LOAD = 40, STEAL_SPIN_US = 300, STEAL_MSGS = 200 };

static struct {
    mely_color_t color[STEAL_COLORS];
    int sv[STEAL_COLORS][2];
    mely_watch_t *w[STEAL_COLORS];
    uint32_t next[STEAL_COLORS];    /* the sequence number expected next (its color only) */
    atomic_int on_worker1[STEAL_COLORS]; /* watch runs on worker 1 */
    atomic_uint received, load_done;
} st;

static void st_spin(void *arg)
{
    (void)arg;
    uint64_t end = now_ns() + STEAL_SPIN_US * 1000ull;
    while (now_ns() < end) {
    }
    atomic_fetch_add(&st.load_done, 1);
}

/* Reads sequence numbers (one datagram each), in order; a running color
 * never moves, so the owner is the worker running it. */
static void st_watch(int fd, unsigned ready, void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    uint32_t seq;
    (void)ready;
    int self = mely_current_worker();
    if (mely_color_owner(&rt, st.color[i]) != self)
        note("color %u runs on worker %d but the map names %d", st.color[i], self,
             mely_color_owner(&rt, st.color[i]));
    if (self == 1)
        atomic_fetch_add(&st.on_worker1[i], 1);
    while (read(fd, &seq, sizeof(seq)) == (ssize_t)sizeof(seq)) {
        if (seq != st.next[i])
            note("color %u: message %u arrived when %u was due", st.color[i], seq, st.next[i]);
        st.next[i] = seq + 1;
        atomic_fetch_add(&st.received, 1);
    }
}

static void *st_writer(void *arg)
{
    (void)arg;
    for (uint32_t k = 0; k < STEAL_MSGS; k++) {
        for (unsigned i = 0; i < STEAL_COLORS; i++)
            if (write(st.sv[i][1], &k, sizeof(k)) != (ssize_t)sizeof(k))
                note("writer: %s", strerror(errno));
        sleep_us(1000);
    }
    if (!wait_count(&st.received, STEAL_COLORS * STEAL_MSGS, 10000))
        note("%u of %u messages handled", atomic_load(&st.received), STEAL_COLORS * STEAL_MSGS);
    if (!wait_count(&st.load_done, STEAL_COLORS * STEAL_LOAD, 10000))
        note("the load did not finish");
    mely_stop(&rt);
    return NULL;
}

/*
 * Eight colors of worker 0, each with a watched datagram socketpair and heavy
 * events queued, while a thread sends each a numbered message every 1 ms:
 * worker 1 steals colors (stealing "base" or "all"); their messages keep
 * arriving, in order, and are handled on the thief; each watch that ran on
 * worker 1 had moved to its poller (watch_moves), and no watch moved more
 * often than colors were stolen.
 */
START_TEST(stolen_color_takes_its_watch)
{
    static const char *const policies[] = {"base", "all"};
    const char *policy = policies[_i];

    memset(&st, 0, sizeof(st));
    init_runtime_steal(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, policy);
    for (unsigned i = 0; i < STEAL_COLORS; i++) {
        st.color[i] = 200 + 2 * i; /* even: worker 0's */
        ck_assert_int_eq(mely_color_owner(&rt, st.color[i]), 0);
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, st.sv[i]), 0);
        mely_to_t to = {st.color[i], MELY_PRIO_DEFAULT, &d_heavy};
        ck_assert_int_eq(
            mely_watch(&rt, st.sv[i][0], MELY_READ, to, st_watch, (void *)(uintptr_t)i, &st.w[i]),
            0);
    }
    for (unsigned k = 0; k < STEAL_LOAD; k++)
        for (unsigned i = 0; i < STEAL_COLORS; i++)
            ck_assert_int_eq(
                mely_post_ex(&rt, st.color[i], MELY_PRIO_DEFAULT, &d_heavy, st_spin, NULL, 0), 0);
    run_with_helper(&rt, st_writer, NULL, 60, policy);

    mely_stats_t w1, sum;
    ck_assert_int_eq(stats_sum(&rt, &sum), 0);
    ck_assert_int_eq(mely_worker_stats(&rt, 1, &w1), 0);
    unsigned moved_colors = 0;
    for (unsigned i = 0; i < STEAL_COLORS; i++) {
        ck_assert_uint_eq(st.next[i], STEAL_MSGS);
        moved_colors += atomic_load(&st.on_worker1[i]) > 0;
    }
    printf("stolen watches (%s): %" PRIu64 " steals, %u of %u watches ran on the thief, "
           "watch_moves %" PRIu64 " (worker 1: %" PRIu64 ")\n",
           policy, sum.steals, moved_colors, STEAL_COLORS, sum.watch_moves, w1.watch_moves);
    ck_assert_msg(sum.steals > 0, "%s: nothing stolen", policy);
    ck_assert_msg(moved_colors > 0, "%s: %" PRIu64 " steals, but no watch ran on the thief", policy,
                  sum.steals);
    ck_assert_msg(w1.watch_moves >= 1, "%s: %u watches ran on worker 1, watch_moves there is 0",
                  policy, moved_colors);
    ck_assert_msg(sum.watch_moves <= sum.steals,
                  "%s: %" PRIu64 " watch moves for %" PRIu64 " steals (one watch per color)", policy,
                  sum.watch_moves, sum.steals);
    for (unsigned i = 0; i < STEAL_COLORS; i++) {
        ck_assert_int_eq(mely_watch_remove(st.w[i]), 0);
        close(st.sv[i][0]);
        close(st.sv[i][1]);
    }
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

#define MOVE_COLOR ((mely_color_t)4) /* worker 0's of 2 */

static struct {
    int sv[2];
    mely_watch_t *w;
    atomic_uint runs;
    atomic_int worker;
} mv;

static void mv_watch(int fd, unsigned ready, void *arg)
{
    (void)ready;
    (void)arg;
    drain(fd);
    atomic_store(&mv.worker, mely_current_worker());
    atomic_fetch_add(&mv.runs, 1);
}

/* Moves the idle color (retrying while the runtime still calls it busy),
 * pokes it, and checks where its watch ran. */
static void mv_step(unsigned k, unsigned to)
{
    int err;
    uint64_t deadline = now_ns() + 1000000000ull;
    while ((err = mely_color_move(&rt, MOVE_COLOR, to)) == MELY_EBUSY && now_ns() < deadline)
        sleep_us(100);
    if (err)
        note("step %u: mely_color_move(%u): %s", k, to, mely_strerror(err));
    mely_stats_t before;
    mely_worker_stats(&rt, to, &before);
    unsigned runs = atomic_load(&mv.runs);
    if (write(mv.sv[1], "x", 1) != 1 || !wait_count(&mv.runs, runs + 1, WAIT_MS)) {
        note("step %u: the watch did not run after the move to worker %u", k, to);
        return;
    }
    if (atomic_load(&mv.worker) != (int)to)
        note("step %u: moved to worker %u, the watch ran on worker %d", k, to,
             atomic_load(&mv.worker));
    if (!wait_stat(&rt, to, offsetof(mely_stats_t, watch_moves), before.watch_moves, WAIT_MS))
        note("step %u: the watch ran on worker %u, whose watch_moves stayed %" PRIu64, k, to,
             before.watch_moves);
}

static void *mv_driver(void *arg)
{
    (void)arg;
    /* Step 0: moved to worker 1 before mely_run(), by the test. */
    if (!wait_count(&mv.runs, 1, WAIT_MS))
        note("the watch did not run for data written before mely_run()");
    else if (atomic_load(&mv.worker) != 1)
        note("moved to worker 1 before the run, the watch ran on worker %d",
             atomic_load(&mv.worker));
    if (!wait_stat(&rt, 1, offsetof(mely_stats_t, watch_moves), 0, WAIT_MS))
        note("the watch ran on worker 1 (its color moved there before the run), whose "
             "watch_moves is 0");
    mv_step(1, 0);
    mv_step(2, 1);
    mv_step(3, 0);
    mely_stop(&rt);
    return NULL;
}

/*
 * A color moved with mely_color_move() (before mely_run(), and while idle
 * during the run, back and forth) takes its watch along: the handler runs on
 * the new owner, whose watch_moves grows.
 */
START_TEST(moved_color_takes_its_watch)
{
    memset(&mv, 0, sizeof(mv));
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, mv.sv), 0);
    ck_assert_int_eq(mely_color_owner(&rt, MOVE_COLOR), 0);
    ck_assert_int_eq(mely_watch(&rt, mv.sv[0], MELY_READ, MELY_TO(MOVE_COLOR), mv_watch, NULL, &mv.w),
                     0);
    ck_assert_int_eq(mely_color_move(&rt, MOVE_COLOR, 1), 0);
    ck_assert_int_eq(write(mv.sv[1], "x", 1), 1);
    run_with_helper(&rt, mv_driver, NULL, 30, "mely_color_move");
    ck_assert_int_eq(mely_watch_remove(mv.w), 0);
    close(mv.sv[0]);
    close(mv.sv[1]);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- one-shot watches ---------------------------------------------------------------------------- */

static struct {
    int p[2];
    mely_watch_t *w;
    atomic_uint runs;
    atomic_bool self_rearm;
    atomic_int rearm_err;
} os;

/* Without self_rearm: leaves the data there. With it: reads one byte and
 * arms the watch again. */
static void os_watch(int fd, unsigned ready, void *arg)
{
    (void)arg;
    if (!(ready & MELY_READ))
        note("one-shot handler: ready 0x%x", ready);
    atomic_fetch_add(&os.runs, 1);
    if (atomic_load(&os.self_rearm)) {
        char b;
        if (read(fd, &b, 1) != 1)
            note("one-shot handler ran with nothing to read");
        int err = mely_watch_rearm(os.w);
        if (err)
            atomic_store(&os.rearm_err, err);
    }
}

/* Waits for runs to reach n, then 50 ms more: it must stay at n. */
static bool os_settles_at(unsigned n, const char *when)
{
    bool reached = wait_count(&os.runs, n, WAIT_MS);
    sleep_us(50000);
    unsigned runs = atomic_load(&os.runs);
    if (!reached || runs != n)
        note("%s: %u runs, expected %u", when, runs, n);
    return reached && runs == n;
}

static void *os_driver(void *arg)
{
    (void)arg;
    int err;
    if (write(os.p[1], "abc", 3) != 3 || !os_settles_at(1, "data left unread"))
        goto out;
    if ((err = mely_watch_rearm(os.w)) != 0)
        note("mely_watch_rearm: %s", mely_strerror(err));
    if (!os_settles_at(2, "rearmed once"))
        goto out;
    /* The handler now reads a byte a run and rearms: three bytes, three runs. */
    atomic_store(&os.self_rearm, true);
    if ((err = mely_watch_rearm(os.w)) != 0)
        note("mely_watch_rearm: %s", mely_strerror(err));
    if (!os_settles_at(5, "rearmed from the handler"))
        goto out;
    if (write(os.p[1], "de", 2) != 2)
        note("write: %s", strerror(errno));
    os_settles_at(7, "more data, watch armed by its handler");
out:
    mely_stop(&rt);
    return NULL;
}

/*
 * MELY_ONESHOT: one run, then nothing while the data stays unread; each
 * mely_watch_rearm() (from a foreign thread, from the handler) allows one
 * more run; a rearmed watch on an empty pipe waits for data. Rearming a NULL
 * or level-triggered watch is MELY_EINVAL.
 */
START_TEST(oneshot_and_rearm)
{
    memset(&os, 0, sizeof(os));
    init_runtime_shape(&rt, &watch_shapes[_i], MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    make_pipe(os.p);
    ck_assert_int_eq(
        mely_watch(&rt, os.p[0], MELY_READ | MELY_ONESHOT, MELY_TO(7), os_watch, NULL, &os.w), 0);
    run_with_helper(&rt, os_driver, NULL, 30, "one-shot");
    ck_assert_int_eq(atomic_load(&os.rearm_err), 0);

    mely_watch_t *lt;
    ck_assert_int_eq(mely_watch_rearm(NULL), MELY_EINVAL);
    ck_assert_int_eq(mely_watch(&rt, os.p[0], MELY_READ, MELY_TO(7), os_watch, NULL, &lt), 0);
    ck_assert_int_eq(mely_watch_rearm(lt), MELY_EINVAL);
    ck_assert_int_eq(mely_watch_remove(lt), 0);
    ck_assert_int_eq(mely_watch_remove(os.w), 0);
    close(os.p[0]);
    close(os.p[1]);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* Rearms from a foreign thread, round after round, a one-shot watch that is
 * always ready (its pipe is never read): each mely_watch_rearm() must give
 * exactly one more run. */
enum { REARM_ROUNDS = 2000 };

static struct {
    int p[2];
    mely_watch_t *w;
    unsigned rounds, done;
    atomic_uint runs;
} rf;

static void rf_watch(int fd, unsigned ready, void *arg)
{
    (void)fd;
    (void)ready;
    (void)arg;
    atomic_fetch_add(&rf.runs, 1);
}

static void *rf_driver(void *arg)
{
    (void)arg;
    if (!wait_count(&rf.runs, 1, WAIT_MS)) {
        note("the one-shot watch never ran");
        goto out;
    }
    /* Each round wakes a parked worker: on a loaded machine with 8 workers
     * on 2 CPUs that took 30 ms a round, and 2,000 rounds outlasted the
     * test's 60 s. So the rounds stop at 20 s too, once there were 200. */
    uint64_t t0 = now_ns();
    for (rf.done = 0; rf.done < rf.rounds; rf.done++) {
        if (rf.done >= 200 && now_ns() - t0 > 20000000000ull) {
            printf("one-shot rearms: %u rounds in 20 s (a loaded machine)\n", rf.done);
            break;
        }
        int err = mely_watch_rearm(rf.w);
        if (err) {
            note("round %u: mely_watch_rearm: %s", rf.done, mely_strerror(err));
            break;
        }
        if (!wait_count(&rf.runs, rf.done + 2, 1000)) {
            note("round %u: no run within 1 s of mely_watch_rearm() (the fd stays readable; "
                 "%u runs)",
                 rf.done, atomic_load(&rf.runs));
            break;
        }
    }
    sleep_us(20000);
out:
    mely_stop(&rt);
    return NULL;
}

/*
 * A one-shot watch on an fd that stays readable, rearmed by a foreign thread
 * 2,000 times (or for 20 s, at least 200), each time once the previous run
 * happened: every rearm gives one run, whatever the timing between the
 * rearm and the poller.
 */
START_TEST(oneshot_rearm_from_a_foreign_thread)
{
    memset(&rf, 0, sizeof(rf));
    rf.rounds = scaled(REARM_ROUNDS, 200, 1000000);
    init_runtime_shape(&rt, &watch_shapes[_i], MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    make_pipe(rf.p);
    ck_assert_int_eq(write(rf.p[1], "x", 1), 1);
    ck_assert_int_eq(
        mely_watch(&rt, rf.p[0], MELY_READ | MELY_ONESHOT, MELY_TO(11), rf_watch, NULL, &rf.w), 0);
    run_with_helper(&rt, rf_driver, NULL, 60, shape_name(&watch_shapes[_i]));
    ck_assert_uint_ge(rf.done, 200);
    ck_assert_uint_eq(atomic_load(&rf.runs), rf.done + 1);
    ck_assert_int_eq(mely_watch_remove(rf.w), 0);
    close(rf.p[0]);
    close(rf.p[1]);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- mely_close -------------------------------------------------------------------------------- */

static struct {
    int sv[2];
    bool from_own_color;
    atomic_bool closed;
    atomic_uint wruns, rruns, late;
    atomic_int close_err, getfd_errno;
} cz;

static void cz_check_closed(void)
{
    if (atomic_load(&cz.closed))
        atomic_fetch_add(&cz.late, 1);
}

static void cz_close_now(void)
{
    int err = mely_close(&rt, cz.sv[0]);
    atomic_store(&cz.close_err, err);
    errno = 0;
    if (fcntl(cz.sv[0], F_GETFD) != -1)
        atomic_store(&cz.getfd_errno, -1);
    else
        atomic_store(&cz.getfd_errno, errno);
    atomic_store(&cz.closed, true);
}

/* The write watch is always ready: it runs over and over; from its own
 * color it closes the fd at its tenth run. */
static void cz_write(int fd, unsigned ready, void *arg)
{
    (void)fd;
    (void)ready;
    (void)arg;
    cz_check_closed();
    if (atomic_fetch_add(&cz.wruns, 1) + 1 == 10 && cz.from_own_color)
        cz_close_now();
}

static void cz_read(int fd, unsigned ready, void *arg)
{
    (void)ready;
    (void)arg;
    cz_check_closed();
    atomic_fetch_add(&cz.rruns, 1);
    drain(fd);
}

static void *cz_driver(void *arg)
{
    (void)arg;
    if (!wait_count(&cz.wruns, 10, WAIT_MS) || !wait_count(&cz.rruns, 1, WAIT_MS))
        note("the watches did not run");
    if (!cz.from_own_color)
        cz_close_now();
    else if (!wait_flag(&cz.closed, WAIT_MS))
        note("the handler did not close");
    sleep_us(50000);
    mely_stop(&rt);
    return NULL;
}

/*
 * mely_close() on a socket with a read and an always-ready write watch (both
 * in one color), from that color or from a foreign thread: it returns 0, the
 * fd is closed (F_GETFD: EBADF), and the handlers never start afterwards (from
 * elsewhere: at most one run already under way). mely_close() of a closed or
 * unknown fd is -EBADF; of an unwatched fd, a plain close.
 */
START_TEST(close_removes_the_watches_then_closes)
{
    memset(&cz, 0, sizeof(cz));
    cz.from_own_color = _i == 0;
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, cz.sv), 0);
    mely_watch_t *r, *w;
    ck_assert_int_eq(mely_watch(&rt, cz.sv[0], MELY_READ, MELY_TO(9), cz_read, NULL, &r), 0);
    ck_assert_int_eq(mely_watch(&rt, cz.sv[0], MELY_WRITE, MELY_TO(9), cz_write, NULL, &w), 0);
    /* Written before the run: the first poll sees both watches ready. */
    ck_assert_int_eq(write(cz.sv[1], "x", 1), 1);
    run_with_helper(&rt, cz_driver, NULL, 30, "mely_close");
    ck_assert_int_eq(atomic_load(&cz.close_err), 0);
    ck_assert_msg(atomic_load(&cz.getfd_errno) == EBADF,
                  "after mely_close, F_GETFD: %s", atomic_load(&cz.getfd_errno) < 0 ? "succeeded" :
                  strerror(atomic_load(&cz.getfd_errno)));
    ck_assert_msg(atomic_load(&cz.late) <= (cz.from_own_color ? 0u : 1u),
                  "handlers started %u times after mely_close() returned (from %s)",
                  atomic_load(&cz.late), cz.from_own_color ? "their color" : "a foreign thread");

    ck_assert_int_eq(mely_close(&rt, cz.sv[0]), -EBADF);
    ck_assert_int_eq(mely_close(&rt, -1), -EBADF);
    ck_assert_int_eq(mely_close(&rt, 1 << 20), -EBADF);
    int p[2];
    make_pipe(p);
    ck_assert_int_eq(mely_close(&rt, p[0]), 0);
    ck_assert_int_eq(fcntl(p[0], F_GETFD), -1);
    close(p[1]);
    close(cz.sv[1]);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- errors ------------------------------------------------------------------------------------ */

static atomic_uint err_runs;

static void err_watch(int fd, unsigned ready, void *arg)
{
    (void)ready;
    (void)arg;
    drain(fd);
    if (atomic_fetch_add(&err_runs, 1) == 0)
        mely_stop(&rt);
}

/*
 * Every documented argument error, none fatal: a closed fd -EBADF, a regular
 * file -EPERM, bad `what` MELY_EINVAL, bad colors MELY_ECOLOR, bad priorities
 * MELY_EPRIO, NULL fn or out MELY_EINVAL, an uninitialized runtime
 * MELY_ESHUTDOWN; NULL handles MELY_EINVAL. Then a good watch works.
 */
START_TEST(watch_errors)
{
    mely_t none = {0};
    mely_watch_t *w = NULL;
    int p[2];
    make_pipe(p);
    ck_assert_int_eq(mely_watch(&none, p[0], MELY_READ, MELY_TO(1), err_watch, NULL, &w),
                     MELY_ESHUTDOWN);
    ck_assert_int_eq(mely_close(&none, p[0]), MELY_ESHUTDOWN);

    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    int closed[2];
    make_pipe(closed);
    close(closed[0]);
    close(closed[1]);
    ck_assert_int_eq(mely_watch(&rt, closed[0], MELY_READ, MELY_TO(1), err_watch, NULL, &w), -EBADF);
    ck_assert_int_eq(mely_watch(&rt, -1, MELY_READ, MELY_TO(1), err_watch, NULL, &w), -EBADF);
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(mely_watch(&rt, fileno(f), MELY_READ, MELY_TO(1), err_watch, NULL, &w), -EPERM);
    /* a device epoll refuses: the error, and nothing from libevent on stderr */
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC), saved = dup(2);
    ck_assert(null >= 0 && saved >= 0);
    ck_assert_int_eq(dup2(fileno(f), 2), 2);
    int got = mely_watch(&rt, null, MELY_READ, MELY_TO(1), err_watch, NULL, &w);
    ck_assert_int_eq(dup2(saved, 2), 2);
    ck_assert_int_eq(got, -EPERM);
    ck_assert_int_eq(lseek(fileno(f), 0, SEEK_END), 0);
    close(null);
    close(saved);
    fclose(f);

    static const unsigned bad_what[] = {0, MELY_ONESHOT, MELY_SIGNAL, MELY_READ | MELY_SIGNAL,
                                        MELY_READ | 0x10, 0x80000000u | MELY_WRITE};
    for (int i = 0; i < NELEM(bad_what); i++)
        ck_assert_msg(mely_watch(&rt, p[0], bad_what[i], MELY_TO(1), err_watch, NULL, &w) ==
                          MELY_EINVAL,
                      "what 0x%x accepted", bad_what[i]);
    static const mely_color_t bad_colors[] = {MELY_COLOR_PINNED(2), MELY_COLORS + MELY_MAX_WORKERS,
                                              UINT32_MAX};
    for (int i = 0; i < NELEM(bad_colors); i++)
        ck_assert_int_eq(mely_watch(&rt, p[0], MELY_READ, MELY_TO(bad_colors[i]), err_watch, NULL, &w),
                         MELY_ECOLOR);
    static const int bad_prios[] = {-1, MELY_PRIO_MAX + 1, 1000};
    for (int i = 0; i < NELEM(bad_prios); i++) {
        mely_to_t to = {1, bad_prios[i], NULL};
        ck_assert_int_eq(mely_watch(&rt, p[0], MELY_READ, to, err_watch, NULL, &w), MELY_EPRIO);
    }
    ck_assert_int_eq(mely_watch(&rt, p[0], MELY_READ, MELY_TO(1), NULL, NULL, &w), MELY_EINVAL);
    ck_assert_int_eq(mely_watch(&rt, p[0], MELY_READ, MELY_TO(1), err_watch, NULL, NULL), MELY_EINVAL);
    ck_assert_int_eq(mely_watch_remove(NULL), MELY_EINVAL);
    ck_assert_int_eq(mely_watch_rearm(NULL), MELY_EINVAL);

    /* Nothing broke: a good watch (on a pinned color) runs. */
    atomic_store(&err_runs, 0);
    ck_assert_int_eq(
        mely_watch(&rt, p[0], MELY_READ, MELY_TO(MELY_COLOR_PINNED(1)), err_watch, NULL, &w), 0);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    run_bounded(&rt, 30, "a good watch after the errors");
    ck_assert_uint_ge(atomic_load(&err_runs), 1);
    ck_assert_int_eq(mely_watch_remove(w), 0);
    close(p[0]);
    close(p[1]);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- watches before mely_run() and between runs -------------------------------------------------- */

static struct {
    atomic_uint runs;
    atomic_int color;
} br;

static void br_watch(int fd, unsigned ready, void *arg)
{
    (void)ready;
    (void)arg;
    drain(fd);
    atomic_store(&br.color, mely_current_color());
    atomic_fetch_add(&br.runs, 1);
    mely_stop(&rt);
}

/*
 * A watch set before mely_run() on a pipe written before the run: its handler
 * runs once the runtime runs (in its color). Data written while the runtime is
 * stopped, and a watch added between runs, are handled by the next run.
 */
START_TEST(watches_set_before_run)
{
    memset(&br, 0, sizeof(br));
    int a[2], b[2];
    mely_watch_t *wa, *wb;
    init_runtime_shape(&rt, &watch_shapes[_i], MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    make_pipe(a);
    make_pipe(b);
    ck_assert_int_eq(mely_watch(&rt, a[0], MELY_READ, MELY_TO(77), br_watch, NULL, &wa), 0);
    ck_assert_int_eq(write(a[1], "x", 1), 1);
    sleep_us(20000);
    run_bounded(&rt, 30, "a watch set before mely_run()");
    ck_assert_uint_eq(atomic_load(&br.runs), 1);
    ck_assert_int_eq(atomic_load(&br.color), 77);

    ck_assert_int_eq(write(a[1], "y", 1), 1);
    run_bounded(&rt, 30, "data written between runs");
    ck_assert_uint_eq(atomic_load(&br.runs), 2);

    ck_assert_int_eq(mely_watch(&rt, b[0], MELY_READ, MELY_TO(78), br_watch, NULL, &wb), 0);
    ck_assert_int_eq(write(b[1], "z", 1), 1);
    run_bounded(&rt, 30, "a watch set between runs");
    ck_assert_uint_eq(atomic_load(&br.runs), 3);
    ck_assert_int_eq(atomic_load(&br.color), 78);

    ck_assert_int_eq(mely_watch_remove(wa), 0);
    ck_assert_int_eq(mely_watch_remove(wb), 0);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- the suite ------------------------------------------------------------------------------------- */

/* ---- pause and resume -------------------------------------------------------------------- */

/* A pipe stays readable (its byte is not read): the first run pauses the
 * watch from its handler, a foreign thread checks that no run follows, then
 * resumes it; the second run reads the byte and stops the runtime. */
static struct {
    int p[2];
    mely_watch_t *w;
    atomic_uint runs;
    atomic_bool first_ran;
    atomic_int pause_err, resume_err;
    unsigned runs_while_paused;
} pz;

static void pz_watch(int fd, unsigned ready, void *arg)
{
    (void)ready;
    (void)arg;
    unsigned n = atomic_fetch_add(&pz.runs, 1) + 1;
    if (n == 1) {
        atomic_store(&pz.pause_err, mely_watch_pause(pz.w));
        atomic_store(&pz.first_ran, true);
    } else {
        drain(fd);
        mely_stop(&rt);
    }
}

static void *pz_driver(void *arg)
{
    (void)arg;
    if (!wait_flag(&pz.first_ran, 10000)) {
        note("the paused watch's first run never came");
        mely_stop(&rt);
        return NULL;
    }
    sleep_us(50000); /* level-triggered and still readable: would run again */
    pz.runs_while_paused = atomic_load(&pz.runs) - 1;
    atomic_store(&pz.resume_err, mely_watch_resume(pz.w));
    return NULL;
}

START_TEST(pause_holds_a_ready_watch_until_resumed)
{
    memset(&pz, 0, sizeof(pz));
    init_runtime_shape(&rt, &watch_shapes[_i], MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    make_pipe(pz.p);
    ck_assert_int_eq(write(pz.p[1], "x", 1), 1);
    ck_assert_int_eq(mely_watch(&rt, pz.p[0], MELY_READ, MELY_TO(9), pz_watch, NULL, &pz.w), 0);
    run_with_helper(&rt, pz_driver, NULL, 30, "pause and resume");
    ck_assert_int_eq(atomic_load(&pz.pause_err), 0);
    ck_assert_int_eq(atomic_load(&pz.resume_err), 0);
    ck_assert_msg(pz.runs_while_paused == 0, "%u runs while the watch was paused",
                  pz.runs_while_paused);
    ck_assert_uint_eq(atomic_load(&pz.runs), 2);

    /* Errors: NULL, one-shot; removed-then-paused is the caller's bug, not tested. */
    mely_watch_t *os;
    ck_assert_int_eq(mely_watch_pause(NULL), MELY_EINVAL);
    ck_assert_int_eq(mely_watch_resume(NULL), MELY_EINVAL);
    ck_assert_int_eq(mely_watch(&rt, pz.p[0], MELY_READ | MELY_ONESHOT, MELY_TO(9), pz_watch, NULL,
                                &os), 0);
    ck_assert_int_eq(mely_watch_pause(os), MELY_EINVAL);
    ck_assert_int_eq(mely_watch_resume(os), MELY_EINVAL);
    /* Resuming a watch that is not paused changes nothing. */
    ck_assert_int_eq(mely_watch_resume(pz.w), 0);
    ck_assert_int_eq(mely_watch_remove(os), 0);
    ck_assert_int_eq(mely_watch_remove(pz.w), 0);
    close(pz.p[0]);
    close(pz.p[1]);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("watch");

    TCase *tc = new_tcase(s, "queued once", 60);
    tcase_add_loop_test(tc, ready_watch_is_queued_once, 0, NELEM(watch_shapes));

    tc = new_tcase(s, "removal", 120);
    tcase_add_loop_test(tc, removal_cancels_a_queued_event, 0, 2 * NREMOVERS);
    tcase_add_loop_test(tc, removal_while_running_is_the_last_run, 0, 2 * NELEM(watch_shapes));
    tcase_add_loop_test(tc, removal_races_with_readiness, 0, NELEM(watch_shapes));

    tc = new_tcase(s, "moves", 60);
    tcase_add_loop_test(tc, stolen_color_takes_its_watch, 0, 2);
    tcase_add_test(tc, moved_color_takes_its_watch);

    tc = new_tcase(s, "api", 60);
    tcase_add_loop_test(tc, oneshot_and_rearm, 0, NELEM(watch_shapes));
    tcase_add_loop_test(tc, oneshot_rearm_from_a_foreign_thread, 0, NELEM(watch_shapes));
    tcase_add_loop_test(tc, pause_holds_a_ready_watch_until_resumed, 0, NELEM(watch_shapes));
    tcase_add_loop_test(tc, close_removes_the_watches_then_closes, 0, 2);
    tcase_add_test(tc, watch_errors);
    tcase_add_loop_test(tc, watches_set_before_run, 0, NELEM(watch_shapes));
    return mely_test_main(s);
}
