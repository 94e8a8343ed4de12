/* SPDX-License-Identifier: MIT */
/* slab.c: event memory in mmap'ed regions of aligned slabs (see slab.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "mely/queue/slab.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#define REGION_BYTES ((size_t)MELY__REGION_SLABS * MELY__SLAB_BYTES)

/*
 * LeakSanitizer looks for pointers in globals, stacks and the heap, not in
 * memory a program maps itself: a queued event's argument (a compat
 * callback, say, posted just before a legacy program's exit()) would look
 * leaked. So a region in use is a root region for it. (valgrind scans
 * every mapping and needs nothing.)
 */
static void leak_roots(unsigned char *base, bool in_use)
{
#ifdef __SANITIZE_ADDRESS__
    if (in_use)
        __lsan_register_root_region(base, REGION_BYTES);
    else
        __lsan_unregister_root_region(base, REGION_BYTES);
#else
    (void)base;
    (void)in_use;
#endif
}

struct mely__region {
    unsigned char *base;          /* REGION_BYTES, aligned to MELY__SLAB_BYTES */
    uint32_t free;                /* bit i: slab i is free (no pages, or never used) */
    struct mely__region *next;    /* every region */
    struct mely__region *next_free; /* on has_free */
};
_Static_assert(MELY__REGION_SLABS <= 32, "a region's free slabs fit its mask");

void mely__slabs_init(struct mely__slabs *s)
{
    mely__spin_init(&s->lock);
    s->regions = s->has_free = NULL;
    atomic_init(&s->hot, 0);
    s->mapped = 0;
}

/*
 * Regions a shut-down runtime left, kept mapped with their pages for the
 * process's next runtime, up to MELY__SLAB_POOL_MAX: the pages of a new
 * region cost a fault or a zeroing each, and a program (a benchmark, a test
 * suite) that creates a runtime per run would pay them every run; glibc's
 * heap, where events lived before, kept them the same way (mely_init
 * raises its trim threshold to 32 MiB). A fixed array: no allocation, so
 * nothing is left for valgrind to report after the last shutdown.
 */
static struct {
    pthread_mutex_t mu;
    unsigned n;
    unsigned char *base[MELY__SLAB_POOL_MAX];
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

static unsigned char *pool_take(void)
{
    unsigned char *base = NULL;
    pthread_mutex_lock(&pool.mu);
    if (pool.n)
        base = pool.base[--pool.n];
    pthread_mutex_unlock(&pool.mu);
    return base;
}

static bool pool_put(unsigned char *base)
{
    pthread_mutex_lock(&pool.mu);
    bool kept = pool.n < MELY__SLAB_POOL_MAX;
    if (kept)
        pool.base[pool.n++] = base;
    pthread_mutex_unlock(&pool.mu);
    return kept;
}

/* Maps a region aligned to a slab (or takes one a shut-down runtime left):
 * over-maps by one slab, then unmaps the head and tail around the aligned
 * part. NULL when the kernel refuses. */
static unsigned char *map_region(void)
{
    unsigned char *kept = pool_take();
    if (kept) {
        leak_roots(kept, true);
        return kept;
    }
    size_t len = REGION_BYTES + MELY__SLAB_BYTES;
    unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uintptr_t a = ((uintptr_t)p + MELY__SLAB_BYTES - 1) & ~(uintptr_t)(MELY__SLAB_BYTES - 1);
    unsigned char *base = (unsigned char *)a;
    if (base > p)
        munmap(p, (size_t)(base - p));
    if (p + len > base + REGION_BYTES)
        munmap(base + REGION_BYTES, (size_t)(p + len - (base + REGION_BYTES)));
#ifdef MADV_NOHUGEPAGE
    /* With transparent huge pages on "always", one event would make a
     * 2 MiB page resident, and a release would split it: events are
     * counted and given back 64 KiB at a time. */
    (void)madvise(base, REGION_BYTES, MADV_NOHUGEPAGE);
#endif
#ifdef MADV_POPULATE_WRITE
    /* The region's pages at once, in one call, rather than by a fault
     * per 4 KiB as events are first written (a new region is cut into
     * slabs as soon as it is needed): in bench/dispatch's cross-core
     * runs those faults fell on the consumer's path, which then let the
     * producer's inbox fill. A kernel before 5.14 refuses it (EINVAL):
     * the pages then fault in as before. */
    (void)madvise(base, REGION_BYTES, MADV_POPULATE_WRITE);
#endif
    leak_roots(base, true);
    return base;
}

/* Under s->lock: takes a free slab of the first region that has one, and
 * its region in *rp (the head is written after the unlock: its page may
 * have to fault in). */
static struct mely__slab_head *take_free(struct mely__slabs *s, struct mely__region **rp)
{
    struct mely__region *r = s->has_free;
    if (!r)
        return NULL;
    unsigned i = (unsigned)__builtin_ctz(r->free);
    r->free &= r->free - 1;
    if (!r->free)
        s->has_free = r->next_free;
    atomic_store_explicit(&s->hot, atomic_load_explicit(&s->hot, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    *rp = r;
    return (struct mely__slab_head *)(r->base + (size_t)i * MELY__SLAB_BYTES);
}

static struct mely__slab_head *head_init(struct mely__slab_head *h, struct mely__region *r)
{
    if (h) {
        h->region = r;
        h->gen = h->nfree = h->fate = 0;
    }
    return h;
}

struct mely__slab_head *mely__slab_get(struct mely__slabs *s)
{
    struct mely__region *r = NULL;
    mely__spin_lock(&s->lock, NULL);
    struct mely__slab_head *h = take_free(s, &r);
    mely__spin_unlock(&s->lock);
    if (h)
        return head_init(h, r);

    /* A new region, mapped outside the lock. Two threads may both map
     * one; the second region's slabs simply wait, untouched, for later. */
    struct mely__region *nr = malloc(sizeof(*nr));
    unsigned char *base = nr ? map_region() : NULL;
    if (!base) {
        free(nr);
        errno = ENOMEM;
        return NULL;
    }
    nr->base = base;
    nr->free = MELY__REGION_SLABS == 32 ? UINT32_MAX : (1u << MELY__REGION_SLABS) - 1;
    mely__spin_lock(&s->lock, NULL);
    nr->next = s->regions;
    s->regions = nr;
    nr->next_free = s->has_free;
    s->has_free = nr;
    s->mapped += MELY__REGION_SLABS;
    h = take_free(s, &r);
    mely__spin_unlock(&s->lock);
    return head_init(h, r);
}

static int cmp_addr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

/* Piece of a run released with one madvise: its regions are noted on the
 * stack first, since the heads go with the pages. */
enum { PIECE = 64 };

void mely__slabs_release(struct mely__slabs *s, struct mely__slab_head **slabs, size_t n)
{
    if (n == 0)
        return; /* slabs may be NULL then, which qsort may not take */
    qsort(slabs, n, sizeof(*slabs), cmp_addr);
    /* A slab is marked free, under the lock, only once its pages are gone:
     * a free slab may be handed out at once, and a madvise after that would
     * wipe its new events. */
    for (size_t i = 0; i < n;) { /* bounded: n slabs, in pieces */
        size_t j = i + 1;
        while (j < n && j - i < PIECE &&
               (unsigned char *)slabs[j] == (unsigned char *)slabs[j - 1] + MELY__SLAB_BYTES)
            j++;
        struct mely__region *rs[PIECE];
        for (size_t k = i; k < j; k++)
            rs[k - i] = slabs[k]->region;
        (void)madvise(slabs[i], (j - i) * MELY__SLAB_BYTES, MADV_DONTNEED);
        mely__spin_lock(&s->lock, NULL);
        for (size_t k = i; k < j; k++) {
            struct mely__region *r = rs[k - i];
            unsigned idx = (unsigned)(((unsigned char *)slabs[k] - r->base) / MELY__SLAB_BYTES);
            if (!r->free) {
                r->next_free = s->has_free;
                s->has_free = r;
            }
            r->free |= 1u << idx;
        }
        atomic_store_explicit(&s->hot, atomic_load_explicit(&s->hot, memory_order_relaxed) - (j - i),
                              memory_order_relaxed);
        mely__spin_unlock(&s->lock);
        i = j;
    }
}

size_t mely__slabs_hot(struct mely__slabs *s)
{
    return atomic_load_explicit(&s->hot, memory_order_relaxed);
}

void mely__slabs_free(struct mely__slabs *s)
{
    struct mely__region *r = s->regions;
    while (r) { /* bounded: the regions */
        struct mely__region *next = r->next;
        leak_roots(r->base, false);
        if (!pool_put(r->base))
            munmap(r->base, REGION_BYTES);
        free(r);
        r = next;
    }
    mely__slabs_init(s);
}
