/* SPDX-License-Identifier: MIT */
/*
 * check_ranges.c: color ranges through the public API (include/mely/mely.h):
 *  - mely_color_range: reservations never overlap (also made from several
 *    threads at once), all lie in [MELY_COLOR_RANGE_FLOOR, MELY_COLORS),
 *    carved from the top; exhausting the space gives -ENOSPC and takes
 *    nothing; n = 0 and a NULL out are MELY_EINVAL; MELY_ESHUTDOWN on a
 *    handle never initialized or shut down;
 *  - mely_color_pick: keys of any size (fds past 65,535, 2^64-1) land in the
 *    range, consecutive keys on consecutive colors, and events posted to
 *    those colors run;
 *  - mely_color_hash: FNV-1a (64-bit) of the bytes, picked into the range:
 *    deterministic, in range, spread over the whole range.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mely/mely.h>
#include "tests/testutil.h"

#define SPACE (MELY_COLORS - MELY_COLOR_RANGE_FLOOR) /* colors ranges can have */

static bool in_range(const mely_color_range_t *r, mely_color_t c)
{
    return c >= r->base && c - r->base < r->n;
}

static void assert_well_placed(const mely_color_range_t *r, uint32_t n)
{
    ck_assert_uint_eq(r->n, n);
    ck_assert_msg(r->base >= MELY_COLOR_RANGE_FLOOR && r->base + n <= MELY_COLORS,
                  "range [%u, %u) is not within [%u, %u)", (unsigned)r->base,
                  (unsigned)(r->base + n), MELY_COLOR_RANGE_FLOOR, MELY_COLORS);
}

/* Marks r's colors in `used`, failing on a color already marked. */
static void claim(bool *used, const mely_color_range_t *r)
{
    for (uint32_t i = 0; i < r->n; i++) {
        ck_assert_msg(!used[r->base + i], "color %u is in two ranges", (unsigned)(r->base + i));
        used[r->base + i] = true;
    }
}

/* Ranges of assorted sizes: each within the space, none overlapping. */
START_TEST(ranges_never_overlap)
{
    static const uint32_t sizes[] = {1, 7, 64, 1000, 3, 4096, 1, 255, 2};
    bool *used = calloc(MELY_COLORS, sizeof(*used));
    ck_assert_ptr_nonnull(used);
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    for (int i = 0; i < NELEM(sizes); i++) {
        mely_color_range_t r;
        int err = mely_color_range(&rt, sizes[i], &r);
        ck_assert_msg(err == 0, "mely_color_range(%u): %s", sizes[i], mely_strerror(err));
        assert_well_placed(&r, sizes[i]);
        claim(used, &r);
    }
    ck_assert_int_ge(mely_shutdown(&rt), 0);
    free(used);
}
END_TEST

/*
 * The space above the floor, and no more: a request one color too large is
 * -ENOSPC (and takes nothing); ranges are carved from the top, so the first
 * ends at MELY_COLORS and the one that fills the space begins at the floor;
 * after that even one color is -ENOSPC.
 */
START_TEST(exhausting_the_space_is_enospc)
{
    mely_color_range_t r;
    init_runtime(&rt, 1, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_color_range(&rt, SPACE + 1, &r), -ENOSPC);
    ck_assert_int_eq(mely_color_range(&rt, UINT32_MAX, &r), -ENOSPC);
    ck_assert_int_eq(mely_color_range(&rt, SPACE - 10, &r), 0);
    assert_well_placed(&r, SPACE - 10);
    ck_assert_uint_eq(r.base, MELY_COLOR_RANGE_FLOOR + 10);
    ck_assert_int_eq(mely_color_range(&rt, 11, &r), -ENOSPC);
    ck_assert_int_eq(mely_color_range(&rt, 10, &r), 0);
    assert_well_placed(&r, 10);
    ck_assert_uint_eq(r.base, MELY_COLOR_RANGE_FLOOR);
    ck_assert_int_eq(mely_color_range(&rt, 1, &r), -ENOSPC);
    ck_assert_int_ge(mely_shutdown(&rt), 0);

    /* A new runtime has the whole space again. */
    init_runtime(&rt, 1, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_color_range(&rt, SPACE, &r), 0);
    assert_well_placed(&r, SPACE);
    ck_assert_int_ge(mely_shutdown(&rt), 0);
}
END_TEST

/* n = 0 and out NULL are MELY_EINVAL; a handle never initialized, or shut
 * down, is MELY_ESHUTDOWN. */
START_TEST(range_argument_errors)
{
    mely_color_range_t r;
    mely_t none = {0};
    ck_assert_int_eq(mely_color_range(&none, 4, &r), MELY_ESHUTDOWN);
    init_runtime(&rt, 1, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_color_range(&rt, 0, &r), MELY_EINVAL);
    ck_assert_int_eq(mely_color_range(&rt, 4, NULL), MELY_EINVAL);
    ck_assert_int_ge(mely_shutdown(&rt), 0);
    ck_assert_int_eq(mely_color_range(&rt, 4, &r), MELY_ESHUTDOWN);
}
END_TEST

enum { RANGE_THREADS = 4, RANGES_EACH = 64, RANGE_SIZE = 5 };

static mely_color_range_t taken[RANGE_THREADS][RANGES_EACH];
static atomic_bool go;

static void *reserve_many(void *arg)
{
    mely_color_range_t *mine = arg;
    while (!atomic_load(&go)) {
    }
    for (int i = 0; i < RANGES_EACH; i++) {
        int err = mely_color_range(&rt, RANGE_SIZE, &mine[i]);
        if (err)
            note("mely_color_range: %s", mely_strerror(err));
    }
    return NULL;
}

/* Four threads reserving 64 ranges each at the same time: no color twice. */
START_TEST(ranges_from_many_threads)
{
    pthread_t t[RANGE_THREADS];
    bool *used = calloc(MELY_COLORS, sizeof(*used));
    ck_assert_ptr_nonnull(used);
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    atomic_store(&go, false);
    for (int i = 0; i < RANGE_THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, reserve_many, taken[i]), 0);
    atomic_store(&go, true);
    for (int i = 0; i < RANGE_THREADS; i++)
        pthread_join(t[i], NULL);
    assert_no_notes();
    for (int i = 0; i < RANGE_THREADS; i++)
        for (int j = 0; j < RANGES_EACH; j++) {
            assert_well_placed(&taken[i][j], RANGE_SIZE);
            claim(used, &taken[i][j]);
        }
    ck_assert_int_ge(mely_shutdown(&rt), 0);
    free(used);
}
END_TEST

/*
 * mely_color_pick over keys of every size: small, fds past 65,535, around
 * 2^32 and up to 2^64-1: always in the range, and consecutive keys take
 * consecutive colors (base + key % n). Events posted to the colors of large
 * keys run (no MELY_ECOLOR).
 */
START_TEST(pick_stays_in_range)
{
    static const uint64_t keys[] = {
        0,       1,          99,          100,        65535,          65536,     70000,
        1048576, 4294967295, 4294967296u, 1ull << 63, UINT64_MAX - 1, UINT64_MAX};
    mely_color_range_t r;
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_color_range(&rt, 100, &r), 0);
    for (uint64_t k = 0; k < 300000; k++) {
        mely_color_t c = mely_color_pick(&r, k);
        ck_assert_msg(in_range(&r, c), "key %llu: color %u", (unsigned long long)k, (unsigned)c);
        ck_assert_uint_eq(c, r.base + k % 100);
    }
    for (int i = 0; i < NELEM(keys); i++) {
        mely_color_t c = mely_color_pick(&r, keys[i]);
        ck_assert_msg(in_range(&r, c), "key %llu: color %u", (unsigned long long)keys[i],
                      (unsigned)c);
        ck_assert_uint_eq(c, r.base + keys[i] % 100);
        ck_assert_int_eq(mely_post(&rt, c, count_and_stop, NULL), 0);
        ck_assert_int_ge(mely_color_owner(&rt, c), 0);
    }
    atomic_store(&ran, 0);
    stop_at = NELEM(keys);
    run_bounded(&rt, 30, "posts to picked colors");
    ck_assert_uint_eq(atomic_load(&ran), NELEM(keys));
    ck_assert_int_ge(mely_shutdown(&rt), 0);
}
END_TEST

/* FNV-1a, 64-bit (the offset basis and prime of its definition). */
static uint64_t fnv1a64(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/*
 * mely_color_hash: base + FNV-1a(key) % n (the test's own FNV-1a agrees with
 * the published values for "" and "a"), the same color on every call, in
 * range; 4,096 distinct keys reach all 64 colors of a range.
 */
START_TEST(hash_is_fnv1a_in_range)
{
    ck_assert_uint_eq(fnv1a64("", 0), 0xcbf29ce484222325ull);
    ck_assert_uint_eq(fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
    mely_color_range_t r, odd;
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_color_range(&rt, 64, &r), 0);
    ck_assert_int_eq(mely_color_range(&rt, 1, &odd), 0);
    static const char *const words[] = {"", "a", "user:42", "a much longer key than the others"};
    for (int i = 0; i < NELEM(words); i++) {
        size_t len = strlen(words[i]);
        mely_color_t c = mely_color_hash(&r, words[i], len);
        ck_assert_uint_eq(c, r.base + fnv1a64(words[i], len) % 64);
        ck_assert_uint_eq(mely_color_hash(&r, words[i], len), c);
        ck_assert_uint_eq(mely_color_hash(&odd, words[i], len), odd.base);
    }
    unsigned hits[64] = {0};
    for (uint32_t k = 0; k < 4096; k++) {
        mely_color_t c = mely_color_hash(&r, &k, sizeof(k));
        ck_assert_msg(in_range(&r, c), "key %u: color %u outside the range", k, (unsigned)c);
        ck_assert_uint_eq(c, r.base + fnv1a64(&k, sizeof(k)) % 64);
        hits[c - r.base]++;
    }
    for (int i = 0; i < 64; i++)
        ck_assert_msg(hits[i] > 0, "no key of 4096 hashed to color %u", (unsigned)(r.base + i));
    ck_assert_int_ge(mely_shutdown(&rt), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ranges");
    TCase *tc = new_tcase(s, "ranges", 30);
    tcase_add_test(tc, ranges_never_overlap);
    tcase_add_test(tc, exhausting_the_space_is_enospc);
    tcase_add_test(tc, range_argument_errors);
    tcase_add_test(tc, ranges_from_many_threads);
    tcase_add_test(tc, pick_stays_in_range);
    tcase_add_test(tc, hash_is_fnv1a_in_range);
    return mely_test_main(s);
}
