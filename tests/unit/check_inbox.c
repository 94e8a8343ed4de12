/* SPDX-License-Identifier: MIT */
/*
 * check_inbox.c: unit tests of the inbox ring (mely/remote/inbox.h) and of the
 * reserve that lets a move always finish (mely/remote/deliver.c).
 *  - order, partial reservations when it fills, laps, a stale head reading;
 *  - several producer threads and one consumer: every post read once, each
 *    producer's in order, and never past a reserved slot not yet written;
 *  - a move refuses to start without a full reserve, and changes nothing.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>

#include "mely/remote/deliver.h"
#include "mely/remote/inbox.h"
#include "mely/runtime.h"
#include "tests/testutil.h"

static struct mely__inbox *new_inbox(void)
{
    struct mely__inbox *q = aligned_alloc(64, sizeof(*q));
    ck_assert_ptr_nonnull(q);
    memset(q, 0, sizeof(*q));
    return q;
}

static struct mely__event post_of(uintptr_t tag)
{
    return (struct mely__event){.arg = (void *)tag, .color = (uint32_t)(tag & 0xffff)};
}

/* Consumer side, as deliver.c does it: reads ready posts from head on. */
static unsigned take(struct mely__inbox *q, uintptr_t *out, unsigned max)
{
    uint32_t h = atomic_load(&q->head);
    unsigned n = 0;
    const struct mely__event *p;

    while (n < max && (p = mely__inbox_peek(q, h)) != NULL) {
        out[n++] = (uintptr_t)p->arg;
        h++;
    }
    atomic_store_explicit(&q->head, h, memory_order_release);
    return n;
}

START_TEST(order_fill_and_laps)
{
    struct mely__inbox *q = new_inbox();
    uint32_t pos, seen = 0;
    uintptr_t got[MELY__INBOX_CAP];
    uintptr_t next_in = 1, next_out = 1;

    ck_assert(!mely__inbox_ready(q));
    ck_assert(!mely__inbox_reserved(q));
    for (int lap = 0; lap < 5; lap++) {
        /* Fill it in runs of 100: the last run gets only what is left. */
        uint32_t total = 0, n;
        while ((n = mely__inbox_reserve(q, 100, &pos, &seen)) != 0) {
            ck_assert_uint_le(n, 100);
            ck_assert_uint_eq(pos, (uint32_t)(next_in - 1));
            for (uint32_t i = 0; i < n; i++) {
                struct mely__event e = post_of(next_in++);
                mely__inbox_put(q, pos + i, &e);
            }
            total += n;
        }
        ck_assert_uint_eq(total, MELY__INBOX_CAP);
        ck_assert(mely__inbox_ready(q));
        ck_assert(mely__inbox_reserved(q));
        /* Read half, then the ring has room for exactly that half. */
        unsigned k = take(q, got, MELY__INBOX_CAP / 2);
        ck_assert_uint_eq(k, MELY__INBOX_CAP / 2);
        for (unsigned i = 0; i < k; i++)
            ck_assert_uint_eq(got[i], next_out++);
        ck_assert_uint_eq(mely__inbox_reserve(q, MELY__INBOX_CAP, &pos, &seen),
                          MELY__INBOX_CAP / 2);
        for (uint32_t i = 0; i < MELY__INBOX_CAP / 2; i++) {
            struct mely__event e = post_of(next_in++);
            mely__inbox_put(q, pos + i, &e);
        }
        k = take(q, got, MELY__INBOX_CAP);
        ck_assert_uint_eq(k, MELY__INBOX_CAP);
        for (unsigned i = 0; i < k; i++)
            ck_assert_uint_eq(got[i], next_out++);
        ck_assert(!mely__inbox_ready(q));
        ck_assert(!mely__inbox_reserved(q));
    }
    /* A reading of head a whole lap old says "full": it is then read again. */
    seen = atomic_load(&q->head) - MELY__INBOX_CAP;
    ck_assert_uint_eq(mely__inbox_reserve(q, 1, &pos, &seen), 1);
    ck_assert_uint_eq(seen, atomic_load(&q->head));
    free(q);
}
END_TEST

START_TEST(reserved_but_unwritten_blocks_the_reader)
{
    struct mely__inbox *q = new_inbox();
    uint32_t a, b, seen = 0;
    uintptr_t got[4];

    ck_assert_uint_eq(mely__inbox_reserve(q, 1, &a, &seen), 1);
    ck_assert_uint_eq(mely__inbox_reserve(q, 1, &b, &seen), 1);
    struct mely__event e2 = post_of(2);
    mely__inbox_put(q, b, &e2); /* the later slot is written first */
    ck_assert(mely__inbox_reserved(q));
    ck_assert(!mely__inbox_ready(q));
    ck_assert_uint_eq(take(q, got, 4), 0);
    struct mely__event e1 = post_of(1);
    mely__inbox_put(q, a, &e1);
    ck_assert_uint_eq(take(q, got, 4), 2);
    ck_assert_uint_eq(got[0], 1);
    ck_assert_uint_eq(got[1], 2);
    free(q);
}
END_TEST

/* ---- producers and a consumer --------------------------------------------------- */

enum { PRODUCERS = 3 };

static struct {
    struct mely__inbox *q;
    unsigned per_producer;
    atomic_uint started;
} mp;

/* Tags are producer << 32 | sequence (from 1). */
static void *producer(void *arg)
{
    uintptr_t id = (uintptr_t)arg, seq = 1;
    uint32_t seen = 0, pos;
    uint32_t rng = 0x9E3779B9u * (uint32_t)(id + 1);

    atomic_fetch_add(&mp.started, 1);
    while (seq <= mp.per_producer) { /* bounded: retries while the ring is full */
        rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
        uint32_t want = 1 + rng % 40;
        if (want > mp.per_producer + 1 - seq)
            want = (uint32_t)(mp.per_producer + 1 - seq);
        uint32_t n = mely__inbox_reserve(mp.q, want, &pos, &seen);
        if (n == 0) {
            sched_yield();
            continue;
        }
        for (uint32_t i = 0; i < n; i++) {
            struct mely__event e = post_of(id << 32 | seq++);
            mely__inbox_put(mp.q, pos + i, &e);
        }
    }
    return NULL;
}

START_TEST(producers_and_a_consumer)
{
    pthread_t t[PRODUCERS];
    uint64_t next[PRODUCERS];
    uintptr_t got[64];
    unsigned total = 0;

    mp.q = new_inbox();
    mp.per_producer = scaled(200000, 5000, SCALED_MAX);
    atomic_store(&mp.started, 0);
    for (unsigned p = 0; p < PRODUCERS; p++) {
        next[p] = 1;
        ck_assert_int_eq(pthread_create(&t[p], NULL, producer, (void *)(uintptr_t)p), 0);
    }
    uint64_t deadline = now_ns() + 60ull * 1000000000u;
    while (total < PRODUCERS * mp.per_producer && now_ns() < deadline) { /* bounded: 60 s */
        unsigned k = take(mp.q, got, 64);
        for (unsigned i = 0; i < k; i++) {
            unsigned p = (unsigned)(got[i] >> 32);
            ck_assert_uint_lt(p, PRODUCERS);
            ck_assert_uint_eq(got[i] & 0xffffffffu, next[p]);
            next[p]++;
        }
        total += k;
    }
    for (unsigned p = 0; p < PRODUCERS; p++)
        pthread_join(t[p], NULL);
    ck_assert_uint_eq(total, PRODUCERS * mp.per_producer);
    ck_assert(!mely__inbox_reserved(mp.q));
    free(mp.q);
}
END_TEST

/* ---- the reserve ------------------------------------------------------------------- */

START_TEST(move_needs_a_full_reserve)
{
    mely_t m;
    init_runtime(&m, 2, 0, MELY_BATCH_DEFAULT, 0);
    struct mely__worker *w0 = &m.rt->workers[0];
    ck_assert_uint_eq(w0->nreserve, MELY__INBOX_CAP);

    /* Color 2 lives on worker 0; with one event missing from its reserve, a
     * move away is refused and nothing changes. */
    ck_assert_int_eq(mely_color_owner(&m, 2), 0);
    struct mely__event *taken = w0->reserve;
    w0->reserve = taken->next;
    w0->nreserve--;
    ck_assert_int_eq(mely_color_move(&m, 2, 1), MELY_ENOMEM);
    ck_assert_int_eq(mely_color_owner(&m, 2), 0);
    taken->next = w0->reserve;
    w0->reserve = taken;
    w0->nreserve++;
    ck_assert_int_eq(mely_color_move(&m, 2, 1), 0);
    ck_assert_int_eq(mely_color_owner(&m, 2), 1);
    ck_assert_int_eq(mely_shutdown(&m), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("inbox");

    TCase *tc = new_tcase(s, "ring", 120);
    tcase_add_test(tc, order_fill_and_laps);
    tcase_add_test(tc, reserved_but_unwritten_blocks_the_reader);
    tcase_add_test(tc, producers_and_a_consumer);
    tcase_add_test(tc, move_needs_a_full_reserve);
    return mely_test_main(s);
}
