/*
 * alloc.cpp: callback memory. wrap() allocates a small callback per call and
 * the runtime frees it after the run, often on another worker: per-thread
 * caches of blocks in 16-byte size classes (up to 256 bytes) keep both off
 * malloc's slow path. A thread caches at most kMax blocks per class; beyond
 * that it hands a magazine of kMag blocks to a shared depot, where a thread
 * whose cache is empty takes one (a producer posting to other workers frees
 * nothing, its consumers allocate nothing: without the depot, every one of
 * the producer's callbacks came from malloc and every consumer's free went
 * to malloc, ~12% of a cross-core run in glibc's malloc). A thread returns
 * its cache to malloc when it exits; the depot lives as long as the process.
 * Sanitizer builds use malloc directly, so that they see every use.
 */
#include <cstddef>
#include <cstdlib>
#include <new>

#include <pthread.h>

#include "callback.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MELY_COMPAT_NO_CACHE 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MELY_COMPAT_NO_CACHE 1
#endif
#endif

#ifndef MELY_COMPAT_NO_CACHE
namespace {

const std::size_t kClass = 16, kClasses = 16, kMax = 4096, kMag = 64;

/* Every block is at least 16 bytes: a free one links the next block of its
 * chain, and the first block of a magazine in the depot the next magazine. */
struct block {
    block *next;
    block *next_mag;
};

/* Full magazines (chains of kMag blocks), per class. */
struct depot {
    pthread_mutex_t mu;
    block *mags;
};
depot g_depot[kClasses] = {};
pthread_once_t g_depot_once = PTHREAD_ONCE_INIT;

void depot_init()
{
    for (depot &d : g_depot)
        pthread_mutex_init(&d.mu, nullptr);
}

/* Plain data, so that a thread reaches its cache with one TLS access (no
 * guard, no wrapper); a pthread key drains it when the thread exits. */
struct sizeclass {
    block *head;
    std::size_t count;
};
struct cache {
    sizeclass cls[kClasses];
    bool registered;
};

thread_local cache t_cache __attribute__((tls_model("initial-exec")));
pthread_key_t g_key;
pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

void drain(void *arg)
{
    cache *t = static_cast<cache *>(arg);
    for (std::size_t c = 0; c < kClasses; c++) {
        while (block *b = t->cls[c].head) {
            t->cls[c].head = b->next;
            free(b);
        }
        t->cls[c].count = 0;
    }
    t->registered = false;
}

void make_key()
{
    pthread_key_create(&g_key, drain);
}

/* The first free on a thread: have its cache drained when the thread exits. */
__attribute__((noinline)) void register_cache(cache &t)
{
    pthread_once(&g_key_once, make_key);
    pthread_setspecific(g_key, &t);
    t.registered = true;
}

inline std::size_t size_class(std::size_t size)
{
    return (size + kClass - 1) / kClass - 1;
}

/* The cache of class c is full: kMag of its blocks go to the depot. */
__attribute__((noinline)) void give_magazine(sizeclass &k, std::size_t c)
{
    block *first = k.head, *last = first;
    for (std::size_t i = 1; i < kMag; i++) /* bounded: kMag */
        last = last->next;
    k.head = last->next;
    k.count -= kMag;
    last->next = nullptr;
    pthread_once(&g_depot_once, depot_init);
    depot &d = g_depot[c];
    pthread_mutex_lock(&d.mu);
    first->next_mag = d.mags;
    d.mags = first;
    pthread_mutex_unlock(&d.mu);
}

/* The cache of class c is empty: a magazine from the depot, if any. */
__attribute__((noinline)) block *take_magazine(sizeclass &k, std::size_t c)
{
    pthread_once(&g_depot_once, depot_init);
    depot &d = g_depot[c];
    pthread_mutex_lock(&d.mu);
    block *first = d.mags;
    if (first)
        d.mags = first->next_mag;
    pthread_mutex_unlock(&d.mu);
    if (!first)
        return nullptr;
    k.head = first->next;
    k.count = kMag - 1;
    return first;
}

} // namespace
#endif

void *mely_compat_cb_alloc(std::size_t size)
{
#ifndef MELY_COMPAT_NO_CACHE
    std::size_t c = size_class(size);
    if (c < kClasses) {
        sizeclass &k = t_cache.cls[c];
        if (block *b = k.head) {
            k.head = b->next;
            k.count--;
            return b;
        }
        if (block *b = take_magazine(k, c))
            return b;
        size = (c + 1) * kClass;
    }
#endif
    void *p = malloc(size);
    if (!p)
        throw std::bad_alloc();
    return p;
}

void mely_compat_cb_free(void *p, std::size_t size) noexcept
{
#ifndef MELY_COMPAT_NO_CACHE
    std::size_t c = size_class(size);
    if (c < kClasses) {
        cache &t = t_cache;
        sizeclass &k = t.cls[c];
        if (__builtin_expect(t.registered, 1)) {
            if (__builtin_expect(k.count >= kMax, 0))
                give_magazine(k, c);
            block *b = static_cast<block *>(p);
            b->next = k.head;
            k.head = b;
            k.count++;
            return;
        }
        if (!t.registered) {
            register_cache(t);
            mely_compat_cb_free(p, size);
            return;
        }
    }
#else
    (void)size;
#endif
    free(p);
}
