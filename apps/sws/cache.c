/* SPDX-License-Identifier: MIT */
/*
 * cache.c: the file cache's table (cache.h): entries by path in 16 shards,
 * reference counts, the budget and CLOCK eviction. files.c opens files and
 * builds the entries.
 *
 * Locks: a shard's mutex guards its buckets, its CLOCK ring and the links of
 * its entries; no code holds two shard locks. The totals (bytes, fds, n) are
 * atomics updated under the shard lock of the entry that changes them, read
 * anywhere (they may be a moment stale: the budget is kept to within the
 * entries being inserted at that moment). Entries are freed by their last
 * cache_put, outside any lock.
 *
 * Eviction (CLOCK, the second-chance approximation of LRU): a hit sets the
 * entry's `used` bit; when an insertion leaves the cache over its budget or
 * its descriptor count, the hand of a shard goes round its ring, clearing set
 * bits and evicting the first entry whose bit is clear, until the cache is
 * within its limits; shards are swept in turn from a rotating start. A sweep
 * takes at most 2n + 1 steps per shard (each entry seen twice at most), so
 * an insertion costs at most O(entries) even when nothing can be evicted
 * (pinned entries, or an over-budget cache of entries all in use).
 *
 * Stashes (the hit path without shared writes): a hot small file is asked for
 * by every worker at once, so its shard lock and its reference count would
 * bounce between their caches on every request (a lock, an unlock, an
 * increment and a decrement: about 3% of a 1 KB keep-alive request's CPU on
 * the 2-core machine). Each worker thread keeps a stash: 64 slots, direct-
 * mapped by path hash, each holding an in-memory entry and a batch of
 * references to it taken at once (64). A hit in the stash hands out one of
 * them without a lock or an atomic write, provided the cache's generation is
 * the one seen when the slot was filled: every removal of an entry from the
 * table (replacement, eviction, drop) bumps the generation, so a stashed entry
 * is served only while it is still the table's. A reference dropped on a
 * thread whose stash holds the entry goes back to the stash. A slot always
 * keeps one reference, so its entry stays valid memory; it gives its
 * references back when it is refilled with another entry or its thread exits.
 * An evicted entry can so outlive its eviction in stashes: at most 64 per
 * worker, of at most --cache-file-kb each. Streamed entries (a descriptor
 * each, and costs where an atomic does not show) are not stashed.
 */
#include "apps/sws/cache.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUCKETS0 64 /* per shard at start; doubled as entries come */
#define STASH_SLOTS 64
#define STASH_BATCH 64u /* references a stash slot takes at once */

uint64_t cache_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t hash(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a, then a mix so the top bits spread */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static unsigned shard_index(uint64_t h)
{
    return (unsigned)(h >> 60) % CACHE_SHARDS;
}

/* ---- a shard: buckets and ring (caller holds sh->mu) ---------------------------- */

static struct sws_entry **slot(struct cache_shard *sh, uint64_t h, const char *path, size_t len)
{
    struct sws_entry **p = &sh->buckets[h & (sh->nbuckets - 1)];
    while (*p && !((*p)->hash == h && (*p)->path_len == len && memcmp((*p)->path, path, len) == 0))
        p = &(*p)->next;
    return p;
}

/* Doubles the buckets; on failure the chains just grow longer. */
static void grow(struct cache_shard *sh)
{
    size_t nb = sh->nbuckets * 2;
    struct sws_entry **b = calloc(nb, sizeof(*b));
    if (!b)
        return;
    for (size_t i = 0; i < sh->nbuckets; i++)
        for (struct sws_entry *e = sh->buckets[i], *nx; e; e = nx) {
            nx = e->next;
            e->next = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
        }
    free(sh->buckets);
    sh->buckets = b;
    sh->nbuckets = nb;
}

/* Adds e to its bucket and to the ring, just behind the hand (the hand
 * reaches it last). */
static void link_entry(struct cache_shard *sh, struct sws_entry *e)
{
    if (sh->n >= sh->nbuckets)
        grow(sh);
    struct sws_entry **b = &sh->buckets[e->hash & (sh->nbuckets - 1)];
    e->next = *b;
    *b = e;
    sh->n++;
    if (!sh->hand) {
        e->ring_prev = e->ring_next = e;
        sh->hand = e;
    } else {
        e->ring_prev = sh->hand->ring_prev;
        e->ring_next = sh->hand;
        e->ring_prev->ring_next = e;
        sh->hand->ring_prev = e;
    }
}

/* Removes e (found at *p) from its bucket and the ring. The caller bumps
 * the cache's generation (stashes). */
static void unlink_entry(struct cache_shard *sh, struct sws_entry **p, struct sws_entry *e)
{
    *p = e->next;
    e->next = NULL;
    sh->n--;
    if (e->ring_next == e) {
        sh->hand = NULL;
    } else {
        e->ring_prev->ring_next = e->ring_next;
        e->ring_next->ring_prev = e->ring_prev;
        if (sh->hand == e)
            sh->hand = e->ring_next;
    }
    e->ring_prev = e->ring_next = NULL;
}

/* Counts e in (add) or out of the totals; out also bumps the generation,
 * after the unlink (stashed copies of e are no longer served). */
static void account(struct sws_cache *c, const struct sws_entry *e, bool add)
{
    if (!add)
        atomic_fetch_add_explicit(&c->gen, 1, memory_order_release);
    if (add) {
        atomic_fetch_add_explicit(&c->bytes, e->cost, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->n, 1, memory_order_relaxed);
        if (e->fd >= 0)
            atomic_fetch_add_explicit(&c->fds, 1, memory_order_relaxed);
    } else {
        atomic_fetch_sub_explicit(&c->bytes, e->cost, memory_order_relaxed);
        atomic_fetch_sub_explicit(&c->n, 1, memory_order_relaxed);
        if (e->fd >= 0)
            atomic_fetch_sub_explicit(&c->fds, 1, memory_order_relaxed);
    }
}

static bool bytes_over(const struct sws_cache *c)
{
    return atomic_load_explicit(&c->bytes, memory_order_relaxed) > c->budget;
}

static bool fds_over(const struct sws_cache *c)
{
    return atomic_load_explicit(&c->fds, memory_order_relaxed) > c->max_fds;
}

/* One shard's CLOCK sweep (caller holds sh->mu): evicted entries go to
 * *victims (linked by next) for the caller to cache_put after unlocking. */
static void sweep(struct sws_cache *c, struct cache_shard *sh, struct sws_entry **victims)
{
    for (size_t steps = 2 * sh->n + 1; sh->hand && steps > 0; steps--) {
        bool bytes = bytes_over(c), fds = fds_over(c);
        if (!bytes && !fds)
            return;
        struct sws_entry *e = sh->hand;
        sh->hand = e->ring_next;
        if (e->pinned || (!bytes && e->fd < 0))
            continue; /* evicting it would not help */
        if (atomic_load_explicit(&e->used, memory_order_relaxed)) {
            atomic_store_explicit(&e->used, false, memory_order_relaxed); /* a second chance */
            continue;
        }
        unlink_entry(sh, slot(sh, e->hash, e->path, e->path_len), e);
        account(c, e, false);
        atomic_fetch_add_explicit(&c->evictions, 1, memory_order_relaxed);
        e->next = *victims;
        *victims = e;
    }
}

static void put_list(struct sws_entry *e)
{
    while (e) {
        struct sws_entry *nx = e->next;
        cache_put(e);
        e = nx;
    }
}

/* Evicts until the cache is within its limits (or nothing more can go). */
static void trim(struct sws_cache *c)
{
    unsigned start = atomic_fetch_add_explicit(&c->trim_from, 1, memory_order_relaxed);
    for (unsigned i = 0; i < 2 * CACHE_SHARDS && (bytes_over(c) || fds_over(c)); i++) {
        struct cache_shard *sh = &c->shards[(start + i) % CACHE_SHARDS];
        struct sws_entry *victims = NULL;
        pthread_mutex_lock(&sh->mu);
        sweep(c, sh, &victims);
        pthread_mutex_unlock(&sh->mu);
        put_list(victims);
    }
}

/* ---- references, stashes ------------------------------------------------------------- */

void cache_hold(struct sws_entry *e)
{
    atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
}

static void put_n(struct sws_entry *e, unsigned n)
{
    if (atomic_fetch_sub_explicit(&e->refs, n, memory_order_acq_rel) != n)
        return;
    if (e->fd >= 0)
        close(e->fd);
    free(e); /* one block: the entry, its path, heads and body (files.c) */
}

struct stash_slot {
    const struct sws_cache *cache;
    struct sws_entry *e; /* NULL: empty */
    unsigned refs;       /* references to e this thread holds, >= 1 */
    uint_fast64_t gen;   /* the cache's generation when e was looked up */
};

/* Owner-only: the thread's stash (a key gives its references back at exit). */
struct stash {
    bool registered;
    struct stash_slot slot[STASH_SLOTS];
};

static _Thread_local struct stash stash;
static pthread_key_t stash_key;
static pthread_once_t stash_once = PTHREAD_ONCE_INIT;

static void slot_clear(struct stash_slot *sl)
{
    if (sl->e)
        put_n(sl->e, sl->refs);
    sl->e = NULL;
    sl->refs = 0;
}

static void stash_free(void *p)
{
    struct stash *st = p;
    for (unsigned i = 0; i < STASH_SLOTS; i++)
        slot_clear(&st->slot[i]);
}

static void stash_key_init(void)
{
    pthread_key_create(&stash_key, stash_free);
}

static struct stash_slot *slot_of(uint64_t h)
{
    return &stash.slot[h % STASH_SLOTS];
}

/* Puts e (with one reference of the caller's, which the slot takes) in sl. */
static void slot_fill(struct stash_slot *sl, const struct sws_cache *c, struct sws_entry *e,
                      uint_fast64_t gen)
{
    slot_clear(sl);
    if (!stash.registered) { /* once per thread */
        pthread_once(&stash_once, stash_key_init);
        stash.registered = pthread_setspecific(stash_key, &stash) == 0;
        if (!stash.registered) {
            put_n(e, 1); /* nothing would give it back */
            return;
        }
    }
    *sl = (struct stash_slot){ .cache = c, .e = e, .refs = 1, .gen = gen };
}

/* A reference from sl's batch (taken afresh when it runs out). */
static struct sws_entry *slot_take(struct stash_slot *sl)
{
    if (sl->refs == 1) {
        atomic_fetch_add_explicit(&sl->e->refs, STASH_BATCH, memory_order_relaxed);
        sl->refs += STASH_BATCH;
    }
    sl->refs--;
    return sl->e;
}

void cache_put(struct sws_entry *e)
{
    if (!e)
        return;
    struct stash_slot *sl = slot_of(e->hash);
    if (sl->e != e) {
        put_n(e, 1);
        return;
    }
    if (++sl->refs > 4 * STASH_BATCH) { /* given back here more than taken: return some */
        put_n(e, sl->refs - STASH_BATCH);
        sl->refs = STASH_BATCH;
    }
}

/* ---- the table ------------------------------------------------------------------------- */

/* The table's entry of path, with a reference for the caller (and one for
 * this thread's stash if it goes there), or NULL. */
static struct sws_entry *lookup(struct sws_cache *c, const char *path, size_t len, uint64_t h,
                                struct stash_slot *sl)
{
    /* The generation before the lookup: a removal after it invalidates the slot. */
    uint_fast64_t gen = atomic_load_explicit(&c->gen, memory_order_acquire);
    struct cache_shard *sh = &c->shards[shard_index(h)];
    pthread_mutex_lock(&sh->mu);
    struct sws_entry *e = *slot(sh, h, path, len);
    bool stash_it = e && e->fd < 0;
    if (e)
        atomic_fetch_add_explicit(&e->refs, stash_it ? 2 : 1, memory_order_relaxed);
    pthread_mutex_unlock(&sh->mu);
    if (stash_it)
        slot_fill(sl, c, e, gen);
    return e;
}

struct sws_entry *cache_get(struct sws_cache *c, const char *path, size_t len, bool *check)
{
    *check = false;
    uint64_t h = hash(path, len);
    struct stash_slot *sl = slot_of(h);
    struct sws_entry *e = sl->e;
    if (e && sl->cache == c && sl->gen == atomic_load_explicit(&c->gen, memory_order_acquire) &&
        e->hash == h && e->path_len == len && memcmp(e->path, path, len) == 0)
        e = slot_take(sl);
    else if (!(e = lookup(c, path, len, h, sl)))
        return NULL;
    if (!atomic_load_explicit(&e->used, memory_order_relaxed)) /* no store when set */
        atomic_store_explicit(&e->used, true, memory_order_relaxed);
    if (!e->pinned) {
        uint64_t now = cache_now_ns();
        uint_fast64_t t = atomic_load_explicit(&e->checked_ns, memory_order_relaxed);
        /* One request checks; the others meanwhile take the entry as it is. */
        if (now - t >= c->valid_ns)
            *check = atomic_compare_exchange_strong_explicit(&e->checked_ns, &t, now,
                                                             memory_order_relaxed,
                                                             memory_order_relaxed);
    }
    return e;
}

void cache_insert(struct sws_cache *c, struct sws_entry *e)
{
    e->hash = hash(e->path, e->path_len);
    atomic_store_explicit(&e->checked_ns, cache_now_ns(), memory_order_relaxed);
    cache_hold(e); /* the table's */
    struct cache_shard *sh = &c->shards[shard_index(e->hash)];
    pthread_mutex_lock(&sh->mu);
    struct sws_entry **p = slot(sh, e->hash, e->path, e->path_len);
    struct sws_entry *old = *p;
    if (old) {
        unlink_entry(sh, p, old);
        account(c, old, false);
    }
    link_entry(sh, e);
    account(c, e, true);
    pthread_mutex_unlock(&sh->mu);
    cache_put(old);
    trim(c);
}

void cache_remove(struct sws_cache *c, struct sws_entry *e)
{
    struct cache_shard *sh = &c->shards[shard_index(e->hash)];
    pthread_mutex_lock(&sh->mu);
    struct sws_entry **p = slot(sh, e->hash, e->path, e->path_len);
    bool there = *p == e;
    if (there) {
        unlink_entry(sh, p, e);
        account(c, e, false);
    }
    pthread_mutex_unlock(&sh->mu);
    if (there)
        cache_put(e);
}

/* ---- set-up and tear-down ---------------------------------------------------------------- */

int cache_table_init(struct sws_cache *c, const struct sws_cache_config *cfg)
{
    memset(c, 0, sizeof(*c));
    c->rootfd = -1;
    c->budget = cfg->budget;
    c->max_file = cfg->max_file;
    c->max_fds = cfg->max_fds;
    c->valid_ns = (uint64_t)cfg->valid_ms * 1000000u;
    for (unsigned i = 0; i < CACHE_SHARDS; i++) {
        struct cache_shard *sh = &c->shards[i];
        pthread_mutex_init(&sh->mu, NULL);
        sh->nbuckets = BUCKETS0;
        sh->buckets = calloc(BUCKETS0, sizeof(*sh->buckets));
        if (!sh->buckets)
            return -1; /* cache_free frees what was made */
    }
    return 0;
}

void cache_free(struct sws_cache *c)
{
    if (!c->shards[0].nbuckets)
        return; /* never initialized (a zeroed struct) */
    for (unsigned i = 0; i < CACHE_SHARDS; i++) {
        struct cache_shard *sh = &c->shards[i];
        if (!sh->nbuckets)
            continue; /* never initialized */
        for (size_t b = 0; b < sh->nbuckets && sh->buckets; b++)
            while (sh->buckets[b]) {
                struct sws_entry *e = sh->buckets[b];
                unlink_entry(sh, &sh->buckets[b], e);
                account(c, e, false);
                cache_put(e);
            }
        free(sh->buckets);
        pthread_mutex_destroy(&sh->mu);
    }
    if (c->rootfd >= 0)
        close(c->rootfd);
    memset(c, 0, sizeof(*c));
    c->rootfd = -1;
}
