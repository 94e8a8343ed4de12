/* SPDX-License-Identifier: MIT */
/*
 * err.h (mely-compat): libasync's diagnostics.
 *
 * In a libasync program (async.h, amisc.h, err.h), as in libasync:
 *   warn << "x = " << x << "\n";    a temporary strbuf (a warnobj) that is
 *   warn("x = %d\n", x);            written to errfd (2) when the statement
 *   warn("a") << b;                 ends, in one write; anything strbuf takes
 *                                   goes in, your own types through
 *                                   const strbuf &strbuf_cat(const strbuf &,
 *                                   const T &); a null str prints "(null)".
 *                                   warn is itself a strbuf: f(warn) for
 *                                   f(const strbuf &), warn.fmt(...)
 *   warn      "progname: " first (nothing before setprogname), or
 *             "progname[pid]: " after setprogpid(pid)
 *   warnx     no prefix
 *   warnt     "sec.usec " (the time of day), then warn's prefix
 *   fatal     "progname: fatal: ", then fatalhook() if set, then exit(1)
 *             (_exit(1) if fatal_no_destruct)
 *   panic     "progname: PANIC: file.C:123\n" (where panic is), then
 *             abort()
 *   vwarn(fmt, ap), vwarnx(fmt, ap)
 * No newline is added: write it. These are macros, as in libasync (warn is
 * warnobj(0), fatal fatalobj(...), ...), so the names cannot be used for
 * anything else. printf-style formatting is libasync's dialect (suio++.h):
 * %p of NULL is 0x0, no floating point. errno is the same after as before.
 *
 *   progname (a str), progdir ("dir/" of argv[0], or a null str)
 *   setprogname(argv[0])   progname = argv[0] without its directory and
 *                          without a libtool "lt-" prefix
 *   setprogpid(pid)        adds "[pid]" after progname in warn's prefix
 *   errfd                  where lines go (2)
 *   fatalhook              called by fatal before exiting
 *   _err_output            what writes a line: _err_output_sync (writes, then
 *                          aborts or exits for panic and fatal) unless the
 *                          program sets its own; err_reset() restores it
 *                          (calling _err_reset_hook first if set)
 *   sfs_warn, sfs_warnx, sfs_vwarn, sfs_vwarnx   C functions; sfs_warn
 *                          prints progname with no ": " after it (as
 *                          libasync did)
 *   traceobj t(level, "prefix: ", dotime, fd); t(threshold) << ...;
 *                          prints (when t is destroyed) only if level >=
 *                          threshold: "progname: prefix: [time ][ip:port ]"
 *   assert(e)              never compiled out (NDEBUG has no effect): panics
 *                          with assertion "e" failed at file.C:123
 *   myabort                abort
 *
 * In an original Mely program (mely.h), which had no err.h and may use str,
 * strbuf... for itself: warn, warnx, fatal and panic are objects of this
 * header's own, streams over std::ostream (warn << x for anything an ostream
 * takes) or printf-style (warn("...%d", n)), with the same prefixes and
 * endings (panic without the place); setprogname(argv0). assert is the C
 * library's there.
 *
 * Note: this header stands in for the C library's <err.h> in legacy programs.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_ERR_H
#define MELY_COMPAT_ERR_H

#include <cstdarg>

void setprogname(const char *argv0);

/* ---- the original Mely's (mely.h) --------------------------------------------------- */
#if defined(MELY_COMPAT_LEGACY_MELY_H) || defined(MELY_COMPAT_ERR_IMPL)

#include <sstream>
#include <string>

namespace mely_compat_detail {

/* flags as warnobj's (below): 0, 1 warnx, 2 fatal, 4 panic. */
void err_emit(int flags, const std::string &msg);

class err_line {
    int flags_;
    std::ostringstream *os_;

public:
    explicit err_line(int f) : flags_(f), os_(new std::ostringstream) {}
    err_line(err_line &&o) noexcept : flags_(o.flags_), os_(o.os_) { o.os_ = nullptr; }
    err_line(const err_line &) = delete;
    ~err_line()
    {
        if (os_) {
            std::string s = os_->str();
            delete os_;
            err_emit(flags_, s);
        }
    }
    template <class T> err_line &operator<<(const T &v) &
    {
        *os_ << v;
        return *this;
    }
    template <class T> err_line &&operator<<(const T &v) &&
    {
        *os_ << v;
        return std::move(*this);
    }
};

class err_stream {
    int flags_;

public:
    constexpr explicit err_stream(int f) : flags_(f) {}
    template <class T> err_line operator<<(const T &v) const
    {
        err_line l(flags_);
        l << v;
        return l;
    }
    void operator()(const char *fmt, ...) const __attribute__((format(printf, 2, 3)));
};

} // namespace mely_compat_detail

#ifndef MELY_COMPAT_ERR_IMPL
extern const mely_compat_detail::err_stream warn, warnx, fatal, panic;
#endif

#endif /* Mely */

/* ---- libasync's -------------------------------------------------------------------- */
#ifndef MELY_COMPAT_LEGACY_MELY_H

#include "str.h"

extern bssstr progname;
extern str progdir;
extern void (*fatalhook)();
extern int errfd;
extern bool fatal_no_destruct;
extern void (*_err_output)(suio *, int);
extern void (*_err_reset_hook)();
void err_reset();
void _err_output_sync(suio *, int);

void setprogname(char *argv0);
void setprogpid(int p);

extern "C" {
void sfs_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sfs_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sfs_vwarn(const char *fmt, va_list ap);
void sfs_vwarnx(const char *fmt, va_list ap);
}

class warnobj : public strbuf {
protected:
    const int flags;

public:
    enum { xflag = 1, fatalflag = 2, panicflag = 4, timeflag = 8 };

    explicit warnobj(int f);
    ~warnobj();
    const warnobj &operator()(const char *fmt, ...) const __attribute__((format(printf, 2, 3)));
};

/* A warnobj whose destructor does not return (the compiler knows code after
 * fatal << ... is unreachable). */
class fatalobj : public warnobj {
public:
    explicit fatalobj(int f) : warnobj(f) {}
    __attribute__((noreturn)) ~fatalobj();
};

template <class T> inline const warnobj &operator<<(const warnobj &w, const T &a)
{
    strbuf_cat(w, a);
    return w;
}
inline const warnobj &operator<<(const warnobj &w, const str &s)
{
    if (s)
        w.buf(s.cstr(), s.len());
    else
        w.cat("(null)");
    return w;
}

struct traceobj : public strbuf {
    int current_level;
    const char *prefix;
    const bool dotime;
    bool doprint;
    int fd;

    explicit traceobj(int level, const char *pfx = "", bool t = false, int f = -1)
        : current_level(level), prefix(pfx), dotime(t), doprint(false), fd(f)
    {
    }
    ~traceobj();
    void init();
    const traceobj &operator()(int threshold = 0);
    const traceobj &operator()(int threshold, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
};

template <class T> inline const traceobj &operator<<(const traceobj &t, const T &a)
{
    if (t.doprint)
        strbuf_cat(t, a);
    return t;
}
inline const traceobj &operator<<(const traceobj &t, const str &s)
{
    if (t.doprint)
        t.buf(s.cstr(), s.len());
    return t;
}

#ifndef MELY_COMPAT_ERR_IMPL
#define warn warnobj(0)
#define vwarn warn.vfmt
#define warnx warnobj(int(::warnobj::xflag))
#define warnt warnobj(int(::warnobj::timeflag))
#define vwarnx warnx.vfmt
#define fatal fatalobj(int(::warnobj::fatalflag))
#define panic fatalobj(int(::warnobj::panicflag))("%s\n", __FL__)
#endif

/* Never compiled out: NDEBUG has no effect, as in libasync. */
#undef assert
#define assert(e)                                                                             \
    do {                                                                                      \
        if (!(e))                                                                             \
            panic("assertion \"%s\" failed at %s\n", #e, __FL__);                             \
    } while (0)
#define myabort abort

#endif /* libasync */

#endif /* MELY_COMPAT_ERR_H */
