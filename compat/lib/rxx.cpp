/* SPDX-License-Identifier: MIT */
/* rxx.cpp: rxx on PCRE2 (rxx.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <atomic>
#include <cstring>

#include "err.h"
#include "rxx.h"

bool sfs_rxx_panic = false;

namespace mely_compat_detail {

/* A compiled pattern, shared by the copies of an rxx. pcre2_match() only
 * reads it, so copies may match on several threads at once. */
struct rxx_code {
    pcre2_code *re;
    std::atomic<int> refs;
};

} // namespace mely_compat_detail

using mely_compat_detail::rxx_code;

namespace {

/* libasync's option letters; false on an unknown one. */
bool parse_options(const char *opt, uint32_t *flags, bool *jit, char *bad)
{
    *flags = 0;
    *jit = false;
    for (; opt && *opt; opt++) {
        switch (*opt) {
        case '^': *flags |= PCRE2_ANCHORED; break;
        case 'i': *flags |= PCRE2_CASELESS; break;
        case 'm': *flags |= PCRE2_MULTILINE; break;
        case 's': *flags |= PCRE2_DOTALL; break;
        case 'x': *flags |= PCRE2_EXTENDED; break;
        case 'U': *flags |= PCRE2_UNGREEDY; break;
        case '8': *flags |= PCRE2_UTF; break;
        case 'S': *jit = true; break;
        case 'X': break; /* PCRE2 always rejects unknown escapes */
        default:
            *bad = *opt;
            return false;
        }
    }
    return true;
}

/* The error message of a pattern that did not compile, with a caret under
 * the offending byte. */
str compile_error(const char *pat, int code, PCRE2_SIZE off)
{
    PCRE2_UCHAR msg[256];
    if (pcre2_get_error_message(code, msg, sizeof msg) < 0)
        strcpy(reinterpret_cast<char *>(msg), "unknown error");
    strbuf sb;
    sb << "invalid regular expression:\n   " << pat << "\n   ";
    sb.tosuio()->fill(' ', (ssize_t)off);
    sb << "^\n" << reinterpret_cast<const char *>(msg) << ".\n";
    return sb;
}

} // namespace

void rxx::release()
{
    if (md_)
        pcre2_match_data_free(static_cast<pcre2_match_data *>(md_));
    md_ = nullptr;
    if (code_ && code_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        pcre2_code_free(code_->re);
        delete code_;
    }
    code_ = nullptr;
    clear();
}

str rxx::init(const char *pat, const char *opt)
{
    release();
    errcode_ = 0;
    uint32_t flags;
    bool jit;
    char bad = 0;
    if (!parse_options(opt, &flags, &jit, &bad))
        return strbuf("invalid regular expression option '%c'\n", bad);
    if (!pat)
        return "invalid regular expression: NULL\n";
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat), PCRE2_ZERO_TERMINATED,
                                   flags, &code, &off, nullptr);
    if (!re)
        return compile_error(pat, code, off);
    code_ = new rxx_code{re, {1}};
    if (jit)
        study();
    return NULL;
}

rxx::rxx(const char *pat, const char *opt)
{
    if (str err = init(pat, opt))
        panic("%s", err.cstr());
}

rxx::rxx(const rxx &r) : code_(r.code_)
{
    if (code_)
        code_->refs.fetch_add(1, std::memory_order_relaxed);
}

rxx &rxx::operator=(const rxx &r)
{
    if (this != &r) {
        if (r.code_)
            r.code_->refs.fetch_add(1, std::memory_order_relaxed);
        release();
        code_ = r.code_;
    }
    return *this;
}

str rxx::study()
{
    /* Where JIT is unavailable, PCRE2 keeps interpreting: not an error. */
    if (code_)
        pcre2_jit_compile(code_->re, PCRE2_JIT_COMPLETE);
    return NULL;
}

bool rxx::run(const char *p, size_t len, int options, bool whole)
{
    nsubpat_ = 0;
    errcode_ = 0;
    if (!code_) {
        errcode_ = PCRE2_ERROR_NULL;
        return false;
    }
    if (!md_)
        md_ = pcre2_match_data_create_from_pattern(code_->re, nullptr);
    pcre2_match_data *md = static_cast<pcre2_match_data *>(md_);
    uint32_t o = (uint32_t)options | (whole ? PCRE2_ANCHORED : 0);
    /* PCRE2 wants a non-NULL subject even when it is empty. */
    int rc = pcre2_match(code_->re, reinterpret_cast<PCRE2_SPTR>(p ? p : ""), len, 0, o, md,
                         nullptr);
    if (rc == PCRE2_ERROR_NOMATCH)
        return true;
    if (rc < 0) {
        errcode_ = rc;
        if (sfs_rxx_panic)
            panic("rxx: pcre2_match error %d\n", rc);
        warn("rxx: pcre2_match error %d\n", rc);
        return false;
    }
    nsubpat_ = rc ? rc : (int)pcre2_get_ovector_count(md);
    if (whole && (size_t)end(0) != len)
        nsubpat_ = 0; /* libasync: the anchored match must cover the subject */
    return true;
}

bool rxx::_exec(const char *p, size_t len, int options)
{
    subj_ = NULL;
    subjp_ = p;
    return run(p, len, options, false);
}

bool rxx::exec(str s, int options)
{
    subj_ = s;
    subjp_ = s.cstr();
    return run(subjp_, s.len(), options, false);
}

rxx::matchresult rxx::match(str s, int opt)
{
    subj_ = s;
    subjp_ = s.cstr();
    run(subjp_, s.len(), opt, true);
    return matchresult(*this);
}

rxx::matchresult rxx::match_cstr(const char *p, size_t len, int opt)
{
    subj_ = NULL;
    subjp_ = p;
    run(p, len, opt, true);
    return matchresult(*this);
}

int rxx::start(int n) const
{
    if (n < 0 || n >= nsubpat_)
        return -1;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(static_cast<pcre2_match_data *>(md_));
    return ov[2 * n] == PCRE2_UNSET ? -1 : (int)ov[2 * n];
}

int rxx::end(int n) const
{
    if (n < 0 || n >= nsubpat_)
        return -1;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(static_cast<pcre2_match_data *>(md_));
    return ov[2 * n + 1] == PCRE2_UNSET ? -1 : (int)ov[2 * n + 1];
}

str rxx::at(ptrdiff_t n) const
{
    int s = start((int)n);
    if (s < 0)
        return NULL;
    return str(subjp_ + s, (size_t)(end((int)n) - s));
}

int split(vec<str> *out, rxx pat, str expr, size_t lim, bool emptylast)
{
    if (out)
        out->clear();
    const char *p = expr.cstr();
    const char *const e = p + expr.len();
    size_t n = 0;
    /* p < e: an empty rest is not searched (an empty match would loop). */
    for (; p < e && n + 1 < lim; n++) {
        if (!pat._exec(p, (size_t)(e - p), 0))
            return 0;
        if (!pat.success())
            break;
        if (out)
            out->push_back(str(p, (size_t)pat.start(0)));
        int step = pat.end(0);
        p += step > 0 ? step : 1;
    }
    if (lim && (p < e || emptylast)) {
        n++;
        if (out)
            out->push_back(str(p, (size_t)(e - p)));
    }
    return (int)n;
}
