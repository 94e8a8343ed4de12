/* SPDX-License-Identifier: MIT */
/*
 * str.h (mely-compat): libasync's strings.
 *
 * str: an immutable, reference-counted byte string. Copies share the bytes.
 *   str s;                  the null string: !s, s.cstr() == NULL, len() 0
 *   str s("abc"), s = p     from a C string (NULL gives the null string)
 *   str(p, n)               n bytes from p; may hold NUL bytes
 *   str(sb)                 the bytes of a strbuf; str(mstr &) takes an mstr's
 *   s.cstr(), s.len()       the bytes, always followed by a NUL; their number
 *   (const char *) s        cstr(), implicitly (libasync allowed it)
 *   s[i]                    the byte at i (i == len() gives the final NUL)
 *   s.cmp(t), ==, !=, <, <=, >, >=   byte-wise (unsigned) then by length;
 *                           a null string equals only a null string (or a NULL
 *                           const char *) and sorts before every other string
 *   hash_t(s)               hash of the bytes (qhash<str, V> keys); equal to
 *                           hash_string(s.cstr()) when s has no NUL byte
 *   s.to_int32(&v, base), to_int64, to_uint32, to_uint64, to_double:
 *                           the whole string as a number; false (v untouched)
 *                           if it is not one or does not fit
 *   substr(s, pos, n)       a copy of at most n bytes from pos ("" past the end)
 *
 * mstr: a mutable buffer of n bytes that becomes a str without a copy:
 *   mstr m(n); n = read(fd, m.cstr(), n); m.setlen(n); str s(m); (m is then empty)
 *
 * strbuf: a string builder. Copies of a strbuf share one buffer (a function
 * taking a strbuf by value appends to the caller's), so operator<< works on a
 * const strbuf & and on temporaries: str s = strbuf() << "n = " << n;
 *   sb << x                 a str, C string, strbuf (its bytes), int, long,
 *                           long long and their unsigned forms (in decimal),
 *                           double (glibc's "%f", at most 127 bytes), a
 *                           pointer ("%p": 0x0 for NULL), hexdump(p, n);
 *                           a char, like any small integer, prints as its
 *                           number (as in libasync: write sb << str(&c, 1) or
 *                           sb.fmt("%c", c) for the character). Your own types:
 *                           define const strbuf &strbuf_cat(const strbuf &,
 *                           const T &) and << finds it.
 *   sb.fmt(fmt, ...), strbuf(fmt, ...)   printf-style, libasync's dialect
 *                           (suio++.h): no floating point, %p of NULL is
 *                           0x0, %m is strerror(errno)
 *   sb.buf(p, n), sb.copy(p, n), sb.cat(x)   n raw bytes; cat is <<
 *   sb.len(), sb.clear(), sb.tosuio()   bytes held, emptying, the suio
 *                           (e.g. sb.tosuio()->output(fd))
 *   str << x                a strbuf holding str then x
 * cbs is callback<void, str>::ref.
 *
 * Reference counts are atomic: a str may be copied and dropped from any
 * thread (a callback bound to it may run on another core). The strbuf's
 * buffer is not thread-safe: one color at a time.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_STR_H
#define MELY_COMPAT_STR_H

#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ostream>

#include <sys/types.h>
#include <sys/uio.h>

#include "sysconf.h" /* as libasync's str.h: xmalloc, xfree, __FL__... */

#include "callback.h"
#include "keyfunc.h"
#include "refcnt.h"
#include "stllike.h"
#include "suio++.h"

class str;
class mstr;
class strbuf;

namespace mely_compat_detail {

/* The shared bytes of a str: a header, then len bytes and a NUL. */
struct strrep {
    std::atomic<unsigned> refs;
    size_t len;

    char *data() { return reinterpret_cast<char *>(this + 1); }
    static strrep *make(size_t len); /* count 1, bytes uninitialized, data()[len] == 0 */
    static strrep *make(const char *p, size_t len);
    void hold() { refs.fetch_add(1, std::memory_order_relaxed); }
    void drop()
    {
        /* The sole holder needs no read-modify-write: no other thread holds
         * a reference it could copy meanwhile. */
        if (refs.load(std::memory_order_acquire) == 1 ||
            refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
            ::operator delete(this);
    }
};

/* Byte-wise comparison (unsigned), then by length. */
inline int bytes_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    size_t n = an < bn ? an : bn;
    int r = n ? memcmp(a, b, n) : 0;
    if (r)
        return r;
    return an < bn ? -1 : an > bn ? 1 : 0;
}

} // namespace mely_compat_detail

class str {
    typedef mely_compat_detail::strrep rep;
    rep *r_;

    friend class mstr;
    friend struct bssstr;
    void assign(rep *r) noexcept
    {
        if (r_)
            r_->drop();
        r_ = r;
    }
    static rep *from_iov(const iovec *iov, int cnt);

public:
    constexpr str() noexcept : r_(nullptr) {}
    str(const str &s) noexcept : r_(s.r_)
    {
        if (r_)
            r_->hold();
    }
    str(str &&s) noexcept : r_(s.r_) { s.r_ = nullptr; }
    str(const char *p) : r_(p ? rep::make(p, strlen(p)) : nullptr) {}
    str(const char *p, size_t len) : r_(rep::make(p, len)) {}
    str(const iovec *iov, int cnt) : r_(from_iov(iov, cnt)) {}
    explicit str(const suio &u) : r_(from_iov(u.iov(), (int)u.iovcnt())) {}
    str(const strbuf &sb);
    str(mstr &m);
    ~str()
    {
        if (r_)
            r_->drop();
    }

    void swap(str &s) noexcept
    {
        rep *t = r_;
        r_ = s.r_;
        s.r_ = t;
    }
    str &operator=(const str &s) noexcept
    {
        if (s.r_)
            s.r_->hold();
        assign(s.r_);
        return *this;
    }
    str &operator=(str &&s) noexcept
    {
        if (this != &s) {
            assign(s.r_);
            s.r_ = nullptr;
        }
        return *this;
    }
    str &operator=(const char *p)
    {
        assign(p ? rep::make(p, strlen(p)) : nullptr);
        return *this;
    }
    str &operator=(const strbuf &sb);
    str &operator=(mstr &m);
    str &setbuf(const char *p, size_t len)
    {
        assign(rep::make(p, len));
        return *this;
    }
    str &setiov(const iovec *iov, int cnt)
    {
        assign(from_iov(iov, cnt));
        return *this;
    }

    size_t len() const noexcept { return r_ ? r_->len : 0; }
    const char *cstr() const noexcept { return r_ ? r_->data() : nullptr; }
    operator const char *() const noexcept { return cstr(); }
    char operator[](ptrdiff_t i) const noexcept { return r_->data()[i]; }

    bool operator!() const noexcept { return !r_; }
    explicit operator bool() const noexcept { return r_ != nullptr; }

    int cmp(const str &s) const noexcept
    {
        if (!r_ || !s.r_)
            return (r_ ? 1 : 0) - (s.r_ ? 1 : 0);
        return mely_compat_detail::bytes_cmp(cstr(), len(), s.cstr(), s.len());
    }
    int cmp(const char *p) const noexcept
    {
        if (!r_ || !p)
            return (r_ ? 1 : 0) - (p ? 1 : 0);
        return mely_compat_detail::bytes_cmp(cstr(), len(), p, strlen(p));
    }
    bool operator==(const str &s) const noexcept
    {
        if (!r_ || !s.r_)
            return r_ == s.r_;
        return r_ == s.r_ || (len() == s.len() && !memcmp(cstr(), s.cstr(), len()));
    }
    bool operator!=(const str &s) const noexcept { return !(*this == s); }
    bool operator<(const str &s) const noexcept { return cmp(s) < 0; }
    bool operator<=(const str &s) const noexcept { return cmp(s) <= 0; }
    bool operator>(const str &s) const noexcept { return cmp(s) > 0; }
    bool operator>=(const str &s) const noexcept { return cmp(s) >= 0; }
    bool operator==(const char *p) const noexcept { return cmp(p) == 0; }
    bool operator!=(const char *p) const noexcept { return cmp(p) != 0; }

    operator hash_t() const noexcept { return hash_bytes(cstr(), (int)len()); }

    bool to_int32(int32_t *out, int base = 10) const;
    bool to_int64(int64_t *out, int base = 10) const;
    bool to_uint32(uint32_t *out, int base = 10) const;
    bool to_uint64(uint64_t *out, int base = 10) const;
    bool to_double(double *out) const;
};

/* A str for static storage (libasync's progname is one): initialized at
 * compile time, so that it may be assigned before its constructor would have
 * run, and never freed, so that it stays readable by destructors and atexit
 * handlers that run after its own. */
struct bssstr : public str {
    constexpr bssstr() noexcept : str() {}
    ~bssstr()
    {
        if (r_)
            r_->hold(); /* the count str's destructor drops */
    }
    str &operator=(const str &s) { return str::operator=(s); }
    str &operator=(const bssstr &s) { return str::operator=(s); }
};

inline bool operator==(const char *p, const str &s) noexcept
{
    return s == p;
}
inline bool operator!=(const char *p, const str &s) noexcept
{
    return s != p;
}

template <> struct compare<str> {
    int operator()(const str &a, const str &b) const { return a.cmp(b); }
    int operator()(const str &a, const char *b) const { return a.cmp(b); }
    int operator()(const char *a, const str &b) const { return -b.cmp(a); }
};
template <> struct equals<str> {
    bool operator()(const str &a, const str &b) const { return a == b; }
    bool operator()(const str &a, const char *b) const { return a == b; }
    bool operator()(const char *a, const str &b) const { return b == a; }
};
template <> struct hashfn<str> {
    hash_t operator()(const str &s) const { return s; }
    hash_t operator()(const char *p) const { return hash_string(p); }
};

inline str substr(const str &s, size_t pos, size_t n = (size_t)-1)
{
    if (pos >= s.len())
        return str("", 0);
    if (n > s.len() - pos)
        n = s.len() - pos;
    return str(s.cstr() + pos, n);
}

inline void suio_print(suio *uio, const str &s)
{
    uio->copy(s.cstr(), s.len());
}
/* The first line held (without "\n" or "\r\n"), removed from uio; a null
 * str while uio holds no whole line. */
str suio_getline(suio *uio);

inline std::ostream &operator<<(std::ostream &os, const str &s)
{
    return os.write(s.cstr() ? s.cstr() : "", (std::streamsize)s.len());
}

class mstr {
    typedef mely_compat_detail::strrep rep;
    rep *r_;
    friend class str;

public:
    explicit mstr(size_t n) : r_(rep::make(n)) {}
    ~mstr()
    {
        if (r_)
            r_->drop();
    }
    mstr(const mstr &) = delete;
    mstr &operator=(const mstr &) = delete;

    /* Shortens to n bytes (n <= len()). */
    void setlen(size_t n)
    {
        if (n <= r_->len)
            r_->len = n;
    }
    size_t len() const { return r_ ? r_->len : 0; }
    char *cstr() { return r_ ? r_->data() : nullptr; }
    const char *cstr() const { return r_ ? r_->data() : nullptr; }
    operator char *() { return cstr(); }
    operator const char *() const { return cstr(); }
};

inline str::str(mstr &m) : r_(m.r_)
{
    m.r_ = nullptr;
    if (r_)
        r_->data()[r_->len] = '\0';
}
inline str &str::operator=(mstr &m)
{
    if (m.r_)
        m.r_->data()[m.r_->len] = '\0';
    assign(m.r_);
    m.r_ = nullptr;
    return *this;
}

class strbuf {
    ref<suio> uio_;

public:
    strbuf() : uio_(New refcounted<suio>) {}
    strbuf(const str &s) : uio_(New refcounted<suio>) { uio_->copy(s.cstr(), s.len()); }
    strbuf(const strbuf &b) : uio_(b.uio_) {}
    explicit strbuf(const ref<suio> &u) : uio_(u) {}
    explicit strbuf(const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    strbuf &operator=(const strbuf &) = delete;

    const strbuf &fmt(const char *fmt, ...) const __attribute__((format(printf, 2, 3)));
    const strbuf &vfmt(const char *fmt, va_list ap) const;
    const strbuf &buf(const char *p, size_t n) const
    {
        uio_->copy(p, n);
        return *this;
    }
    /* `copy` is libasync's: false let the buffer refer to p; here it always copies. */
    const strbuf &cat(const char *p, bool copy = true) const
    {
        (void)copy;
        if (p)
            uio_->copy(p, strlen(p));
        return *this;
    }
    template <class A> const strbuf &cat(const A &a) const;

    const iovec *iov() const { return uio_->iov(); }
    size_t iovcnt() const { return uio_->iovcnt(); }
    suio *tosuio() const { return uio_; }
    size_t len() const { return uio_->resid(); }
    void clear() { uio_->clear(); }
    void copy(const char *p, size_t n) { uio_->copy(p, n); }
    void hold_onto(const str &) {}
    /* Moves in's bytes to the end of this one. */
    const strbuf &take(strbuf &in)
    {
        uio_->take(in.uio_);
        return *this;
    }
};

inline str::str(const strbuf &sb) : r_(from_iov(sb.iov(), (int)sb.iovcnt())) {}
inline str &str::operator=(const strbuf &sb)
{
    assign(from_iov(sb.iov(), (int)sb.iovcnt()));
    return *this;
}

/* What `sb << x` appends, by type of x. */
inline const strbuf &strbuf_cat(const strbuf &sb, const str &s)
{
    return sb.buf(s.cstr(), s.len());
}
inline const strbuf &strbuf_cat(const strbuf &sb, const char *p, bool copy = true)
{
    return sb.cat(p, copy);
}
inline const strbuf &strbuf_cat(const strbuf &sb, const strbuf &other)
{
    sb.tosuio()->copyu(other.tosuio());
    return sb;
}
inline const strbuf &strbuf_cat(const strbuf &sb, int n)
{
    return sb.fmt("%d", n);
}
inline const strbuf &strbuf_cat(const strbuf &sb, unsigned n)
{
    return sb.fmt("%u", n);
}
inline const strbuf &strbuf_cat(const strbuf &sb, long n)
{
    return sb.fmt("%ld", n);
}
inline const strbuf &strbuf_cat(const strbuf &sb, unsigned long n)
{
    return sb.fmt("%lu", n);
}
inline const strbuf &strbuf_cat(const strbuf &sb, long long n)
{
    return sb.fmt("%lld", n);
}
inline const strbuf &strbuf_cat(const strbuf &sb, unsigned long long n)
{
    return sb.fmt("%llu", n);
}
/* glibc's "%f" (strbuf's own printf has no floating point, as libasync's). */
const strbuf &strbuf_cat(const strbuf &sb, const double &d);
template <class T> inline const strbuf &strbuf_cat(const strbuf &sb, const T *p)
{
    return sb.fmt("%p", static_cast<const void *>(p));
}

/* sb << hexdump(p, n): n bytes as lower-case hex digits. */
class hexdump {
public:
    const void *const buf;
    const size_t len;
    hexdump(const void *b, size_t n) : buf(b), len(n) {}
};
const strbuf &strbuf_cat(const strbuf &sb, const hexdump &h);

template <class A> inline const strbuf &strbuf::cat(const A &a) const
{
    return strbuf_cat(*this, a);
}

template <class T> inline const strbuf &operator<<(const strbuf &sb, const T &a)
{
    return strbuf_cat(sb, a);
}
inline const strbuf &operator<<(const strbuf &sb, const str &s)
{
    return strbuf_cat(sb, s);
}
inline const strbuf &operator<<(const strbuf &sb, const char *p)
{
    return sb.cat(p);
}
inline const strbuf operator<<(const str &s, const char *p)
{
    strbuf sb(s);
    sb.cat(p);
    return sb;
}
inline const strbuf operator<<(const str &a, const str &b)
{
    strbuf sb(a);
    strbuf_cat(sb, b);
    return sb;
}

/* A callback taking a str (libasync declared it in amisc.h). */
typedef callback<void, str>::ref cbs;

inline std::ostream &operator<<(std::ostream &os, const strbuf &sb)
{
    const iovec *v = sb.iov();
    if (sb.iovcnt())
        os.write(static_cast<const char *>(v->iov_base), (std::streamsize)v->iov_len);
    return os;
}

#endif /* MELY_COMPAT_STR_H */
