/* Unit tests of the event and color-queue allocators (mely/freelist.h):
 * magazines, the depot, foreign allocation, and allocation failure. */
#include <check.h>
#include <stdlib.h>

#include "mely/runtime.h"
#include "tests/testutil.h"

static mely_t m;

static void setup(void)
{
    init_runtime(&m, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
}

static void teardown(void)
{
    ck_assert_int_ge(mely_shutdown(&m), 0);
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

static void assert_distinct(struct mely__event **v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_ptr);
    for (size_t i = 1; i < n; i++)
        ck_assert_ptr_ne(v[i - 1], v[i]);
}

/* Worker 0 allocates, worker 1 frees (as a cross-core producer and consumer do):
 * events flow back through the depot, nothing is handed out twice, and the
 * number of slabs stays bounded by the peak in use. */
START_TEST(magazines_flow_between_workers)
{
    enum { N = 5000, ROUNDS = 20 };
    struct mely__rt *rt = m.rt;
    struct mely__evcache *a = &rt->workers[0].evcache, *b = &rt->workers[1].evcache;
    static struct mely__event *v[N];

    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < N; i++) {
            v[i] = mely__evcache_alloc(rt, a);
            ck_assert_ptr_nonnull(v[i]);
        }
        for (int i = 0; i < N; i++)
            mely__evcache_free(rt, b, v[i]);
        ck_assert_uint_le(b->nloaded, MELY__MAG);
    }
    for (int i = 0; i < N; i++)
        v[i] = mely__evcache_alloc(rt, a);
    assert_distinct(v, N);
    for (int i = 0; i < N; i++)
        mely__evcache_free(rt, a, v[i]);

    size_t slabs = 0;
    for (struct mely__slab *s = rt->depot.slabs; s; s = s->next)
        slabs++;
    /* Peak in use was N (+ at most 3 magazines cached per worker), plus the
     * workers' reserves for moves (deliver.c: MELY__INBOX_CAP events each). */
    ck_assert_uint_le(slabs, N / MELY__MAG + 8 + rt->nworkers * (MELY__INBOX_CAP / MELY__MAG));
}
END_TEST

START_TEST(foreign_threads_use_the_depot)
{
    enum { N = 1000 };
    struct mely__rt *rt = m.rt;
    static struct mely__event *v[N];

    for (int i = 0; i < N; i++) {
        v[i] = mely__depot_alloc_one(rt);
        ck_assert_ptr_nonnull(v[i]);
    }
    assert_distinct(v, N);
    for (int i = 0; i < N; i++)
        mely__depot_free_one(rt, v[i]);
    /* Freed events are reused before any new slab. */
    struct mely__slab *before = rt->depot.slabs;
    for (int i = 0; i < N; i++)
        v[i] = mely__depot_alloc_one(rt);
    ck_assert_ptr_eq(rt->depot.slabs, before);
    for (int i = 0; i < N; i++)
        mely__depot_free_one(rt, v[i]);
}
END_TEST

START_TEST(allocation_failure_returns_null)
{
    struct mely__rt *rt = m.rt;
    struct mely__evcache *a = &rt->workers[0].evcache;
    struct mely__cqslab cs = {0};

    atomic_store(&mely__test_fail_slabs, 3);
    ck_assert_ptr_null(mely__evcache_alloc(rt, a));
    ck_assert_ptr_null(mely__depot_alloc_one(rt));
    ck_assert_ptr_null(mely__cq_alloc(rt, &cs));
    ck_assert_int_eq(atomic_load(&mely__test_fail_slabs), 0);
    struct mely__event *ev = mely__evcache_alloc(rt, a);
    ck_assert_ptr_nonnull(ev);
    mely__evcache_free(rt, a, ev);
    struct mely__colorq *cq = mely__cq_alloc(rt, &cs);
    ck_assert_ptr_nonnull(cq);
    ck_assert_ptr_ne(mely__cq_alloc(rt, &cs), cq);
}
END_TEST

static void noop(void *arg) { (void)arg; }

/* Through the API: a post that cannot get memory reports MELY_ENOMEM and
 * queues nothing; the next one works. */
START_TEST(post_reports_enomem)
{
    atomic_store(&mely__test_fail_slabs, 1);
    ck_assert_int_eq(mely_post(&m, 5, noop, NULL), MELY_ENOMEM);
    ck_assert_int_eq(mely_post(&m, 5, noop, NULL), 0);
    /* Event memory now exists; the color-queue of a new color needs a slab. */
    for (int c = 100; c < 164; c++) /* use up worker 0's first color-queue slab */
        ck_assert_int_eq(mely_post(&m, (mely_color_t)c * 2, noop, NULL), 0);
    atomic_store(&mely__test_fail_slabs, 1);
    int err = 0, ok = 0;
    for (int c = 200; c < 400 && !err; c++)
        if (!(err = mely_post(&m, (mely_color_t)c * 2, noop, NULL)))
            ok++;
    ck_assert_int_eq(err, MELY_ENOMEM);
    ck_assert_int_eq(atomic_load(&mely__test_fail_slabs), 0);
    ck_assert_int_eq(mely_shutdown(&m), 1 + 64 + ok);
    setup(); /* for teardown */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("freelist");
    TCase *tc = new_tcase(s, "freelist", 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, magazines_flow_between_workers);
    tcase_add_test(tc, foreign_threads_use_the_depot);
    tcase_add_test(tc, allocation_failure_returns_null);
    tcase_add_test(tc, post_reports_enomem);
    return mely_test_main(s);
}
