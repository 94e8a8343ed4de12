/* SPDX-License-Identifier: MIT */
/* Unit tests of the stealing-queue (mely/queue/stealq.h): interval bounds, re-filing
 * as expected times change, random updates against a model; and of the
 * composition of steal policies by name (mely__steal_compose, steal.c). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "mely/steal/steal.h"
#include "mely/queue/stealq.h"
#include "tests/testutil.h"

enum { NQ = 64 };
static struct mely__colorq cqs[NQ];

START_TEST(interval_bounds)
{
    /* cost 10: worthy above 10; intervals (10,40], (40,160], above 160 */
    ck_assert_int_eq(mely__stealq_level(0, 10), -1);
    ck_assert_int_eq(mely__stealq_level(10, 10), -1);
    ck_assert_int_eq(mely__stealq_level(11, 10), 0);
    ck_assert_int_eq(mely__stealq_level(40, 10), 0);
    ck_assert_int_eq(mely__stealq_level(41, 10), 1);
    ck_assert_int_eq(mely__stealq_level(160, 10), 1);
    ck_assert_int_eq(mely__stealq_level(161, 10), 2);
    ck_assert_int_eq(mely__stealq_level(UINT64_MAX / 32, 1), 2);
}
END_TEST

/* Checks q against the levels each color-queue should have under `cost`:
 * links both ways, membership, counts. */
static void check_model(const struct mely__stealq *q, uint64_t cost)
{
    unsigned n = 0;
    bool seen[NQ] = {false};

    for (int level = 0; level < MELY__SQ_LEVELS; level++) {
        const struct mely__colorq *prev = NULL;
        for (const struct mely__colorq *c = q->first[level]; c; c = c->sq_next) {
            ck_assert_ptr_eq(c->sq_prev, prev);
            ck_assert_int_eq(c->sq_level, level);
            ck_assert(!seen[c->color]);
            seen[c->color] = true;
            prev = c;
            ck_assert_uint_le(++n, NQ);
        }
        ck_assert_ptr_eq(q->last[level], prev);
    }
    ck_assert_uint_eq(q->n, n);
    for (int i = 0; i < NQ; i++) {
        int want = mely__stealq_level(cqs[i].units, cost);
        ck_assert_int_eq(cqs[i].sq_level, want);
        ck_assert(seen[i] == (want >= 0));
    }
}

START_TEST(random_updates_match_the_model)
{
    struct mely__stealq q = {0};
    const uint64_t cost = 8;
    unsigned seed = 12345;

    for (int i = 0; i < NQ; i++)
        mely__colorq_init(&cqs[i], (uint32_t)i);
    for (int step = 0; step < 20000; step++) {
        struct mely__colorq *cq = &cqs[rand_r(&seed) % NQ];
        int was = cq->sq_level;
        switch (rand_r(&seed) % 4) {
        case 0: cq->units = 0; break;                          /* a batch taken */
        case 1: cq->units += rand_r(&seed) % 20; break;         /* posts */
        case 2: cq->units += rand_r(&seed) % 400; break;        /* a long event */
        default: cq->units -= cq->units ? rand_r(&seed) % (cq->units + 1) : 0; break;
        }
        bool became = mely__stealq_update(&q, cq, cost);
        ck_assert(became == (was < 0 && cq->sq_level >= 0));
        if (step % 97 == 0) {
            check_model(&q, cost);
            struct mely__colorq *gone = &cqs[rand_r(&seed) % NQ];
            mely__stealq_remove(&q, gone); /* a steal takes it */
            ck_assert_int_eq(gone->sq_level, -1);
            gone->units = 0;
        }
    }
    check_model(&q, cost);
}
END_TEST

/* Files cq with `units` expected under `cost`, as a queued color with events. */
static void file(struct mely__stealq *q, struct mely__colorq *cq, uint32_t color, uint64_t units,
                 uint64_t cost)
{
    mely__colorq_init(cq, color);
    cq->queued = true;
    cq->count = 1;
    cq->units = (uint32_t)units;
    mely__stealq_update(q, cq, cost);
}

START_TEST(pick_takes_the_highest_movable_worthy_color)
{
    struct mely__stealq q = {0};
    const uint64_t cost = 10;

    ck_assert_ptr_null(mely__stealq_pick(&q, NULL, cost));
    file(&q, &cqs[0], 0, 30, cost);  /* interval 0 */
    file(&q, &cqs[1], 1, 100, cost); /* interval 1, filed first: the oldest */
    file(&q, &cqs[2], 2, 150, cost); /* interval 1 */
    ck_assert_ptr_eq(mely__stealq_pick(&q, NULL, cost), &cqs[1]);
    /* the running color-queue is skipped, so is one filed under an older cost */
    ck_assert_ptr_eq(mely__stealq_pick(&q, &cqs[1], cost), &cqs[2]);
    ck_assert_ptr_eq(mely__stealq_pick(&q, NULL, 120), &cqs[2]);
    ck_assert_ptr_null(mely__stealq_pick(&q, NULL, 200));
    /* re-filed (its expected time changed, same interval): now the newest */
    mely__stealq_remove(&q, &cqs[1]);
    mely__stealq_update(&q, &cqs[1], cost);
    ck_assert_ptr_eq(mely__stealq_pick(&q, NULL, cost), &cqs[2]);
    /* a pinned color never moves; nor one without events or unlinked */
    cqs[2].color = MELY_COLORS;
    cqs[1].count = 0;
    ck_assert_ptr_eq(mely__stealq_pick(&q, NULL, cost), &cqs[0]);
    cqs[0].queued = false;
    ck_assert_ptr_null(mely__stealq_pick(&q, NULL, cost));
}
END_TEST

/* Files cq as file() does, holding an event of penalty 2^pshift. */
static void file_penalized(struct mely__stealq *q, struct mely__colorq *cq, uint32_t color,
                           uint64_t units, unsigned pshift, uint64_t cost)
{
    file(q, cq, color, units, cost);
    mely__colorq_note_pshift(cq, (uint8_t)pshift);
}

/* Section 3.3, within the stealing-queue's highest interval that has a
 * worthy color: the first unpenalized one (as time-left takes), else the
 * lowest penalty, the larger expected time among equals; a penalized color
 * is still picked when it is the only worthy one. */
START_TEST(pick_prefers_low_penalty)
{
    struct mely__stealq q = {0};
    const uint64_t cost = 10;

    ck_assert_ptr_null(mely__stealq_pick(&q, NULL, cost));
    file_penalized(&q, &cqs[0], 0, 100, 10, cost); /* interval 1, penalty ~1024 */
    mely__colorq_note_pshift(&cqs[0], 3);          /* the highest penalty stays */
    ck_assert_uint_eq(cqs[0].pshift, 10);
    ck_assert_ptr_eq(mely__stealq_pick(&q, NULL, cost), &cqs[0]);
    file_penalized(&q, &cqs[1], 1, 30, 0, cost);   /* interval 0, unpenalized */
    ck_assert_ptr_eq(mely__stealq_pick(&q, NULL, cost), &cqs[0]); /* higher interval */
    file_penalized(&q, &cqs[2], 2, 90, 1, cost);   /* interval 1, penalty 2 */
    ck_assert_ptr_eq(mely__stealq_pick(&q, NULL, cost), &cqs[2]);
    file_penalized(&q, &cqs[3], 3, 120, 1, cost);  /* interval 1, penalty 2, larger */
    ck_assert_ptr_eq(mely__stealq_pick(&q, NULL, cost), &cqs[3]);
    file_penalized(&q, &cqs[4], 4, 50, 0, cost);   /* interval 1, unpenalized */
    ck_assert_ptr_eq(mely__stealq_pick(&q, NULL, cost), &cqs[4]);
    /* running, or no longer worthy: the next lightest */
    ck_assert_ptr_eq(mely__stealq_pick(&q, &cqs[4], cost), &cqs[3]);
    ck_assert_ptr_eq(mely__stealq_pick(&q, NULL, 95), &cqs[3]);
    ck_assert_ptr_eq(mely__stealq_pick(&q, NULL, 110), &cqs[3]);
    ck_assert_ptr_null(mely__stealq_pick(&q, NULL, 120));
    /* the interval below, when the highest has nothing movable */
    cqs[0].count = cqs[2].count = cqs[3].count = cqs[4].count = 0;
    ck_assert_ptr_eq(mely__stealq_pick(&q, NULL, cost), &cqs[1]);
}
END_TEST

/* The pick looks at no more than MELY__SQ_SCAN color-queues of an interval:
 * an unpenalized one filed behind that many penalized ones is out of its
 * sight. */
START_TEST(pick_is_bounded)
{
    struct mely__stealq q = {0};
    const uint64_t cost = 10;

    for (uint32_t i = 1; i < MELY__SQ_SCAN + 1; i++)
        file_penalized(&q, &cqs[i], i, 100, 4, cost);
    file(&q, &cqs[0], 0, 100, cost);
    struct mely__colorq *got = mely__stealq_pick(&q, NULL, cost);
    ck_assert_ptr_nonnull(got);
    ck_assert_ptr_ne(got, &cqs[0]);
    ck_assert_uint_eq(got->pshift, 4);
    mely__stealq_remove(&q, &cqs[1]); /* one fewer ahead of it: now in sight */
    ck_assert_ptr_eq(mely__stealq_pick(&q, NULL, cost), &cqs[0]);
}
END_TEST

/* ---- worthy by waiting (mely__wait_pick) ------------------------------------------------ */

/* Queues cq in core-queue q as a color with `units` expected, seen waiting
 * since TSC `since` (0: not seen yet). */
static void wait_in(struct mely__coreq *q, struct mely__colorq *cq, uint32_t color,
                    uint64_t units, uint64_t since)
{
    mely__colorq_init(cq, color);
    cq->count = 1;
    cq->units = units;
    cq->since = since;
    mely__coreq_insert(q, cq);
}

/*
 * The waiting rule, at fixed times (no clock read): cheap colors (3 units,
 * 96 cycles, far below a steal of 1,500 cycles, so never in a stealing-queue)
 * are picked once they have waited longer than a steal costs and are worth
 * more than the steal's hold of the owner's lock; the longest waiting first;
 * never the running one, nor one whose events count nothing, however long it
 * waited.
 */
START_TEST(wait_pick_takes_a_cheap_color_that_waited)
{
    struct mely__coreq q;
    const uint64_t cost = 1500, hold = 2; /* cycles; units */

    mely__coreq_init(&q);
    ck_assert_ptr_null(mely__wait_pick(&q, NULL, 100000, cost, hold));
    wait_in(&q, &cqs[0], 0, 1000, 1);  /* its batch is running */
    wait_in(&q, &cqs[1], 1, 3, 1000);  /* cheap, waiting since 1,000 */
    wait_in(&q, &cqs[2], 2, 3, 5000);  /* cheap, since 5,000 */
    wait_in(&q, &cqs[3], 3, 0, 1);     /* counts nothing */
    ck_assert_int_eq(mely__stealq_level(cqs[1].units, cost / MELY__COST_UNIT), -1);
    ck_assert_ptr_null(mely__wait_pick(&q, &cqs[0], 2500, cost, hold)); /* waited 1,500 */
    ck_assert_ptr_eq(mely__wait_pick(&q, &cqs[0], 2501, cost, hold), &cqs[1]);
    ck_assert_ptr_eq(mely__wait_pick(&q, &cqs[0], 1000000, cost, hold), &cqs[1]);
    /* not running: the first in the core-queue, which has waited longest */
    ck_assert_ptr_eq(mely__wait_pick(&q, NULL, 2501, cost, hold), &cqs[0]);
    /* worth no more than the steal holds the owner up: stays */
    ck_assert_ptr_null(mely__wait_pick(&q, &cqs[0], 1000000, cost, 3));
    /* a hold estimate of 0 counts as 1 unit: the color that counts nothing
     * is never taken, the others are */
    cqs[1].count = cqs[2].count = 0;
    ck_assert_ptr_null(mely__wait_pick(&q, &cqs[0], UINT64_MAX, cost, 0));
    cqs[2].count = 1;
    ck_assert_ptr_eq(mely__wait_pick(&q, &cqs[0], UINT64_MAX, cost, 0), &cqs[2]);
    /* a wait that began "after now" (another core's TSC, a little ahead) */
    ck_assert_ptr_null(mely__wait_pick(&q, &cqs[0], 4000, cost, hold));
    /* pinned, or held to the end of its worker's turn: never */
    cqs[2].color = MELY_COLORS;
    ck_assert_ptr_null(mely__wait_pick(&q, &cqs[0], 1000000, cost, hold));
    cqs[2].color = 2;
    cqs[2].held = 1;
    ck_assert_ptr_null(mely__wait_pick(&q, &cqs[0], 1000000, cost, hold));
}
END_TEST

/* A color not seen waiting yet (since 0, as the enqueue leaves it) is not
 * taken at the first look, which starts its wait: a later look takes it
 * once more than a steal's cost has passed since. Only movable colors are
 * marked. */
START_TEST(wait_counts_from_the_first_look)
{
    struct mely__coreq q;
    const uint64_t cost = 1500, hold = 2;

    mely__coreq_init(&q);
    wait_in(&q, &cqs[0], 0, 10, 0); /* running: not marked */
    wait_in(&q, &cqs[1], 1, 10, 0);
    ck_assert_ptr_null(mely__wait_pick(&q, &cqs[0], 1000000, cost, hold));
    ck_assert_uint_eq(cqs[0].since, 0);
    ck_assert_uint_eq(cqs[1].since, 1000000);
    ck_assert_ptr_null(mely__wait_pick(&q, &cqs[0], 1001500, cost, hold));
    ck_assert_ptr_eq(mely__wait_pick(&q, &cqs[0], 1001501, cost, hold), &cqs[1]);
    ck_assert_uint_eq(cqs[1].since, 1000000); /* a look does not restart it */
}
END_TEST

/* Among colors that waited, the penalty rule's preference (section 3.3):
 * the first unpenalized one, else the lowest penalty; and the look is
 * bounded to MELY__SQ_SCAN color-queues of the core-queue. */
START_TEST(wait_pick_prefers_low_penalty_and_is_bounded)
{
    struct mely__coreq q;
    const uint64_t cost = 1500, hold = 2;

    mely__coreq_init(&q);
    wait_in(&q, &cqs[0], 0, 10, 1);
    mely__colorq_note_pshift(&cqs[0], 5);
    wait_in(&q, &cqs[1], 1, 10, 1);
    mely__colorq_note_pshift(&cqs[1], 2);
    ck_assert_ptr_eq(mely__wait_pick(&q, NULL, 10000, cost, hold), &cqs[1]);
    wait_in(&q, &cqs[2], 2, 10, 1);
    ck_assert_ptr_eq(mely__wait_pick(&q, NULL, 10000, cost, hold), &cqs[2]);

    mely__coreq_init(&q);
    for (uint32_t i = 0; i < MELY__SQ_SCAN; i++)
        wait_in(&q, &cqs[i], i, 1, 1); /* worth no more than the hold */
    wait_in(&q, &cqs[MELY__SQ_SCAN], MELY__SQ_SCAN, 10, 1);
    ck_assert_ptr_null(mely__wait_pick(&q, NULL, 10000, cost, hold));
    mely__coreq_remove(&q, &cqs[0]);
    ck_assert_ptr_eq(mely__wait_pick(&q, NULL, 10000, cost, hold), &cqs[MELY__SQ_SCAN]);
}
END_TEST

static void compose_ok(const char *spec, const char *name, bool stealq, bool penalty, bool measure,
                       bool locality)
{
    struct mely__steal_ops ops;
    char buf[64];

    ck_assert_msg(mely__steal_compose(spec, &ops, buf, sizeof(buf)) == 1, "%s", spec);
    ck_assert_str_eq(ops.name, name);
    ck_assert(ops.stealq == stealq);
    ck_assert(ops.penalty == penalty);
    ck_assert(ops.measure == measure);
    ck_assert(ops.core_set != NULL && ops.can_be_stolen != NULL && ops.choose_color != NULL);
    ck_assert((ops.core_set == mely__steal_locality.core_set) == locality);
    ck_assert((ops.choose_color == mely__steal_base.choose_color) == !stealq);
}

START_TEST(policies_compose_by_name)
{
    struct mely__steal_ops ops;
    char buf[64];

    ck_assert_int_eq(mely__steal_compose(NULL, &ops, buf, sizeof(buf)), 0);
    ck_assert_int_eq(mely__steal_compose("off", &ops, buf, sizeof(buf)), 0);
    compose_ok("base", "base", false, false, false, false);
    compose_ok("locality", "locality", false, false, false, true);
    compose_ok("base+locality", "base+locality", false, false, false, true);
    compose_ok("timeleft", "timeleft", true, false, false, false);
    compose_ok("penalty", "penalty", true, true, false, false);
    compose_ok("timeleft+penalty", "timeleft+penalty", true, true, false, false);
    compose_ok("measured", "measured", false, false, true, false);
    compose_ok("all", "locality+timeleft+penalty", true, true, false, true);
    compose_ok("measured+all", "locality+timeleft+penalty+measured", true, true, true, true);
    /* penalty's choice wins over timeleft's, whatever the order */
    mely__steal_compose("penalty+timeleft", &ops, buf, sizeof(buf));
    ck_assert_ptr_eq(ops.choose_color, mely__steal_penalty.choose_color);

    const char *bad[] = {"", "+", "base+", "+base", "nope", "off+base", "base+off", "Base",
                         "timeleft+nope", "all+"};
    for (int i = 0; i < NELEM(bad); i++)
        ck_assert_msg(mely__steal_compose(bad[i], &ops, buf, sizeof(buf)) == -1, "\"%s\"", bad[i]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stealq");
    TCase *tc = new_tcase(s, "stealq", 30);
    tcase_add_test(tc, interval_bounds);
    tcase_add_test(tc, random_updates_match_the_model);
    tcase_add_test(tc, pick_takes_the_highest_movable_worthy_color);
    tcase_add_test(tc, pick_is_bounded);
    tcase_add_test(tc, pick_prefers_low_penalty);
    tcase_add_test(tc, wait_pick_takes_a_cheap_color_that_waited);
    tcase_add_test(tc, wait_counts_from_the_first_look);
    tcase_add_test(tc, wait_pick_prefers_low_penalty_and_is_bounded);
    tcase_add_test(tc, policies_compose_by_name);
    return mely_test_main(s);
}
