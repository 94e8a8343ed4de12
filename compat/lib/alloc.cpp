/* SPDX-License-Identifier: MIT */
/*
 * alloc.cpp: callback memory. wrap() allocates a small callback per call and
 * the runtime frees it after the run, often on another worker.
 *
 * Blocks come in size classes of whole cache lines (64, 128, 192, 256
 * bytes), cut from 64-byte-aligned chunks of 64 KiB, so that a callback of up
 * to 64 bytes is one line, shared with no other callback: a worker writing a
 * new callback never takes the line of one that another worker is reading.
 * Each thread keeps, per class, a stack of up to kStack free block addresses
 * (mely_compat_cb_stack; the fast paths are inline in callback.h): an
 * allocation pops one, a free pushes one, and neither touches the block
 * itself (a free list linked through the blocks makes every allocation
 * wait for a load of the block it takes, a cache miss when another worker
 * freed it last). A full stack gives its top kMag addresses to a shared
 * depot as a magazine; an empty one takes a magazine back, or else cuts
 * new blocks from the thread's current chunk. So a producer that posts to
 * other workers (and frees little) takes back the magazines its consumers
 * (which allocate little) gave, one lock per kMag callbacks. kStack covers
 * a burst of a thousand posts and their frees without a magazine moving.
 *
 * Memory: blocks are never given back to malloc; a thread that exits gives
 * its blocks to the depot. The callback memory of a process is thus the most
 * it ever held at once (callbacks queued, running, or held by handles, plus
 * up to kStack free ones per class and thread), reused from then on: it does
 * not grow from one burst to the next. Larger callbacks use malloc.
 * AddressSanitizer builds use malloc for every callback, so that they see every
 * use (a use after free above all); ThreadSanitizer builds keep the stacks
 * and the depot, so that it checks them.
 */
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include <pthread.h>

#include "callback.h"

#if defined(__SANITIZE_ADDRESS__)
#define MELY_COMPAT_NO_CACHE 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MELY_COMPAT_NO_CACHE 1
#endif
#endif

/* NULL for good in AddressSanitizer builds: every callback goes to the slow
 * paths, and malloc. */
__thread mely_compat_cb_stack *mely_compat_cb_stacks __attribute__((tls_model("initial-exec")));

#ifndef MELY_COMPAT_NO_CACHE
namespace {

const std::size_t kLine = MELY_COMPAT_CB_LINE, kClasses = MELY_COMPAT_CB_CLASSES;
const std::size_t kChunk = 64 * 1024;
const unsigned kMag = 64, kStack = 2048;

/* kMag free blocks of one class (fewer only from an exiting thread). */
struct magazine {
    magazine *next;
    unsigned n;
    void *slot[kMag];
};

/* Per class: full magazines, and empty ones to carry the next. */
struct depot {
    std::mutex mu;
    magazine *full = nullptr;
    magazine *empty = nullptr;
};
depot g_depot[kClasses];
std::atomic<std::size_t> g_chunk_bytes{0};

/* A thread's cache: the stacks (first: mely_compat_cb_stacks points here),
 * then per class the uncut part of its current chunk, and the slots. */
struct cache {
    mely_compat_cb_stack stk[kClasses];
    char *bump[kClasses], *end[kClasses];
    void *slots[kClasses][kStack];
};

pthread_key_t g_key;
bool g_key_ok; /* false: the blocks of exiting threads are lost */
pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

inline std::size_t class_size(std::size_t c)
{
    return (c + 1) * kLine;
}

/* A magazine to fill: the depot's empty ones first. */
magazine *shell(depot &d)
{
    magazine *m;
    {
        std::lock_guard<std::mutex> g(d.mu);
        m = d.empty;
        if (m)
            d.empty = m->next;
    }
    if (!m && !(m = static_cast<magazine *>(malloc(sizeof(magazine)))))
        throw std::bad_alloc();
    return m;
}

/* The top n (<= kMag) blocks of stack s go to the depot, as one magazine. */
void give(mely_compat_cb_stack &s, std::size_t c, unsigned n)
{
    depot &d = g_depot[c];
    magazine *m = shell(d);
    s.top -= n;
    m->n = n;
    memcpy(m->slot, s.top, n * sizeof(void *));
    std::lock_guard<std::mutex> g(d.mu);
    m->next = d.full;
    d.full = m;
}

/* A thread exits: its free blocks, cut or not, go to the depot. */
void drain(void *arg)
{
    cache *t = static_cast<cache *>(arg);
    for (std::size_t c = 0; c < kClasses; c++) {
        mely_compat_cb_stack &s = t->stk[c];
        for (;;) {
            while (s.top != s.limit && t->bump[c] + class_size(c) <= t->end[c]) {
                *s.top++ = t->bump[c];
                t->bump[c] += class_size(c);
            }
            unsigned n = (unsigned)(s.top - s.base);
            if (!n)
                break;
            try {
                give(s, c, n < kMag ? n : kMag);
            } catch (const std::bad_alloc &) {
                break; /* no memory for a magazine: these blocks are lost */
            }
        }
    }
    mely_compat_cb_stacks = nullptr;
    free(t);
}

void make_key()
{
    g_key_ok = pthread_key_create(&g_key, drain) == 0;
}

cache *make_cache()
{
    pthread_once(&g_key_once, make_key);
    cache *t = static_cast<cache *>(malloc(sizeof(cache)));
    if (!t)
        return nullptr;
    for (std::size_t c = 0; c < kClasses; c++) {
        t->stk[c].base = t->stk[c].top = t->slots[c];
        t->stk[c].limit = t->slots[c] + kStack;
        t->bump[c] = t->end[c] = nullptr;
    }
    if (g_key_ok)
        pthread_setspecific(g_key, t);
    mely_compat_cb_stacks = t->stk;
    return t;
}

inline cache *my_cache()
{
    /* stk is the first member: the stacks' address is the cache's. */
    return reinterpret_cast<cache *>(mely_compat_cb_stacks);
}

} // namespace
#endif

std::size_t mely_compat_cb_bytes() noexcept
{
#ifndef MELY_COMPAT_NO_CACHE
    return g_chunk_bytes.load(std::memory_order_relaxed);
#else
    return 0;
#endif
}

/* The stack of size's class is empty, or there is none yet, or size is too
 * large for a class: a magazine from the depot, or blocks cut from the
 * thread's chunk, or malloc. */
void *mely_compat_cb_alloc_slow(std::size_t size)
{
#ifndef MELY_COMPAT_NO_CACHE
    std::size_t c = (size - 1) / kLine;
    if (size != 0 && c < kClasses) {
        cache *t = my_cache();
        if (!t && !(t = make_cache()))
            throw std::bad_alloc();
        mely_compat_cb_stack &s = t->stk[c];
        if (s.top != s.base)
            return *--s.top;
        depot &d = g_depot[c];
        magazine *m;
        {
            std::lock_guard<std::mutex> g(d.mu);
            m = d.full;
            if (m)
                d.full = m->next;
        }
        if (m) {
            memcpy(s.top, m->slot, m->n * sizeof(void *));
            s.top += m->n;
            std::lock_guard<std::mutex> g(d.mu);
            m->next = d.empty;
            d.empty = m;
        } else {
            if (t->bump[c] + class_size(c) > t->end[c]) {
                void *chunk = aligned_alloc(kLine, kChunk);
                if (!chunk)
                    throw std::bad_alloc();
                g_chunk_bytes.fetch_add(kChunk, std::memory_order_relaxed);
                t->bump[c] = static_cast<char *>(chunk);
                t->end[c] = t->bump[c] + kChunk;
            }
            for (unsigned i = 0; i < kMag && t->bump[c] + class_size(c) <= t->end[c]; i++) {
                *s.top++ = t->bump[c];
                t->bump[c] += class_size(c);
            }
        }
        return *--s.top;
    }
#endif
    void *p = malloc(size);
    if (!p)
        throw std::bad_alloc();
    return p;
}

/* The stack of size's class is full, or there is none yet, or size is too
 * large for a class: kMag blocks go to the depot, then p is kept; or free. */
void mely_compat_cb_free_slow(void *p, std::size_t size) noexcept
{
#ifndef MELY_COMPAT_NO_CACHE
    std::size_t c = (size - 1) / kLine;
    if (size != 0 && c < kClasses) {
        cache *t = my_cache();
        if (!t && !(t = make_cache()))
            return; /* no memory for a cache: the block is lost */
        mely_compat_cb_stack &s = t->stk[c];
        if (s.top == s.limit) {
            try {
                give(s, c, kMag);
            } catch (const std::bad_alloc &) {
                return; /* no memory for a magazine: the block is lost */
            }
        }
        *s.top++ = p;
        return;
    }
#else
    (void)size;
#endif
    free(p);
}
