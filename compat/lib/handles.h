/* SPDX-License-Identifier: MIT */
/*
 * handles.h: generation-checked handles for the legacy cancel functions
 * (timecb_remove, lazycb_remove, tcpconnect_cancel).
 *
 * A legacy handle (timecb_t *, lazycb_t *, tcpconnect_t *) used to be the
 * address of a record freed when the callback ran: a second remove, or one
 * after the callback ran, read freed memory and, once the allocator had given
 * the address to a new timer, cancelled that one. Here the pointer is no
 * address: it encodes a slot of a table whose slots are never freed, and the
 * slot's generation when the handle was made:
 *
 *     handle = (generation << 32) | (slot + 1)        (never NULL)
 *
 * A slot's generation moves on when its callback starts or is cancelled, so
 * an old handle then finds another generation and does nothing; and whatever
 * a handle holds, reading its slot reads live memory (valgrind, ASan), and a
 * value that no slot matches is ignored. A generation comes back after 2^32
 * uses of one slot; a handle kept that long would name the new user.
 *
 * Storage: chunks allocated as needed and never freed, 64 slots then doubling
 * (chunk c >= 1 holds the 2^(c+5) slots from index 2^(c+5) on), up to 2^25
 * slots: a fixed directory of 20 chunk pointers, no copying when it grows.
 * Free slots form a lock-free stack (Treiber's) whose head carries a tag that
 * every change bumps, against ABA. Each slot has a mutex: its users order
 * what they do on the slot with it (never two slots' at once).
 */
#ifndef MELY_COMPAT_HANDLES_H
#define MELY_COMPAT_HANDLES_H

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>

#include "internal.h"

namespace mely_compat {

static_assert(sizeof(void *) == 8, "handles pack a 32-bit generation and a slot into a pointer");

template <class T> class handle_table {
public:
    /* what: the legacy function, for the message past the last slot. */
    explicit handle_table(const char *what) : what_(what) {}

    struct slot {
        std::mutex mu;
        uint32_t gen = 0;              /* under mu */
        std::atomic<uint32_t> next{0}; /* on the free stack: the next free slot + 1 */
        T val{};                       /* the user's, under mu */
    };

    static void *encode(uint32_t i, uint32_t gen)
    {
        return reinterpret_cast<void *>((uintptr_t)gen << 32 | (uintptr_t)(i + 1));
    }
    static uint32_t index_of(const void *h) { return (uint32_t)(uintptr_t)h - 1; }
    static uint32_t gen_of(const void *h) { return (uint32_t)((uintptr_t)h >> 32); }

    /* The slot of index i, which must have been allocated once. */
    slot &at(uint32_t i)
    {
        unsigned c = chunk_of(i);
        return chunks_[c].load(std::memory_order_acquire)[i - chunk_start(c)];
    }

    /* The slot handle h names, or NULL if it names none (it was never made
     * by encode()). Any thread. */
    slot *find(const void *h)
    {
        uint32_t i = index_of(h);
        if (!h || i >= capacity_.load(std::memory_order_acquire))
            return nullptr;
        return &at(i);
    }

    /* A free slot's index; its generation is the one its handle gets. Any
     * thread. Exits with a message past 2^25 slots in use. */
    uint32_t alloc()
    {
        uint64_t head = head_.load(std::memory_order_acquire);
        for (;;) {
            uint32_t top = (uint32_t)head;
            if (!top) {
                grow();
                head = head_.load(std::memory_order_acquire);
                continue;
            }
            /* The slot may be taken and reused meanwhile: then the tag has
             * moved and the exchange fails (its memory stays valid). */
            uint32_t next = at(top - 1).next.load(std::memory_order_relaxed);
            if (head_.compare_exchange_weak(head, retag(head, next), std::memory_order_acquire,
                                            std::memory_order_acquire))
                return top - 1;
        }
    }

    /* alloc()'s slot, its index in *i. */
    slot &alloc_slot(uint32_t *i)
    {
        *i = alloc();
        return at(*i);
    }

    /* Gives slot i back, once its generation has moved on and nobody uses
     * its value any more. Any thread. */
    void release(uint32_t i) { push(i, i); }

private:
    static constexpr unsigned k_first_bits = 6; /* chunk 0: 64 slots */
    static constexpr unsigned k_chunks = 20;    /* 2^25 slots in all */

    static unsigned chunk_of(uint32_t i)
    {
        if (i < (1u << k_first_bits))
            return 0;
        return (unsigned)(31 - __builtin_clz(i)) - (k_first_bits - 1);
    }
    static uint32_t chunk_start(unsigned c) { return c ? 1u << (c + k_first_bits - 1) : 0; }
    static uint32_t chunk_size(unsigned c) { return c ? chunk_start(c) : 1u << k_first_bits; }
    static uint64_t retag(uint64_t head, uint32_t top) { return ((head >> 32) + 1) << 32 | top; }

    /* Pushes the chain first..last (linked by next) onto the free stack. */
    void push(uint32_t first, uint32_t last)
    {
        std::atomic<uint32_t> &link = at(last).next;
        uint64_t head = head_.load(std::memory_order_relaxed);
        do {
            link.store((uint32_t)head, std::memory_order_relaxed);
        } while (!head_.compare_exchange_weak(head, retag(head, first + 1),
                                              std::memory_order_release,
                                              std::memory_order_relaxed));
    }

    /* Adds a chunk of free slots, unless another thread just did. */
    void grow()
    {
        std::lock_guard<std::mutex> g(grow_mu_);
        if ((uint32_t)head_.load(std::memory_order_acquire))
            return;
        unsigned c = nchunks_;
        if (c == k_chunks)
            die(what_, -ENOMEM); /* 2^25 handles in use */
        uint32_t start = chunk_start(c), n = chunk_size(c);
        slot *s = new slot[n];
        for (uint32_t k = 0; k + 1 < n; k++)
            s[k].next.store(start + k + 2, std::memory_order_relaxed);
        chunks_[c].store(s, std::memory_order_release);
        nchunks_ = c + 1;
        capacity_.store(start + n, std::memory_order_release);
        push(start, start + n - 1);
    }

    std::atomic<uint64_t> head_{0}; /* tag << 32 | (top free slot + 1), 0: empty */
    std::atomic<uint32_t> capacity_{0};
    std::atomic<slot *> chunks_[k_chunks] = {};
    std::mutex grow_mu_;
    unsigned nchunks_ = 0; /* under grow_mu_ */
    const char *what_;
};

/* A new handle's slot in tab (its index in *i) for a legacy call (what) with
 * callback cb, which it counts; creates the runtime first. */
template <class Tab>
typename Tab::slot &new_handle(Tab &tab, const callback_base *cb, const char *what, uint32_t *i)
{
    require_callback(cb, what);
    runtime();
    cb->refcount_inc();
    return tab.alloc_slot(i);
}

} // namespace mely_compat

#endif
