/* SPDX-License-Identifier: MIT */
/*
 * slab.h: where event memory comes from, and how it goes back to the kernel
 * (queue layer: no scheduler knowledge; freelist.c is its only user).
 *
 * Events live in slabs of MELY__SLAB_BYTES, each aligned to its size, so
 * that an event's slab is its address with the low bits cleared: the trim
 * (freelist.c) counts free events per slab without a field in the event.
 * Slabs are carved from regions of MELY__REGION_SLABS slabs mapped with
 * mmap, never from malloc, so that memory given back leaves the process
 * whatever allocator the program links (glibc's heap with its trim
 * threshold, raised by mely_init; tcmalloc, which some programs link) and
 * without a malloc_trim() of the whole heap. A slab given back
 * (mely__slabs_release) loses its pages at once (madvise MADV_DONTNEED)
 * but keeps its address range: no mapping is split, so a long run cannot
 * pile up thousands of mappings, and the range is reused before any new
 * region is mapped. So the mapped address space stays at the peak of
 * event memory, its resident part at what is in use. A new region's pages
 * are populated at once (one madvise, not a fault per page). Regions are
 * unmapped by mely__slabs_free() only, which keeps up to
 * MELY__SLAB_POOL_MAX of them, pages and all, for the process's next
 * runtime.
 *
 * Costs: mely__slab_get is O(1) under the lock, plus three system calls
 * per MELY__REGION_SLABS slabs when a region must be mapped (outside the
 * lock); the pages fault in as the slab is used. mely__slabs_release makes
 * one madvise per run of adjacent slabs, outside the lock.
 *
 * Who may call: any thread; a spinlock of its own guards the bookkeeping,
 * and no system call or allocation happens under it.
 */
#ifndef MELY_SLAB_H
#define MELY_SLAB_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "mely/queue/spinlock.h"

#define MELY__SLAB_BYTES (64u << 10)
#define MELY__REGION_SLABS 16u /* a region: 1 MiB */
/* Regions kept for the process's next runtime after a shutdown (slab.c):
 * 32 MiB, as glibc's trim threshold that mely_init sets. */
#define MELY__SLAB_POOL_MAX 32u

struct mely__region;

/* The first cache line of every slab; its items start on the next line, so
 * that the trim's writes here never share a line with an event. The trim's
 * fields are scratch, written only by the trimmer (one at a time). */
struct mely__slab_head {
    struct mely__region *region; /* set by mely__slab_get */
    uint32_t gen;                /* the trim pass that counted last (0: none) */
    uint32_t nfree;              /* free events that pass counted */
    uint32_t fate;               /* that pass's decision (freelist.c) */
};
#define MELY__SLAB_HEAD 64u
_Static_assert(sizeof(struct mely__slab_head) <= MELY__SLAB_HEAD, "slab head fits a line");

struct mely__slabs {
    mely__spinlock_t lock;
    struct mely__region *regions;  /* every region, for mely__slabs_free */
    struct mely__region *has_free; /* regions with a free slab (a region is
                                      here exactly when its `free` mask is not 0) */
    _Atomic size_t hot;            /* slabs handed out and not released:
                                      written under the lock, read anywhere */
    size_t mapped;                 /* slabs in all regions */
};

/* The slab holding `item` (an address inside a slab's items). */
static inline struct mely__slab_head *mely__slab_of(const void *item)
{
    return (struct mely__slab_head *)((uintptr_t)item & ~(uintptr_t)(MELY__SLAB_BYTES - 1));
}

/* The first item of slab h. */
static inline void *mely__slab_items(struct mely__slab_head *h)
{
    return (unsigned char *)h + MELY__SLAB_HEAD;
}

void mely__slabs_init(struct mely__slabs *s);

/* A slab (its head set, its items' content undefined), or NULL with errno
 * ENOMEM when no region can be mapped. */
struct mely__slab_head *mely__slab_get(struct mely__slabs *s);

/* Gives n slabs back (their pages leave now); none of their items may be in
 * use. Sorts `slabs` in place (adjacent slabs share one system call). */
void mely__slabs_release(struct mely__slabs *s, struct mely__slab_head **slabs, size_t n);

/* Slabs handed out and not released (a reading: may lag). */
size_t mely__slabs_hot(struct mely__slabs *s);

/* Unmaps every region, in use or not (shutdown), but those the process's
 * pool keeps for the next runtime (up to MELY__SLAB_POOL_MAX). */
void mely__slabs_free(struct mely__slabs *s);

#endif
