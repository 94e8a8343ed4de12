/* SPDX-License-Identifier: MIT */
/* Unit tests of the core-queue (mely/queue/coreq.h): priority order, FIFO within a
 * level, removal, rotation, repositioning; random operations against a model. */
#include <check.h>
#include <stdlib.h>

#include "mely/queue/coreq.h"
#include "tests/testutil.h"

enum { NQ = 64 };
static struct mely__colorq cqs[NQ];

static struct mely__colorq *mk(int i, int prio)
{
    mely__colorq_init(&cqs[i], (uint32_t)i);
    cqs[i].prio = (uint8_t)prio;
    return &cqs[i];
}

/* The list's colors in order, checking links both ways and the level index. */
static int order(struct mely__coreq *q, int *out)
{
    int n = 0;
    struct mely__colorq *prev = NULL;
    for (struct mely__colorq *c = q->first; c; c = c->next) {
        ck_assert_ptr_eq(c->prev, prev);
        ck_assert(c->queued);
        if (prev)
            ck_assert_uint_ge(prev->prio, c->prio);
        if (!c->next || c->next->prio != c->prio)
            ck_assert_ptr_eq(q->last[c->prio], c);
        out[n++] = (int)c->color;
        prev = c;
        ck_assert_int_le(n, NQ);
    }
    ck_assert_uint_eq(q->ncolors, (unsigned)n);
    for (int p = 0; p < MELY_PRIO_LEVELS; p++)
        ck_assert_int_eq((q->levels >> p) & 1, q->last[p] != NULL);
    return n;
}

START_TEST(orders_by_priority_then_fifo)
{
    struct mely__coreq q;
    int got[NQ];
    mely__coreq_init(&q);
    ck_assert_ptr_null(mely__coreq_first(&q));
    mely__coreq_insert(&q, mk(0, 0));
    mely__coreq_insert(&q, mk(1, 5));
    mely__coreq_insert(&q, mk(2, 3));
    mely__coreq_insert(&q, mk(3, 5));
    mely__coreq_insert(&q, mk(4, 0));
    mely__coreq_insert(&q, mk(5, 7));
    int expect[] = {5, 1, 3, 2, 0, 4};
    ck_assert_int_eq(order(&q, got), 6);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(got[i], expect[i]);
    ck_assert_ptr_eq(mely__coreq_first(&q), &cqs[5]);
}
END_TEST

START_TEST(remove_rotate_reprioritize)
{
    struct mely__coreq q;
    int got[NQ];
    mely__coreq_init(&q);
    for (int i = 0; i < 4; i++)
        mely__coreq_insert(&q, mk(i, 2));
    mely__coreq_rotate(&q, &cqs[0]); /* 1 2 3 0 */
    mely__coreq_rotate(&q, &cqs[0]); /* already last of its level: no change */
    order(&q, got);
    ck_assert_int_eq(got[0], 1);
    ck_assert_int_eq(got[3], 0);
    mely__coreq_remove(&q, &cqs[0]); /* the level's last: last[2] moves back */
    ck_assert_ptr_eq(q.last[2], &cqs[3]);
    ck_assert(!cqs[0].queued);
    cqs[2].prio = 6;
    mely__coreq_reprioritize(&q, &cqs[2], 2); /* 2 1 3 */
    ck_assert_int_eq(order(&q, got), 3);
    ck_assert_int_eq(got[0], 2);
    ck_assert_int_eq(got[1], 1);
    ck_assert_int_eq(got[2], 3);
    cqs[2].prio = 0;
    mely__coreq_reprioritize(&q, &cqs[2], 6); /* 1 3 2 */
    order(&q, got);
    ck_assert_int_eq(got[2], 2);
    ck_assert_uint_eq(q.levels, (1u << 2) | 1u);
    mely__coreq_remove(&q, &cqs[1]);
    mely__coreq_remove(&q, &cqs[3]);
    mely__coreq_remove(&q, &cqs[2]);
    ck_assert_ptr_null(mely__coreq_first(&q));
    ck_assert_uint_eq(q.levels, 0);
}
END_TEST

/* Model: an array of colors kept sorted by (prio desc, insertion time). */
START_TEST(random_against_model)
{
    struct mely__coreq q;
    int got[NQ];
    unsigned long stamp[NQ], clock = 0;
    unsigned seed = 777;

    mely__coreq_init(&q);
    for (int i = 0; i < NQ; i++)
        mk(i, 0);
    for (int step = 0; step < 10000; step++) {
        int i = rand_r(&seed) % NQ;
        struct mely__colorq *c = &cqs[i];
        int op = rand_r(&seed) % 4;
        if (!c->queued) {
            c->prio = (uint8_t)(rand_r(&seed) % MELY_PRIO_LEVELS);
            mely__coreq_insert(&q, c);
            stamp[i] = ++clock;
        } else if (op == 0) {
            mely__coreq_remove(&q, c);
        } else if (op == 1) {
            if (q.last[c->prio] != c)
                stamp[i] = ++clock;
            mely__coreq_rotate(&q, c);
        } else {
            unsigned old = c->prio;
            c->prio = (uint8_t)(rand_r(&seed) % MELY_PRIO_LEVELS);
            mely__coreq_reprioritize(&q, c, old);
            stamp[i] = ++clock;
        }
        int n = order(&q, got);
        for (int k = 1; k < n; k++) {
            struct mely__colorq *a = &cqs[got[k - 1]], *b = &cqs[got[k]];
            ck_assert(a->prio > b->prio || stamp[got[k - 1]] < stamp[got[k]]);
            (void)b;
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("coreq");
    TCase *tc = new_tcase(s, "coreq", 60);
    tcase_add_test(tc, orders_by_priority_then_fifo);
    tcase_add_test(tc, remove_rotate_reprioritize);
    tcase_add_test(tc, random_against_model);
    return mely_test_main(s);
}
