/* SPDX-License-Identifier: MIT */
/*
 * bbuddy.h (mely-compat): libasync's binary buddy allocator of offsets: it
 * hands out ranges of an address space (a file, a shared memory segment)
 * and allocates no memory of its own for them.
 *
 *   bbuddy bb(totsize, minalloc, maxalloc);
 *                          a space of totsize bytes (rounded down to a
 *                          multiple of maxalloc), all free; blocks are
 *                          powers of two from minalloc to maxalloc (each
 *                          rounded up to a power of two)
 *   off_t o = bb.alloc(n)  the offset of a free block of n bytes rounded up
 *                          to a power of two (at least minalloc), aligned on
 *                          its size; -1 if n > maxalloc or no block is free
 *   bb.dealloc(o, n)       gives the block back (n as given to alloc): it
 *                          merges with its free buddy, repeatedly, up to
 *                          maxalloc
 *   bb.space()             the free bytes; bb.gettotsize() the space's size
 *   bb.settotsize(n)       grows the space to n bytes (rounded down to a
 *                          multiple of maxalloc); the new part is free
 *   bb.maxalloc()          the largest block
 *   bb._check()            verifies the free maps (panics if broken)
 *
 * A request takes the smallest free block that fits, the one at the lowest
 * offset among those of its size, splitting it if larger. libasync chose
 * among the blocks of a size by a hint instead, so the same calls may give
 * other offsets than libasync's did, with the same guarantees. Freeing a
 * block that is free, or inside a free block, panics; so does a misaligned
 * or out-of-range offset, a size above maxalloc, and shrinking the space.
 * Not thread-safe: one color (or a lock) per allocator.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_BBUDDY_H
#define MELY_COMPAT_BBUDDY_H

#include <cstddef>
#include <cstdint>
#include <vector>

#include <sys/types.h>

#include "err.h"
#include "msb.h"
#include "opnew.h"

class bbuddy {
    typedef off_t totsize_t;

    /* The free blocks of one size: bit i is block [i << k, (i + 1) << k).
     * A free block's buddy and larger blocks over it are never free too. */
    struct freemap {
        std::vector<uint64_t> w;
        size_t nfree = 0;
        size_t lo = 0; /* the words below lo are all 0 */

        bool test(size_t i) const { return (w[i / 64] >> (i % 64)) & 1; }
        void set(size_t i)
        {
            w[i / 64] |= uint64_t(1) << (i % 64);
            nfree++;
            if (i / 64 < lo)
                lo = i / 64;
        }
        void clr(size_t i)
        {
            w[i / 64] &= ~(uint64_t(1) << (i % 64));
            nfree--;
        }
        /* The lowest free block; nfree must be > 0. */
        size_t lowest()
        {
            while (!w[lo])
                lo++;
            return lo * 64 + (size_t)__builtin_ctzll(w[lo]);
        }
    };

    totsize_t totsize;
    const u_int lmin; /* log2 of the smallest and the largest block */
    const u_int lmax;
    totsize_t spaceleft;
    std::vector<freemap> maps; /* maps[k - lmin]: blocks of 2^k bytes */

    freemap &fm(u_int k) { return maps[k - lmin]; }
    static u_int order(size_t n, u_int floor)
    {
        int k = log2c(n);
        return k < (int)floor ? floor : (u_int)k;
    }

public:
    bbuddy(totsize_t ts, size_t minalloc, size_t maxalloc)
        : totsize(0), lmin(order(minalloc, 0)), lmax(order(maxalloc, 0)), spaceleft(0)
    {
        if (lmax < lmin)
            panic("bbuddy: maxalloc %zu is below minalloc %zu\n", maxalloc, minalloc);
        maps.resize(lmax - lmin + 1);
        settotsize(ts);
    }
    bbuddy(const bbuddy &) = delete;
    bbuddy &operator=(const bbuddy &) = delete;

    totsize_t space() const { return spaceleft; }
    totsize_t gettotsize() const { return totsize; }
    size_t maxalloc() const { return (size_t)1 << lmax; }

    void settotsize(totsize_t ts)
    {
        ts &= ~(totsize_t)(maxalloc() - 1);
        if (ts < totsize)
            panic("bbuddy::settotsize: cannot shrink from %jd to %jd bytes\n",
                  (intmax_t)totsize, (intmax_t)ts);
        for (u_int k = lmin; k <= lmax; k++)
            fm(k).w.resize(((size_t)(ts >> k) + 63) / 64, 0);
        for (totsize_t o = totsize; o < ts; o += (totsize_t)maxalloc())
            fm(lmax).set((size_t)(o >> lmax));
        spaceleft += ts - totsize;
        totsize = ts;
    }

    off_t alloc(size_t n)
    {
        u_int k = order(n, lmin);
        if (k > lmax)
            return -1;
        u_int j = k;
        while (!fm(j).nfree)
            if (++j > lmax)
                return -1;
        size_t i = fm(j).lowest();
        fm(j).clr(i);
        while (j > k) { /* keep the lower half, free the upper one */
            i *= 2;
            fm(--j).set(i + 1);
        }
        spaceleft -= (totsize_t)1 << k;
        return (off_t)i << k;
    }

    void dealloc(off_t off, size_t len)
    {
        u_int k = order(len, lmin);
        if (k > lmax)
            panic("bbuddy::dealloc: invalid len %zu (maxalloc %zu)\n", len, maxalloc());
        if (off < 0 || (off & (((off_t)1 << k) - 1)) || off + ((off_t)1 << k) > totsize)
            panic("bbuddy::dealloc: invalid offset %jd for %zu bytes\n", (intmax_t)off, len);
        size_t i = (size_t)(off >> k);
        for (u_int a = k; a <= lmax; a++)
            if (fm(a).test(i >> (a - k)))
                panic("bbuddy::dealloc: %zu bytes at %jd are free already\n", len,
                      (intmax_t)off);
        spaceleft += (totsize_t)1 << k;
        for (; k < lmax && fm(k).test(i ^ 1); k++, i /= 2)
            fm(k).clr(i ^ 1);
        fm(k).set(i);
    }

    void _check()
    {
        totsize_t sum = 0;
        for (u_int k = lmin; k <= lmax; k++) {
            freemap &m = fm(k);
            size_t nblocks = (size_t)(totsize >> k), count = 0;
            if (m.w.size() != (nblocks + 63) / 64)
                panic("bbuddy::_check: map of 2^%u has %zu words\n", k, m.w.size());
            for (size_t wi = 0; wi < m.w.size(); wi++) {
                if (wi < m.lo && m.w[wi])
                    panic("bbuddy::_check: map of 2^%u: word %zu below the hint\n", k, wi);
                for (uint64_t b = m.w[wi]; b; b &= b - 1) {
                    size_t i = wi * 64 + (size_t)__builtin_ctzll(b);
                    if (i >= nblocks)
                        panic("bbuddy::_check: block %zu of 2^%u past the end\n", i, k);
                    if (k < lmax && m.test(i ^ 1))
                        panic("bbuddy::_check: buddies %zu and %zu of 2^%u both free\n", i,
                              i ^ 1, k);
                    for (u_int a = k + 1; a <= lmax; a++)
                        if (fm(a).test(i >> (a - k)))
                            panic("bbuddy::_check: block %zu of 2^%u inside a free block\n",
                                  i, k);
                    count++;
                }
            }
            if (count != m.nfree)
                panic("bbuddy::_check: map of 2^%u counts %zu free, holds %zu\n", k, m.nfree,
                      count);
            sum += (totsize_t)count << k;
        }
        if (sum != spaceleft)
            panic("bbuddy::_check: %jd bytes free in the maps, %jd counted\n", (intmax_t)sum,
                  (intmax_t)spaceleft);
    }
};

#endif /* MELY_COMPAT_BBUDDY_H */
