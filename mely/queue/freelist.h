/* SPDX-License-Identifier: MIT */
/*
 * freelist.h: where events and color-queues come from. No malloc per event.
 *
 * Events are allocated by the posting thread and freed by the worker that ran
 * them, often another one, so per-worker lists drift. Each worker keeps a small
 * cache of free events in magazines of MELY__MAG events (a loaded one it pops
 * from and pushes to, and one spare full one); full magazines beyond that go
 * to the runtime's depot, and an empty worker takes one back from it. Only
 * when the depot is empty is a new slab (slab.h: 64 KiB, mapped, not
 * malloc'ed) cut into MELY__SLAB_MAGS magazines. Moving a magazine is O(1):
 * it is a chain whose first event links the next chain. Threads that are
 * not workers take events one at a time from the depot's loose chain, under
 * the depot lock.
 *
 * The budget (mely_config_t.event_budget_mb). The depot counts the events
 * it has handed out (`out`: in workers' caches, queued, running, staged,
 * in reserves), once per magazine, under the lock it takes anyway. A post's
 * allocation that would take `out` past the budget fails (errno EAGAIN, the
 * post says MELY_EAGAIN), and so the budget bounds the events handed out,
 * hence the slabs: a new slab is cut only when the depot is empty. Two
 * kinds of allocation pass the budget:
 *  - "owed" ones (mely__evcache_alloc_owed, mely__depot_alloc_one(owed)):
 *    an owner draining its inbox takes events for posts that were already
 *    accepted, whose posters freed their own events at publication
 *    (deliver.c). Refusing them would lose accepted posts, or let a direct
 *    post overtake them;
 *  - a worker's own cache: up to two magazines it holds are already out.
 * Since a remote post frees its event when it is published, a worker can
 * fill inboxes without ever refilling its cache. So whenever `out` passes
 * the budget the depot raises rt->budget_hit, which remote posts and posts
 * from other threads read (one relaxed load of a line they read anyway)
 * and refuse while it is up; the depot lowers it once `out` falls to 7/8
 * of the budget. Local posts pay nothing: their refills check `out`.
 * Hence: accepted posts that still need events when the flag rises are at
 * most the inboxes (MELY__INBOX_CAP per worker) plus what posters staged
 * or were posting at that moment (MELY__OUTBOX_MAX per worker, one per
 * other thread), and `out` exceeds the budget by at most that plus one
 * magazine per worker.
 *
 * Giving memory back: trim.c takes the depot's free events, gives back
 * the slabs whose events are all free, and returns the others; the depot
 * tracks for it the least number of free events it held since a moment
 * (min_free), so that only memory unused for a while goes.
 *
 * Color-queues are carved from per-worker slabs (malloc'ed), once per color
 * (they live until shutdown: see colorq.h); bounded by the colors. Every
 * slab is freed by mely__depot_destroy().
 */
#ifndef MELY_FREELIST_H
#define MELY_FREELIST_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mely/queue/colorq.h"
#include "mely/queue/event.h"
#include "mely/queue/slab.h"
#include "mely/queue/spinlock.h"
#include "mely/queue/trim.h"

#define MELY__MAG 64u
/* Magazines per event slab: 25 x 64 events of 40 bytes after the slab's
 * head line (64,064 of 65,536 bytes). */
#define MELY__SLAB_MAGS ((MELY__SLAB_BYTES - MELY__SLAB_HEAD) / (MELY__MAG * sizeof(struct mely__event)))
#define MELY__SLAB_EVENTS (MELY__SLAB_MAGS * MELY__MAG)

struct mely__rt;

/* A worker's free events. Owner only. */
struct mely__evcache {
    struct mely__event *loaded;
    uint32_t nloaded;           /* 0 .. MELY__MAG */
    struct mely__event *spare;  /* a full magazine, or NULL */
};

/* A worker's color-queue slab. Under the worker's lock. */
struct mely__cqslab {
    struct mely__colorq *next;
    uint32_t left;
};

struct mely__slab {
    struct mely__slab *next;
    alignas(16) unsigned char items[];
};

/* The runtime's store of free events. Its fields are under `lock`, except
 * those said otherwise; what every take and give back touches comes first. */
struct mely__depot {
    mely__spinlock_t lock;
    struct mely__event *full;  /* full magazines, linked by next_chain */
    struct mely__event *loose; /* single events for threads that are no worker */
    size_t nfull, nloose;      /* magazines in `full`, events in `loose` */
    size_t out;                /* events handed out and not given back */
    size_t limit;              /* the budget, in events */
    size_t relax;              /* budget_hit is lowered at or below this */
    _Atomic size_t nfree;      /* nfull * MELY__MAG + nloose, for looks
                                  without the lock (the trim's trigger) */
    size_t keep;               /* free events the trim leaves (trim.c) */
    struct mely__slab *slabs;  /* every color-queue slab, for shutdown */
    struct mely__slabs ev_slabs; /* where event slabs come from (slab.h) */
    struct mely__trim trim;    /* giving them back (trim.h) */
};

/* Slow paths (freelist.c). An allocation that fails returns NULL with
 * errno EAGAIN (the budget: not for owed ones) or ENOMEM (no memory). */
struct mely__event *mely__evcache_refill(struct mely__rt *rt, struct mely__evcache *c, bool owed);
void mely__evcache_spill(struct mely__rt *rt, struct mely__evcache *c);
/* An event for a thread that is not a worker (or for a drain by one). Any thread. */
struct mely__event *mely__depot_alloc_one(struct mely__rt *rt, bool owed);
void mely__depot_free_one(struct mely__rt *rt, struct mely__event *ev);
struct mely__colorq *mely__cqslab_refill(struct mely__rt *rt, struct mely__cqslab *s);
void mely__depot_init(struct mely__depot *d);
/* Sets the budget: `mb` MiB of event slabs for `workers` workers (mely_init). */
void mely__depot_budget(struct mely__depot *d, unsigned mb, unsigned workers);
void mely__depot_destroy(struct mely__depot *d);

/* For trim.c, each under the depot lock (any thread): */
/* Takes every free event but `keep_mags` full magazines: the magazines
 * (linked by next_chain) into *mags, the loose chain into *loose; returns
 * how many events. */
size_t mely__depot_detach(struct mely__depot *d, size_t keep_mags, struct mely__event **mags,
                          struct mely__event **loose);
/* Gives events back: nmags full magazines (first .. last) and a loose
 * chain of nloose events (lfirst .. llast); either may be empty (NULL). */
void mely__depot_return(struct mely__depot *d, struct mely__event *first, struct mely__event *last,
                        size_t nmags, struct mely__event *lfirst, struct mely__event *llast,
                        size_t nloose);
/* The least number of free events the depot held since the last call, which
 * begins a new count from now; *nfree gets the number now. */
size_t mely__depot_min_free(struct mely__depot *d, size_t *nfree);

#ifdef MELY__TEST_HOOKS
/* Test hook, only in test builds of freelist.c (tests/unit/check_freelist): while
 * > 0, slab allocations fail (each failure decrements it). */
extern _Atomic int mely__test_fail_slabs;
#endif

/* The two below: pops the loaded magazine; refills when it is empty (the
 * budget is looked at there only). */
static inline __attribute__((always_inline)) struct mely__event *
mely__evcache_take(struct mely__rt *rt, struct mely__evcache *c, bool owed)
{
    struct mely__event *ev = c->loaded;

    if (__builtin_expect(c->nloaded == 0, 0))
        return mely__evcache_refill(rt, c, owed);
    c->loaded = ev->next;
    c->nloaded--;
    return ev;
}

/* An event for a worker posting: O(1); NULL (errno EAGAIN: the budget;
 * ENOMEM) only when its cache is empty and the depot refuses. Owner only. */
static inline struct mely__event *mely__evcache_alloc(struct mely__rt *rt, struct mely__evcache *c)
{
    return mely__evcache_take(rt, c, false);
}

/* The same for a post already accepted (a drained inbox slot, a reserve):
 * passes the budget; NULL (ENOMEM) only when no memory can be mapped. */
static inline struct mely__event *mely__evcache_alloc_owed(struct mely__rt *rt,
                                                           struct mely__evcache *c)
{
    return mely__evcache_take(rt, c, true);
}

/* Gives a run (or unused) event back to its worker's cache. Owner only. */
static inline void mely__evcache_free(struct mely__rt *rt, struct mely__evcache *c,
                                      struct mely__event *ev)
{
    if (__builtin_expect(c->nloaded == MELY__MAG, 0))
        mely__evcache_spill(rt, c);
    ev->next = c->loaded;
    c->loaded = ev;
    c->nloaded++;
}

/* A color-queue for a worker's color. Under the worker's lock. */
static inline struct mely__colorq *mely__cq_alloc(struct mely__rt *rt, struct mely__cqslab *s)
{
    if (s->left == 0)
        return mely__cqslab_refill(rt, s);
    s->left--;
    return s->next++;
}

#endif
