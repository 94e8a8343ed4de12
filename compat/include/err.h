/*
 * err.h (mely-compat): libasync-style diagnostics. Each of warn, warnx, fatal
 * and panic is used as a stream (warn << "x = " << x << "\n";) or printf-style
 * (warn("x = %d\n", x)). warn and fatal and panic print "progname: " first
 * (setprogname), warnx does not; fatal then exits with status 1, panic aborts.
 * A stream line is written when the statement ends, in one write.
 * Note: this header stands in for the C library's <err.h> in legacy programs.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_ERR_H
#define MELY_COMPAT_ERR_H

#include <sstream>
#include <string>

/* libasync's err.h brought its strings (str.h, with vec.h); the original
 * Mely's mely.h, which includes this header too, had none. */
#ifndef MELY_COMPAT_LEGACY_MELY_H
#include "str.h"
#endif

void setprogname(const char *argv0);
const char *getprogname_compat();

namespace mely_compat_detail {

enum err_kind { ERR_WARN, ERR_WARNX, ERR_FATAL, ERR_PANIC };

/* Prints msg as `kind` says, then exits or aborts for fatal/panic. */
void err_emit(err_kind kind, const std::string &msg);

class err_line {
    err_kind kind_;
    std::ostringstream *os_;

public:
    explicit err_line(err_kind k) : kind_(k), os_(new std::ostringstream) {}
    err_line(err_line &&o) noexcept : kind_(o.kind_), os_(o.os_) { o.os_ = nullptr; }
    err_line(const err_line &) = delete;
    ~err_line()
    {
        if (os_) {
            std::string s = os_->str();
            delete os_;
            err_emit(kind_, s);
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
    err_kind kind_;

public:
    constexpr explicit err_stream(err_kind k) : kind_(k) {}
    template <class T> err_line operator<<(const T &v) const
    {
        err_line l(kind_);
        l << v;
        return l;
    }
    void operator()(const char *fmt, ...) const __attribute__((format(printf, 2, 3)));
};

} // namespace mely_compat_detail

extern const mely_compat_detail::err_stream warn, warnx, fatal, panic;

#endif /* MELY_COMPAT_ERR_H */
