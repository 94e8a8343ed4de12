/* SPDX-License-Identifier: MIT */
/* Unit tests of the spin policy (mely/sched/spinpol.h): the window grows through
 * short parks and shrinks through long ones after an empty spin, a CPU taken
 * by another thread stops spinning, an empty spin before a short park is
 * free, and whatever the sequence of spins and parks, charged spinning stays
 * within a tenth of the time parked plus the starting credit. */
#include <check.h>
#include <stdlib.h>

#include "mely/sched/spinpol.h"
#include "tests/testutil.h"

enum { MAX_US = 50 };
#define MAX_NS (MAX_US * 1000u)

START_TEST(fresh_policy_spins_the_whole_window)
{
    struct mely__spinpol p;
    mely__spinpol_init(&p, MAX_US);
    ck_assert_uint_eq(mely__spinpol_length(&p), MAX_NS);
    mely__spinpol_init(&p, 0);
    ck_assert_uint_eq(mely__spinpol_length(&p), 0);
    /* spin_us 0 stays 0 through short parks */
    mely__spinpol_parked(&p, 10);
    ck_assert_uint_eq(mely__spinpol_length(&p), 0);
}
END_TEST

START_TEST(long_parks_after_empty_spins_shrink_to_zero)
{
    struct mely__spinpol p;
    mely__spinpol_init(&p, MAX_US);
    uint64_t prev = mely__spinpol_length(&p);
    for (int i = 0; i < 20; i++) {
        uint64_t len = mely__spinpol_length(&p);
        ck_assert_uint_le(len, prev);
        mely__spinpol_spun(&p, MELY__SPIN_EMPTY, len);
        mely__spinpol_parked(&p, 10 * 1000 * 1000); /* 10 ms */
        prev = len;
    }
    ck_assert_uint_eq(p.window_ns, 0);
    ck_assert_uint_eq(mely__spinpol_length(&p), 0);
}
END_TEST

START_TEST(short_parks_grow_the_window_back)
{
    struct mely__spinpol p;
    mely__spinpol_init(&p, MAX_US);
    mely__spinpol_spun(&p, MELY__SPIN_TAKEN, 100);
    ck_assert_uint_eq(p.window_ns, 0);
    ck_assert_uint_eq(mely__spinpol_length(&p), 0);
    uint64_t want = SPINPOL_START_NS;
    for (int i = 0; i < 10; i++) {
        mely__spinpol_parked(&p, MAX_NS / 2); /* work came soon */
        ck_assert_uint_eq(p.window_ns, want < MAX_NS ? want : MAX_NS);
        want *= 2;
    }
    ck_assert_uint_eq(p.window_ns, MAX_NS);
}
END_TEST

START_TEST(which_spins_are_charged)
{
    struct mely__spinpol p;
    mely__spinpol_init(&p, MAX_US);
    int64_t credit = p.credit_ns;
    for (int i = 0; i < 1000; i++)
        mely__spinpol_spun(&p, MELY__SPIN_FOUND, MAX_NS);
    ck_assert_int_eq(p.credit_ns, credit);
    ck_assert_uint_eq(p.window_ns, MAX_NS); /* found work: window kept */
    /* empty, then a short park (0 slept: no credit earned either) */
    mely__spinpol_spun(&p, MELY__SPIN_EMPTY, MAX_NS);
    mely__spinpol_parked(&p, 0);
    ck_assert_int_eq(p.credit_ns, credit);
    /* empty, then work without a park: free too */
    mely__spinpol_spun(&p, MELY__SPIN_EMPTY, MAX_NS);
    (void)mely__spinpol_length(&p);
    mely__spinpol_parked(&p, 0);
    ck_assert_int_eq(p.credit_ns, credit);
    /* empty, then a long park: charged, earning a tenth of the park */
    mely__spinpol_spun(&p, MELY__SPIN_EMPTY, 20000);
    mely__spinpol_parked(&p, 1000000);
    ck_assert_int_eq(p.credit_ns, credit - 20000 + 100000 > 2 * (int64_t)MAX_NS
                                      ? 2 * (int64_t)MAX_NS
                                      : credit - 20000 + 100000);
    ck_assert_uint_eq(p.window_ns, MAX_NS / 2);
    /* work that came while a busy thread had the CPU: charged, no spin */
    credit = p.credit_ns;
    mely__spinpol_spun(&p, MELY__SPIN_HANDED, 30000);
    ck_assert_int_eq(p.credit_ns, credit - 30000);
    ck_assert_uint_eq(mely__spinpol_length(&p), 0);
}
END_TEST

/* Random sequences: charged spin <= park / 10 + the starting credit, and a
 * spin never asks for more than spin_us. */
START_TEST(charged_spin_stays_within_a_tenth_of_parked_time)
{
    unsigned seed = 12345;
    for (int run = 0; run < 200; run++) {
        struct mely__spinpol p;
        mely__spinpol_init(&p, MAX_US);
        uint64_t charged = 0, parked = 0, start = (uint64_t)p.credit_ns;
        for (int i = 0; i < 5000; i++) {
            uint64_t len = mely__spinpol_length(&p);
            ck_assert_uint_le(len, MAX_NS);
            enum mely__spin_end end = (enum mely__spin_end)(rand_r(&seed) % 4);
            uint64_t spun = len ? (uint64_t)rand_r(&seed) % (len + 1) : 0;
            if (end == MELY__SPIN_EMPTY)
                spun = len;
            if (len == 0)
                end = MELY__SPIN_FOUND; /* no spin: nothing to charge */
            mely__spinpol_spun(&p, end, spun);
            if (end == MELY__SPIN_TAKEN || end == MELY__SPIN_HANDED)
                charged += spun;
            if (end == MELY__SPIN_EMPTY || end == MELY__SPIN_TAKEN) {
                /* parks from 0 to 2 ms, mostly short */
                uint64_t slept = rand_r(&seed) % 3 ? (uint64_t)rand_r(&seed) % MAX_NS
                                                   : (uint64_t)rand_r(&seed) % 2000000;
                if (end == MELY__SPIN_EMPTY && slept >= MAX_NS + SPINPOL_WAKE_NS)
                    charged += spun; /* empty before a long park */
                parked += slept;
                mely__spinpol_parked(&p, slept);
            }
            ck_assert_uint_le(charged, parked / 10 + start + MAX_NS);
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("spinpol");
    TCase *tc = new_tcase(s, "spinpol", 60);
    tcase_add_test(tc, fresh_policy_spins_the_whole_window);
    tcase_add_test(tc, long_parks_after_empty_spins_shrink_to_zero);
    tcase_add_test(tc, short_parks_grow_the_window_back);
    tcase_add_test(tc, which_spins_are_charged);
    tcase_add_test(tc, charged_spin_stays_within_a_tenth_of_parked_time);
    return mely_test_main(s);
}
