/* SPDX-License-Identifier: MIT */
/*
 * rxx.h (mely-compat): libasync's regular expressions, on PCRE2 (libasync's
 * were on PCRE, so patterns keep their Perl syntax: \d, \s, (?:...), lazy
 * quantifiers, back-references).
 *
 *   rxx r("^(\\w+)=(.*)$", "i");   compile; a bad pattern or option is fatal
 *                                   (panic, as in libasync); use rrxx to get
 *                                   the error instead
 *   if (r.search(s)) ...            first match anywhere in s
 *   if (r.match(s)) ...             the match must start at the start of s and
 *                                   end at its end (libasync's rule: the first
 *                                   anchored match must cover s; "a|ab" does
 *                                   not match "ab")
 *   if (s / r) ...                  r.search(s)
 *   r[0], r[1], r.at(n)             the whole match, group n, as str; a null
 *                                   str for a group that did not take part
 *   r.start(n), r.end(n), r.len(n)  byte offsets of group n, -1 when unset
 *   r.success()                     whether the last search/match matched
 *   r.search_cstr(p, n), r.match_cstr(p, n)   on bytes that need not be a str
 *                                   (they must stay valid while r[n] is used)
 *   str m = s / "pat"; (s / "pat" / "i")[1]   one-off patterns
 *   split(&v, rxx(","), s, lim, emptylast)   the pieces of s between matches,
 *                                   at most lim of them (the last is the rest
 *                                   of s); an empty last piece only with
 *                                   emptylast; a match of no bytes still
 *                                   skips one byte (libasync's rule); returns
 *                                   the number of pieces
 *   join(sep, v)                    the elements of a vec joined by sep
 *
 * Options (a string of letters): i caseless, m multi-line (^ and $ at line
 * breaks), s dot matches newline, x extended (spaces and # comments ignored),
 * U ungreedy, ^ anchored, 8 UTF-8, S JIT-compile (libasync's "study"),
 * X accepted (PCRE2 always rejects unknown escapes). The int `opt` of
 * search()/match() is passed to pcre2_match(): PCRE2_* match options, not
 * PCRE1's constants (pcre.h is not provided); 0 is what programs pass.
 *
 * A match failure other than "no match" (e.g. the match limit) prints a
 * warning and counts as no match (sfs_rxx_panic = true makes it fatal);
 * errcode() gives PCRE2's code.
 *
 * Copies of an rxx share the compiled pattern (read-only, so copies may be
 * used on different cores at once); each object keeps its own last match, so
 * one rxx object belongs to one color at a time.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_RXX_H
#define MELY_COMPAT_RXX_H

#include <cstddef>

#include "str.h"
#include "vec.h"

/* Makes a failed match (other than no match) fatal instead of a warning. */
extern bool sfs_rxx_panic;

namespace mely_compat_detail {
struct rxx_code; /* the compiled pattern, shared by copies */
}

class rxx {
    mely_compat_detail::rxx_code *code_ = nullptr;
    void *md_ = nullptr;      /* pcre2_match_data of the last match */
    int nsubpat_ = 0;         /* groups set by the last match (0: none) */
    int errcode_ = 0;
    str subj_;                /* the subject of search()/match() */
    const char *subjp_ = nullptr;

    bool run(const char *p, size_t len, int options, bool whole);
    void release();

protected:
    rxx() {}
    /* Compiles pat; returns the error message, or a null str. */
    str init(const char *pat, const char *opt);

public:
    class matchresult {
        const rxx &r_;

    public:
        explicit matchresult(const rxx &r) : r_(r) {}
        operator bool() const { return r_.success(); }
        operator str() const { return r_.at(0); }
        str operator[](ptrdiff_t n) const { return r_.at(n); }
    };

    rxx(const char *pat, const char *opt = "");
    rxx(const str &pat, const char *opt = "") : rxx(pat.cstr(), opt) {}
    rxx(const rxx &r);
    rxx &operator=(const rxx &r);
    ~rxx() { release(); }

    /* Runs the pattern on len bytes at p; false on an error other than no
     * match. success() says whether it matched. */
    bool _exec(const char *p, size_t len, int options);
    bool exec(str s, int options);

    matchresult search(str s, int opt = 0)
    {
        exec(s, opt);
        return matchresult(*this);
    }
    matchresult match(str s, int opt = 0);
    matchresult search_cstr(const char *p, size_t len, int opt = 0)
    {
        _exec(p, len, opt);
        return matchresult(*this);
    }
    matchresult match_cstr(const char *p, size_t len, int opt = 0);

    /* JIT-compiles the pattern; a null str (PCRE2 falls back to the
     * interpreter where JIT is not available). */
    str study();
    void clear()
    {
        nsubpat_ = 0;
        subj_ = NULL;
        subjp_ = nullptr;
    }

    bool success() const { return nsubpat_ > 0; }
    int errcode() const { return errcode_; }
    str at(ptrdiff_t n) const;
    int start(int n) const;
    int end(int n) const;
    int len(int n) const
    {
        int s = start(n);
        return s < 0 ? -1 : end(n) - s;
    }
    str operator[](ptrdiff_t n) const { return at(n); }
};

/* An rxx whose compile error is kept (geterr()) instead of being fatal. */
class rrxx : public rxx {
    str err_;

public:
    rrxx() : err_("uninitialized") {}
    explicit rrxx(const char *pat, const char *opt = "") { err_ = init(pat, opt); }
    explicit rrxx(const str &pat, const char *opt = "") : rrxx(pat.cstr(), opt) {}
    rrxx(const rxx &r) : rxx(r) {}
    rrxx(const rrxx &r) : rxx(r), err_(r.err_) {}
    /* Compiles pat (replacing the pattern); false with geterr() on error. */
    bool compile(const char *pat, const char *opt = "")
    {
        err_ = init(pat, opt);
        return !err_;
    }
    bool compile(const str &pat, const char *opt = "") { return compile(pat.cstr(), opt); }
    const str &geterr() const { return err_; }
};

inline rxx::matchresult operator/(const str &s, rxx &r)
{
    return r.search(s);
}

/* s / "pattern" and s / "pattern" / "options": compiled at each use. */
class strstrmatch {
    const str &s_;
    const char *const pat_;

protected:
    mutable const char *opt_ = "";

public:
    strstrmatch(const str &s, const char *pat) : s_(s), pat_(pat) {}
    operator bool() const
    {
        rxx r(pat_, opt_);
        return r.search(s_);
    }
    operator str() const
    {
        rxx r(pat_, opt_);
        return r.search(s_)[0];
    }
    str operator[](ptrdiff_t n) const
    {
        rxx r(pat_, opt_);
        return r.search(s_)[n];
    }
};
class strstroptmatch : public strstrmatch {
public:
    strstroptmatch(const str &s, const char *pat) : strstrmatch(s, pat) {}
    const strstrmatch &operator/(const char *opt) const
    {
        opt_ = opt;
        return *this;
    }
};
inline strstroptmatch operator/(const str &s, const char *pat)
{
    return strstroptmatch(s, pat);
}

int split(vec<str> *out, rxx pat, str expr, size_t lim = (size_t)-1, bool emptylast = false);

template <class T> str join(str sep, const vec<T> &v)
{
    strbuf sb;
    for (const T *p = v.base(); p < v.lim(); p++) {
        if (p != v.base())
            sb << sep;
        sb << *p;
    }
    return sb;
}

#endif /* MELY_COMPAT_RXX_H */
