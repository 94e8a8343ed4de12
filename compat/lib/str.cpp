/* SPDX-License-Identifier: MIT */
/* str.cpp: the out-of-line parts of str, strbuf and suio (str.h, suio++.h). */
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include <unistd.h>

#include "str.h"

namespace mely_compat_detail {

strrep *strrep::make(size_t len)
{
    void *m = ::operator new(sizeof(strrep) + len + 1);
    strrep *r = ::new (m) strrep;
    r->refs.store(1, std::memory_order_relaxed);
    r->len = len;
    r->data()[len] = '\0';
    return r;
}

strrep *strrep::make(const char *p, size_t len)
{
    strrep *r = make(len);
    if (len)
        memcpy(r->data(), p, len);
    return r;
}

} // namespace mely_compat_detail

str::rep *str::from_iov(const iovec *iov, int cnt)
{
    size_t n = 0;
    for (int i = 0; i < cnt; i++)
        n += iov[i].iov_len;
    rep *r = rep::make(n);
    char *d = r->data();
    for (int i = 0; i < cnt; i++) {
        if (iov[i].iov_len)
            memcpy(d, iov[i].iov_base, iov[i].iov_len);
        d += iov[i].iov_len;
    }
    return r;
}

namespace {

/* The whole of s as a number in [lo, hi]: strtoimax/strtoumax must consume
 * every byte (an embedded NUL or trailing space fails) and not overflow. */
bool parse_signed(const str &s, int base, intmax_t lo, intmax_t hi, intmax_t *out)
{
    if (!s || !s.len() || strlen(s.cstr()) != s.len())
        return false;
    char *end;
    errno = 0;
    intmax_t v = strtoimax(s.cstr(), &end, base);
    if (errno || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

bool parse_unsigned(const str &s, int base, uintmax_t hi, uintmax_t *out)
{
    if (!s || !s.len() || strlen(s.cstr()) != s.len())
        return false;
    const char *p = s.cstr();
    while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
        p++;
    if (*p == '-') /* strtoumax would wrap a negative number around */
        return false;
    char *end;
    errno = 0;
    uintmax_t v = strtoumax(s.cstr(), &end, base);
    if (errno || *end || v > hi)
        return false;
    *out = v;
    return true;
}

} // namespace

bool str::to_int32(int32_t *out, int base) const
{
    intmax_t v;
    if (!parse_signed(*this, base, INT32_MIN, INT32_MAX, &v))
        return false;
    *out = (int32_t)v;
    return true;
}

bool str::to_int64(int64_t *out, int base) const
{
    intmax_t v;
    if (!parse_signed(*this, base, INT64_MIN, INT64_MAX, &v))
        return false;
    *out = (int64_t)v;
    return true;
}

bool str::to_uint32(uint32_t *out, int base) const
{
    uintmax_t v;
    if (!parse_unsigned(*this, base, UINT32_MAX, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

bool str::to_uint64(uint64_t *out, int base) const
{
    uintmax_t v;
    if (!parse_unsigned(*this, base, UINT64_MAX, &v))
        return false;
    *out = (uint64_t)v;
    return true;
}

bool str::to_double(double *out) const
{
    if (!*this || !len() || strlen(cstr()) != len())
        return false;
    char *end;
    errno = 0;
    double v = strtod(cstr(), &end);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

strbuf::strbuf(const char *fmt, ...) : uio_(New refcounted<suio>)
{
    va_list ap;
    va_start(ap, fmt);
    vfmt(fmt, ap);
    va_end(ap);
}

const strbuf &strbuf::fmt(const char *fmt, ...) const
{
    va_list ap;
    va_start(ap, fmt);
    vfmt(fmt, ap);
    va_end(ap);
    return *this;
}

const strbuf &strbuf::vfmt(const char *fmt, va_list ap) const
{
    suio_vuprintf(uio_, fmt, ap);
    return *this;
}

const strbuf &strbuf_cat(const strbuf &sb, const double &d)
{
    /* At most 127 bytes, as libasync (1e200 loses its last digits). */
    char buf[128];
    int n = snprintf(buf, sizeof buf, "%f", d);
    if (n > 0)
        sb.tosuio()->copy(buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    return sb;
}

const strbuf &strbuf_cat(const strbuf &sb, const hexdump &h)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *p = static_cast<const unsigned char *>(h.buf);
    char *out = sb.tosuio()->getspace(2 * h.len);
    for (size_t i = 0; i < h.len; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    sb.tosuio()->print(out, 2 * h.len);
    return sb;
}

/* ---- suio ---------------------------------------------------------------- */

char *suio_flatten(const suio *uio)
{
    char *p = static_cast<char *>(malloc(uio->resid() ? uio->resid() : 1));
    if (!p)
        throw std::bad_alloc();
    uio->copyout(p);
    return p;
}

str suio_getline(suio *uio)
{
    size_t n = uio->linelen();
    if (!n)
        return str();
    size_t keep = n - 1;
    mstr m(keep);
    uio->copyout(m.cstr(), keep);
    uio->rembytes(n);
    if (keep && m.cstr()[keep - 1] == '\r')
        m.setlen(keep - 1);
    return str(m);
}

suio::~suio()
{
    free(buf_);
}

void suio::grow(size_t n)
{
    size_t held = resid();
    if (held + n <= cap_ / 2) {
        /* Mostly drained: slide the bytes back instead of growing. */
        memmove(buf_, buf_ + head_, held);
    } else {
        size_t ncap = cap_ ? 2 * cap_ : (size_t)smallbufsize;
        while (ncap < held + n)
            ncap *= 2;
        char *nb = static_cast<char *>(malloc(ncap));
        if (!nb)
            throw std::bad_alloc();
        if (held)
            memcpy(nb, buf_ + head_, held);
        free(buf_);
        buf_ = nb;
        cap_ = ncap;
    }
    head_ = 0;
    tail_ = held;
}

void suio::rembytes(size_t n)
{
    if (n >= resid()) {
        head_ = tail_ = 0;
        return;
    }
    head_ += n;
}

int suio::output(int fd, int cnt)
{
    if (!cnt)
        return 0;
    bool wrote = false;
    ssize_t n = 0;
    while (resid() && (n = write(fd, buf_ + head_, resid())) > 0) {
        rembytes((size_t)n);
        wrote = true;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        return -1;
    return wrote ? 1 : 0;
}

int suio::input(int fd, size_t len)
{
    char *p = room(len);
    ssize_t n = read(fd, p, len);
    if (n > 0)
        tail_ += (size_t)n;
    return (int)n;
}
