/*
 * alloc.cpp: callback memory. wrap() allocates a small callback per call and
 * the runtime frees it after the run, often on another worker: per-thread
 * caches of blocks in 16-byte size classes (up to 256 bytes) keep both off
 * malloc's slow path. A thread caches at most kMax blocks per class (more go
 * back to malloc), and returns its cache to malloc when it exits.
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

const std::size_t kClass = 16, kClasses = 16, kMax = 4096;

struct block {
    block *next;
};

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
        if (__builtin_expect(k.count < kMax && t.registered, 1)) {
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
