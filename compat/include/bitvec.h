/* SPDX-License-Identifier: MIT */
/*
 * bitvec.h (mely-compat): libasync's resizable vector of bits.
 *
 *   bitvec b, b(n)              empty, or n bits all 0
 *   b.setsize(n), b.zsetsize(n), b.osetsize(n)
 *                               resize to n bits; bits beyond the old size
 *                               are 0 (setsize, zsetsize) or 1 (osetsize);
 *                               bits below it keep their values
 *   b.size()
 *   b[i], b.at(i)               bit i (a bool; b[i] on a non-const bitvec is
 *                               a proxy: b[i] = true, b[i] ^= x, bool(b[i]))
 *   b.setbit(i, v)              write bit i. <sys/param.h>, which async.h
 *                               includes, has a setbit(a, i) macro: call it as
 *                               (b.setbit)(i, v), or #undef setbit
 *   b.setrange(s, e, v)         bits s to e - 1 set to v
 *   b.first_unset_bit()         the index of the first 0 bit, -1 if none
 *   swap(a, b), copies, assignment
 *   sb << b, warn << b          the bits as '0' and '1' characters, bit 0
 *                               first (strbuf_cat, and any std::ostream)
 *
 * Indexes and ranges are checked (assert) only when the program defines
 * CHECK_BOUNDS, as in libasync. libasync's setsize left the new bits
 * undefined; they are 0 here. Not thread-safe: one color (or a lock) per
 * bitvec.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_BITVEC_H
#define MELY_COMPAT_BITVEC_H

#include <cstddef>
#include <ostream>
#include <utility>
#include <vector>

#include "str.h"

#ifndef assert /* keep async.h's assert, which NDEBUG does not remove */
#include <assert.h>
#endif

#ifdef CHECK_BOUNDS
#define MELY_COMPAT_BITVEC_CHECK(cond) assert(cond)
#else
#define MELY_COMPAT_BITVEC_CHECK(cond) ((void)0)
#endif

class bitvec {
    typedef unsigned long word_t;
    enum { wbits = 8 * sizeof(word_t) };

    /* Bits past nbits_ in the last word are always 0. */
    std::vector<word_t> w_;
    size_t nbits_ = 0;

    static word_t bitmask(size_t i) { return word_t(1) << (i % wbits); }
    /* Sets bits [s, e) to v, a word at a time. */
    void fill(size_t s, size_t e, bool v)
    {
        while (s < e) {
            size_t off = s % wbits, n = e - s;
            if (n > wbits - off)
                n = wbits - off;
            word_t m = n == wbits ? ~word_t(0) : ((word_t(1) << n) - 1) << off;
            if (v)
                w_[s / wbits] |= m;
            else
                w_[s / wbits] &= ~m;
            s += n;
        }
    }
    void resize(size_t n, bool v)
    {
        size_t old = nbits_;
        if (n < old)
            fill(n, old, false); /* keep the bits past the end 0 */
        w_.resize((n + wbits - 1) / wbits, 0);
        nbits_ = n;
        if (n > old && v)
            fill(old, n, true);
    }

public:
    /* What b[i] gives on a non-const bitvec. */
    class wbit {
        friend class bitvec;
        word_t *word_;
        word_t mask_;
        wbit(word_t *w, word_t m) : word_(w), mask_(m) {}

    public:
        operator bool() const { return (*word_ & mask_) != 0; }
        wbit &operator=(bool v)
        {
            if (v)
                *word_ |= mask_;
            else
                *word_ &= ~mask_;
            return *this;
        }
        wbit &operator=(const wbit &o) { return *this = bool(o); }
        wbit &operator^=(bool v)
        {
            if (v)
                *word_ ^= mask_;
            return *this;
        }
    };

    bitvec() {}
    bitvec(size_t n) { resize(n, false); }
    bitvec(const bitvec &) = default;
    bitvec(bitvec &&o) noexcept : w_(std::move(o.w_)), nbits_(o.nbits_) { o.nbits_ = 0; }
    bitvec &operator=(const bitvec &) = default;
    bitvec &operator=(bitvec &&o) noexcept
    {
        w_.swap(o.w_);
        std::swap(nbits_, o.nbits_);
        return *this;
    }

    void setsize(size_t n) { resize(n, false); }
    void zsetsize(size_t n) { resize(n, false); }
    void osetsize(size_t n) { resize(n, true); }
    size_t size() const { return nbits_; }

    bool at(ptrdiff_t i) const
    {
        MELY_COMPAT_BITVEC_CHECK(i >= 0 && (size_t)i < nbits_);
        return (w_[(size_t)i / wbits] & bitmask((size_t)i)) != 0;
    }
    bool operator[](ptrdiff_t i) const { return at(i); }
    wbit operator[](ptrdiff_t i)
    {
        MELY_COMPAT_BITVEC_CHECK(i >= 0 && (size_t)i < nbits_);
        return wbit(&w_[(size_t)i / wbits], bitmask((size_t)i));
    }
    void(setbit)(ptrdiff_t i, bool v) { (*this)[i] = v; }
    void setrange(size_t s, size_t e, bool v)
    {
        MELY_COMPAT_BITVEC_CHECK(s <= e && e <= nbits_);
        fill(s, e, v);
    }

    int first_unset_bit() const
    {
        for (size_t k = 0; k < w_.size(); k++) {
            word_t zeros = ~w_[k];
            if (k == w_.size() - 1 && nbits_ % wbits)
                zeros &= (word_t(1) << (nbits_ % wbits)) - 1;
            if (zeros)
                return (int)(k * wbits + (size_t)__builtin_ctzl(zeros));
        }
        return -1;
    }

    friend void swap(bitvec &a, bitvec &b) noexcept
    {
        a.w_.swap(b.w_);
        std::swap(a.nbits_, b.nbits_);
    }
};

inline const strbuf &strbuf_cat(const strbuf &sb, const bitvec &v)
{
    std::string s;
    s.reserve(v.size());
    for (size_t i = 0; i < v.size(); i++)
        s += v[(ptrdiff_t)i] ? '1' : '0';
    sb.buf(s.data(), s.size());
    return sb;
}

inline std::ostream &operator<<(std::ostream &os, const bitvec &v)
{
    for (size_t i = 0; i < v.size(); i++)
        os.put(v[(ptrdiff_t)i] ? '1' : '0');
    return os;
}

#endif /* MELY_COMPAT_BITVEC_H */
