/* SPDX-License-Identifier: MIT */
/* Unit tests of the color-queue (mely/queue/colorq.h): FIFO order, head posts,
 * per-priority counts, detaching and putting back. */
#include <check.h>
#include <stdlib.h>

#include "mely/queue/colorq.h"
#include "tests/testutil.h"

static struct mely__event evs[64];

static struct mely__event *ev(int i, int prio)
{
    evs[i] = (struct mely__event){.prio = (uint8_t)prio, .arg = &evs[i]};
    return &evs[i];
}

static int index_of(struct mely__event *e) { return (int)(e - evs); }

START_TEST(fifo_and_head)
{
    struct mely__colorq cq;
    mely__colorq_init(&cq, 7);
    ck_assert(mely__colorq_empty(&cq));
    mely__colorq_push(&cq, ev(1, 0), false);
    mely__colorq_push(&cq, ev(2, 0), false);
    mely__colorq_push(&cq, ev(3, 0), true);
    mely__colorq_push(&cq, ev(4, 0), false);
    mely__colorq_push(&cq, ev(5, 0), true);
    ck_assert_uint_eq(cq.count, 5);
    int expect[] = {5, 3, 1, 2, 4};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(index_of(mely__colorq_pop(&cq)), expect[i]);
    ck_assert(mely__colorq_empty(&cq));
    ck_assert_ptr_null(cq.tail);
    /* Usable again after emptying. */
    mely__colorq_push(&cq, ev(6, 0), true);
    ck_assert_int_eq(index_of(mely__colorq_pop(&cq)), 6);
}
END_TEST

START_TEST(priority_is_max_of_pending)
{
    struct mely__colorq cq;
    mely__colorq_init(&cq, 1);
    mely__colorq_push(&cq, ev(1, 2), false);
    ck_assert_uint_eq(cq.prio, 2);
    mely__colorq_push(&cq, ev(2, 5), false);
    ck_assert_uint_eq(cq.prio, 5);
    mely__colorq_push(&cq, ev(3, 1), false);
    ck_assert_uint_eq(cq.prio, 5);
    mely__colorq_pop(&cq); /* prio 2 */
    ck_assert_uint_eq(cq.prio, 5);
    mely__colorq_pop(&cq); /* prio 5: the highest left is 1 */
    ck_assert_uint_eq(cq.prio, 1);
    mely__colorq_pop(&cq);
    ck_assert(mely__colorq_empty(&cq));
    /* An empty queue takes the priority of its next event, even a lower one. */
    mely__colorq_push(&cq, ev(4, 0), false);
    ck_assert_uint_eq(cq.prio, 0);
}
END_TEST

START_TEST(move_all_and_prepend_keep_order)
{
    struct mely__colorq cq, run;
    mely__colorq_init(&cq, 3);
    mely__colorq_init(&run, 0);
    for (int i = 0; i < 6; i++)
        mely__colorq_push(&cq, ev(i, i == 4 ? 6 : 0), false);
    mely__colorq_move_all(&run, &cq);
    ck_assert(mely__colorq_empty(&cq));
    ck_assert_uint_eq(run.count, 6);
    ck_assert_uint_eq(run.prio, 6);
    ck_assert_uint_eq(cq.prio, 6); /* keeps its place while detached */
    ck_assert_int_eq(index_of(mely__colorq_pop(&run)), 0);
    ck_assert_int_eq(index_of(mely__colorq_pop(&run)), 1);
    /* New posts land in cq meanwhile; a head post of the batch goes to run. */
    mely__colorq_push(&cq, ev(10, 0), false);
    mely__colorq_push(&cq, ev(11, 2), false);
    mely__colorq_push(&run, ev(12, 0), true);
    mely__colorq_prepend(&cq, &run);
    ck_assert(mely__colorq_empty(&run));
    ck_assert_uint_eq(cq.count, 7);
    ck_assert_uint_eq(cq.prio, 6);
    int expect[] = {12, 2, 3, 4, 5, 10, 11};
    for (int i = 0; i < 7; i++) {
        ck_assert_int_eq(index_of(mely__colorq_pop(&cq)), expect[i]);
        if (i == 4) /* the prio-6 event is gone: 2 is the highest left */
            ck_assert_uint_eq(cq.prio, 2);
    }
    ck_assert(mely__colorq_empty(&cq));
    mely__colorq_prepend(&cq, &run); /* an empty front changes nothing */
    ck_assert(mely__colorq_empty(&cq));
}
END_TEST

/* Random operations against a simple array model. */
START_TEST(random_against_model)
{
    enum { N = 20000 };
    static struct mely__event pool[N];
    struct mely__event *model[2 * N];
    int lo = N, hi = N; /* model[lo..hi) */
    struct mely__colorq cq;
    unsigned seed = 12345;

    mely__colorq_init(&cq, 9);
    for (int i = 0; i < N; i++) {
        int r = rand_r(&seed) % 3;
        if (r < 2) {
            pool[i] = (struct mely__event){.prio = (uint8_t)(rand_r(&seed) % MELY_PRIO_LEVELS)};
            bool head = rand_r(&seed) % 4 == 0;
            mely__colorq_push(&cq, &pool[i], head);
            if (head)
                model[--lo] = &pool[i];
            else
                model[hi++] = &pool[i];
        } else if (hi > lo) {
            ck_assert_ptr_eq(mely__colorq_pop(&cq), model[lo++]);
        }
        ck_assert_uint_eq(cq.count, (unsigned)(hi - lo));
        if (hi > lo) {
            unsigned max = 0;
            for (int k = lo; k < hi; k++)
                if (model[k]->prio > max)
                    max = model[k]->prio;
            ck_assert_uint_eq(cq.prio, max);
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("colorq");
    TCase *tc = new_tcase(s, "colorq", 60);
    tcase_add_test(tc, fifo_and_head);
    tcase_add_test(tc, priority_is_max_of_pending);
    tcase_add_test(tc, move_all_and_prepend_keep_order);
    tcase_add_test(tc, random_against_model);
    return mely_test_main(s);
}
