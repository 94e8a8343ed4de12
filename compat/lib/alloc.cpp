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

#include "callback.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MELY_COMPAT_NO_CACHE 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MELY_COMPAT_NO_CACHE 1
#endif
#endif

namespace {

const std::size_t kClass = 16, kClasses = 16, kMax = 4096;

struct block {
    block *next;
};

struct cache {
    block *head[kClasses] = {};
    unsigned count[kClasses] = {};
    ~cache()
    {
        for (std::size_t c = 0; c < kClasses; c++)
            while (block *b = head[c]) {
                head[c] = b->next;
                free(b);
            }
    }
};

#ifndef MELY_COMPAT_NO_CACHE
thread_local cache t_cache __attribute__((tls_model("initial-exec")));
#endif

inline std::size_t size_class(std::size_t size)
{
    return (size + kClass - 1) / kClass - 1;
}

} // namespace

void *mely_compat_cb_alloc(std::size_t size)
{
#ifndef MELY_COMPAT_NO_CACHE
    std::size_t c = size_class(size);
    if (c < kClasses) {
        cache &t = t_cache;
        if (block *b = t.head[c]) {
            t.head[c] = b->next;
            t.count[c]--;
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
        if (t.count[c] < kMax) {
            block *b = static_cast<block *>(p);
            b->next = t.head[c];
            t.head[c] = b;
            t.count[c]++;
            return;
        }
    }
#else
    (void)size;
#endif
    free(p);
}
