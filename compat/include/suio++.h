/* SPDX-License-Identifier: MIT */
/*
 * suio++.h (mely-compat): libasync's output buffer, suio, as far as strbuf
 * and the programs that write a strbuf to a descriptor use it.
 *
 *   u.copy(p, n), u.print(p, n)   append n bytes (both copy here)
 *   u.fill(c, n)                  append n copies of c
 *   u.getspace(n)                 a pointer to n writable bytes at the end;
 *                                 u.print(thatpointer, k) then appends the k
 *                                 bytes written there without a copy
 *   u.copyu(&v), u.take(&v)       append v's bytes (take also empties v)
 *   u.resid()                     bytes held
 *   u.rembytes(n)                 drop the first n bytes (n <= resid())
 *   u.output(fd)                  write as much as the descriptor takes:
 *                                 1 if some bytes went, 0 if none (EAGAIN or
 *                                 nothing held), -1 on another error (errno)
 *   u.input(fd, n)                read up to n bytes; returns read()'s result
 *   u.copyout(buf, n)             copy up to n bytes out, without removing them
 *   u.linelen()                   length of the first line with its '\n', or 0
 *   u.iov(), u.iovcnt(), u.iovlim()   the bytes as an iovec array (one entry,
 *                                 none when empty), valid until the next change
 *   u.clear()
 *   suio_print(u, p, n), suio_copy, suio_fill, suio_uprintf(u, fmt, ...),
 *   suio_vuprintf, suio_flatten(u) (a malloc'd copy); with str.h also
 *   suio_print(u, s) and suio_getline(u) (the first line without its "\n" or
 *   "\r\n", removed from u; a null str while no whole line is held)
 *
 * Unlike libasync's, this suio keeps its bytes in one contiguous buffer and
 * never refers to the caller's memory (print copies), so hold_onto() and
 * breakiov() have nothing to do; iovcb() (callbacks as bytes drain) is absent.
 * Not thread-safe: one color (or a lock) per buffer.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_SUIOXX_H
#define MELY_COMPAT_SUIOXX_H

#include <cstdarg>
#include <cstddef>
#include <cstring>

#include <sys/types.h>
#include <sys/uio.h>

#include "sysconf.h" /* as libasync's (through opnew.h) */
#include "vec.h"

class str;

class suio {
    char *buf_ = nullptr;
    size_t head_ = 0; /* first byte held */
    size_t tail_ = 0; /* one past the last byte held */
    size_t cap_ = 0;
    mutable iovec view_;

    /* Makes n bytes free after tail_; may move the bytes. */
    char *room(size_t n)
    {
        if (cap_ - tail_ < n)
            grow(n);
        return buf_ + tail_;
    }
    void grow(size_t n);

public:
    enum { smallbufsize = 0x80 };
    enum { blocksize = 0x2000 };

    suio() {}
    ~suio();
    suio(const suio &) = delete;
    suio &operator=(const suio &) = delete;

    void clear() { head_ = tail_ = 0; }
    size_t resid() const { return tail_ - head_; }

    void copy(const void *p, size_t n)
    {
        if (!n)
            return;
        const char *src = static_cast<const char *>(p);
        if (src >= buf_ && src < buf_ + cap_) {
            /* Bytes of this buffer: room() may move them. */
            size_t off = (size_t)(src - buf_);
            size_t old_head = head_;
            char *dst = room(n);
            src = buf_ + off - old_head + head_;
            memmove(dst, src, n);
        } else {
            memcpy(room(n), src, n);
        }
        tail_ += n;
    }
    void print(const void *p, size_t n)
    {
        if (p == buf_ + tail_ && n <= cap_ - tail_)
            tail_ += n; /* written in place after getspace() */
        else
            copy(p, n);
    }
    void fill(char c, ssize_t n)
    {
        if (n <= 0)
            return;
        memset(room((size_t)n), c, (size_t)n);
        tail_ += (size_t)n;
    }
    char *getspace(size_t n) { return room(n); }
    void copyu(const suio *u) { copy(u->buf_ + u->head_, u->resid()); }
    void take(suio *u)
    {
        if (u == this)
            return;
        copyu(u);
        u->clear();
    }
    void rembytes(size_t n);

    const iovec *iov() const
    {
        view_.iov_base = buf_ + head_;
        view_.iov_len = resid();
        return &view_;
    }
    size_t iovcnt() const { return resid() ? 1 : 0; }
    const iovec *iovlim() const { return iov() + iovcnt(); }

    int output(int fd, int cnt = -1);
    int input(int fd, size_t len = blocksize);
    size_t copyout(void *buf, size_t len) const
    {
        size_t n = len < resid() ? len : resid();
        if (n)
            memcpy(buf, buf_ + head_, n);
        return n;
    }
    size_t copyout(void *buf) const { return copyout(buf, (size_t)-1); }
    size_t linelen() const
    {
        const void *nl = resid() ? memchr(buf_ + head_, '\n', resid()) : nullptr;
        return nl ? (size_t)(static_cast<const char *>(nl) - (buf_ + head_)) + 1 : 0;
    }

    /* print() copies, so there is nothing to keep alive. */
    void hold_onto(const str &) {}
    void breakiov() {}
};

/* printf into a suio, in libasync's dialect rather than glibc's:
 * conversions d i o u x X c s p m D O U, flags - + space # 0, width and
 * precision (digits or *), lengths h (hh is h), l, ll, q, z. No floating
 * point: %f %e %g... print their letter and take no argument, as does any
 * other letter (%j, %n, %L...). %p is 0x and hex digits (0x0 for NULL); '0'
 * pads %s and %c with zeros too; %m is strerror(errno); %s of NULL prints
 * "(null)". A format byte >= 0x80 (a negative char) counts as a '%', as in
 * libasync: non-ASCII text belongs in a %s argument, not in the format. */
void suio_vuprintf(suio *uio, const char *fmt, va_list ap);
void suio_uprintf(suio *uio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A malloc'd copy of the bytes (resid() of them, no NUL added); free() it. */
char *suio_flatten(const suio *uio);

#define suio_fill(uio, c, len) (uio)->fill(c, len)
#define suio_copy(uio, buf, len) (uio)->copy(buf, len)
inline void suio_print(suio *uio, const void *buf, size_t len)
{
    uio->print(buf, len);
}

#endif /* MELY_COMPAT_SUIOXX_H */
