/* SPDX-License-Identifier: MIT */
/* Unit tests of the color map (mely/remote/colormap.h): initial placement, pinned
 * colors, and the lock-then-recheck ownership protocol. */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "mely/remote/colormap.h"
#include "tests/testutil.h"

static mely_t m;

static void setup(void)
{
    init_runtime(&m, 3, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
}

static void teardown(void)
{
    ck_assert_int_ge(mely_shutdown(&m), 0);
}

START_TEST(initial_placement_hashes_colors)
{
    struct mely__rt *rt = m.rt;
    for (unsigned c = 0; c < MELY_COLORS; c++)
        ck_assert_uint_eq(mely__owner(rt, c), c % 3);
    ck_assert_uint_eq(sizeof(rt->owner), 65536);
    for (unsigned w = 0; w < 3; w++)
        ck_assert_uint_eq(mely__owner(rt, MELY_COLOR_PINNED(w)), w);
    ck_assert(mely__color_valid(rt, MELY_COLOR_PINNED(2)));
    ck_assert(!mely__color_valid(rt, MELY_COLOR_PINNED(3)));
}
END_TEST

START_TEST(lock_owner_locks_the_owner)
{
    struct mely__rt *rt = m.rt;
    for (mely_color_t c = 0; c < 10; c++) {
        struct mely__worker *w = mely__lock_owner(rt, c, NULL);
        ck_assert_uint_eq(w->index, c % 3);
        ck_assert(atomic_load(&w->lock.held));
        mely__spin_unlock(&w->lock);
    }
    struct mely__worker *w = mely__lock_owner(rt, MELY_COLOR_PINNED(1), NULL);
    ck_assert_uint_eq(w->index, 1);
    mely__spin_unlock(&w->lock);
}
END_TEST

/* A "thief" holds the old owner's lock and moves the color while a producer
 * waits for that lock: the producer must end up holding the new owner. */
static void *producer(void *arg)
{
    struct mely__rt *rt = arg;
    struct mely__worker *w = mely__lock_owner(rt, 4, NULL);
    unsigned got = w->index;
    mely__spin_unlock(&w->lock);
    return (void *)(uintptr_t)(got + 1);
}

START_TEST(lock_owner_retries_after_a_move)
{
    struct mely__rt *rt = m.rt;
    struct mely__worker *old = &rt->workers[1], *thief = &rt->workers[2];
    pthread_t t;

    ck_assert_uint_eq(mely__owner(rt, 4), 1);
    mely__spin_lock(&thief->lock, NULL);
    mely__spin_lock(&old->lock, NULL);
    ck_assert_int_eq(pthread_create(&t, NULL, producer, rt), 0);
    nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
    atomic_store(&rt->owner[4], 2);
    mely__spin_unlock(&old->lock);
    nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
    mely__spin_unlock(&thief->lock);
    void *ret;
    pthread_join(t, &ret);
    ck_assert_uint_eq((uintptr_t)ret, 2 + 1);
    ck_assert_int_eq(mely_color_owner(&m, 4), 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("colormap");
    TCase *tc = new_tcase(s, "colormap", 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, initial_placement_hashes_colors);
    tcase_add_test(tc, lock_owner_locks_the_owner);
    tcase_add_test(tc, lock_owner_retries_after_a_move);
    return mely_test_main(s);
}
