/* SPDX-License-Identifier: MIT */
/*
 * cbuf.h (mely-compat): libasync's circular byte buffer (its aios.h included
 * it), for readv into the free space and writev out of the held bytes.
 *
 *   cbuf b(n);                  n bytes of room, empty
 *   b.iniov(), b.iniovcnt()     the free space as 0 to 2 iovecs (for readv);
 *   b.addbytes(k)               then: k bytes were written there
 *   b.outiov(), b.outiovcnt()   the held bytes as 0 to 2 iovecs (for writev);
 *   b.rembytes(k)               then: the first k bytes went out
 *   b.unrembytes(k)             gives back the k bytes before the first
 *                               (their contents are what they were)
 *   b.size() (= b.bytes()), b.space(), b[i], b.at(i)   bytes held, room
 *                               left, byte i from the first
 *   b.find(c)                   the index of the first c, or -1
 *   b.copyout(p, k)             copies the first k bytes to p and removes them
 *   b.resize(n)                 n bytes of room, keeping the bytes held
 *                               (n >= size())
 *   b.clear()                   empties it
 * Counts beyond what is held or free panic (assert). The iovecs are valid
 * until the next call on b. libasync's clear() made the buffer look full of
 * n bytes, and its resize() set its "empty" flag the wrong way round (an
 * empty buffer then looked full, and one holding bytes gave outiovcnt() 0);
 * here clear() empties and resize() keeps what is held. Not copyable; not
 * thread-safe: one color (or a lock) per buffer.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_CBUF_H
#define MELY_COMPAT_CBUF_H

#include <string.h>
#include <sys/uio.h>

#include "err.h"
#include "sysconf.h"

class cbuf {
    char *buf_;
    size_t cap_;
    size_t head_ = 0; /* index of the first byte held */
    size_t len_ = 0;  /* bytes held */
    iovec inv_[2];
    iovec outv_[2];

    size_t tail() const { return cap_ ? (head_ + len_) % cap_ : 0; }
    /* The held bytes up to the end of the array, and the rest. */
    size_t out_first() const { return len_ < cap_ - head_ ? len_ : cap_ - head_; }
    size_t in_first() const
    {
        size_t t = tail(), free = cap_ - len_;
        return free < cap_ - t ? free : cap_ - t;
    }

public:
    explicit cbuf(size_t n) : buf_(static_cast<char *>(xmalloc(n ? n : 1))), cap_(n) {}
    ~cbuf() { xfree(buf_); }
    cbuf(const cbuf &) = delete;
    cbuf &operator=(const cbuf &) = delete;

    void resize(size_t n)
    {
        assert(n >= len_);
        char *nb = static_cast<char *>(xmalloc(n ? n : 1));
        size_t had = len_;
        copyout(nb, had);
        xfree(buf_);
        buf_ = nb;
        cap_ = n;
        head_ = 0;
        len_ = had;
    }
    void clear() { head_ = len_ = 0; }

    size_t space() const { return cap_ - len_; }
    size_t bytes() const { return len_; }
    size_t size() const { return len_; }

    const iovec *iniov()
    {
        size_t a = in_first();
        inv_[0].iov_base = buf_ + tail();
        inv_[0].iov_len = a;
        inv_[1].iov_base = space() > a ? buf_ : nullptr;
        inv_[1].iov_len = space() - a;
        return inv_;
    }
    int iniovcnt() const { return (in_first() > 0) + (space() > in_first()); }
    void addbytes(size_t n)
    {
        assert(n <= space());
        len_ += n;
    }

    const iovec *outiov()
    {
        size_t a = out_first();
        outv_[0].iov_base = buf_ + head_;
        outv_[0].iov_len = a;
        outv_[1].iov_base = len_ > a ? buf_ : nullptr;
        outv_[1].iov_len = len_ - a;
        return outv_;
    }
    int outiovcnt() const { return len_ ? 1 + (len_ > out_first()) : 0; }
    void rembytes(size_t n)
    {
        if (!n)
            return;
        assert(n <= len_);
        head_ = (head_ + n) % cap_;
        len_ -= n;
    }
    void unrembytes(size_t n)
    {
        if (!n)
            return;
        assert(n <= space());
        head_ = (head_ + cap_ - n) % cap_;
        len_ += n;
    }

    char &at(size_t n) const
    {
        assert(n < len_);
        return buf_[(head_ + n) % cap_];
    }
    char &operator[](ptrdiff_t n) const { return at(n); }
    int find(char c) const
    {
        size_t a = out_first();
        if (const void *p = memchr(buf_ + head_, c, a))
            return (int)(static_cast<const char *>(p) - (buf_ + head_));
        if (const void *p = memchr(buf_, c, len_ - a))
            return (int)(a + (static_cast<const char *>(p) - buf_));
        return -1;
    }
    void copyout(void *dst, size_t n)
    {
        assert(n <= len_);
        size_t a = out_first() < n ? out_first() : n;
        memcpy(dst, buf_ + head_, a);
        memcpy(static_cast<char *>(dst) + a, buf_, n - a);
        rembytes(n);
    }
};

#endif /* MELY_COMPAT_CBUF_H */
