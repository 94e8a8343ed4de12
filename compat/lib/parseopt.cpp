/* SPDX-License-Identifier: MIT */
/*
 * parseopt.cpp: libasync's configuration-file reading (parseopt.h).
 * Written for mely; no line comes from libasync.
 */
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include "err.h"
#include "parseopt.h"
#include "rxx.h"

/* ---- parseargs ------------------------------------------------------------------ */

parseargs::parseargs(str file, int fd)
    : buf_(nullptr), lim_(nullptr), p_(nullptr), filename(file), lineno(0)
{
    if (fd < 0) {
        fd = file ? open(file.cstr(), O_RDONLY) : -1;
        if (fd < 0) {
            error(strerror(file ? errno : EINVAL));
            return;
        }
    }
    std::string data;
    char chunk[8192];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            error(strerror(e));
            return;
        }
        if (n == 0)
            break;
        data.append(chunk, (size_t)n);
    }
    close(fd);
    buf_ = static_cast<char *>(malloc(data.size() + 1));
    if (!buf_) {
        fprintf(stderr, "parseargs: out of memory\n");
        abort();
    }
    memcpy(buf_, data.data(), data.size());
    buf_[data.size()] = '\0';
    p_ = buf_;
    lim_ = buf_ + data.size();
    lineno = 1;
}

parseargs::~parseargs()
{
    free(buf_);
}

void parseargs::error(str msg)
{
    strbuf where;
    if (filename)
        where << filename << ":";
    if (lineno)
        where << lineno << ": ";
    else
        where << " ";
    fatal << where << msg << "\n";
}

/* Blanks, newlines, comment lines and continuations before the next
 * argument. A '#' starts a comment only as a line's first character. */
void parseargs::skipblanks()
{
    bool line_start = true;
    while (p_ < lim_) {
        char c = *p_;
        if (c == '#' && line_start) {
            while (p_ < lim_ && *p_ != '\n')
                p_++;
            continue; /* the newline is counted below */
        }
        if (c == '\n') {
            lineno++;
            p_++;
            line_start = true;
        } else if (c == ' ' || c == '\t') {
            p_++;
            line_start = false;
        } else if (at_continuation()) {
            p_ += 2;
            lineno++;
            line_start = false;
        } else {
            return;
        }
    }
}

/* Blanks and continuations within a line. */
void parseargs::skiplwsp()
{
    while (p_ < lim_) {
        if (*p_ == ' ' || *p_ == '\t') {
            p_++;
        } else if (at_continuation()) {
            p_ += 2;
            lineno++;
        } else {
            return;
        }
    }
}

/* The next argument of the line, or a null str at the line's end. */
str parseargs::getarg()
{
    skiplwsp();
    if (p_ >= lim_ || *p_ == '\n')
        return str();
    bool quoted = false;
    std::string arg;
    while (p_ < lim_) {
        char c = *p_;
        if (c == '\\') {
            if (p_ + 1 >= lim_) {
                error("invalid '\\' before end of file");
                return str();
            }
            if (p_[1] == '\n') {
                skiplwsp(); /* a continuation: the argument goes on */
            } else {
                arg += p_[1];
                p_ += 2;
            }
            continue;
        }
        if (c == '"')
            quoted = !quoted;
        else if (quoted || (c != ' ' && c != '\t' && c != '\n'))
            arg += c;
        else
            return str(arg.data(), arg.size());
        p_++;
    }
    if (quoted)
        error("closing '\"' missing");
    return str(arg.data(), arg.size());
}

bool parseargs::getline(vec<str> *args, int *linep)
{
    args->clear();
    skipblanks();
    if (linep)
        *linep = lineno;
    while (str a = getarg())
        args->push_back(a);
    return args->size() != 0;
}

/* ---- Numbers and case ---------------------------------------------------------- */

int64_t strtoi64(const char *nptr, char **endptr, int base)
{
    return (int64_t)strtoll(nptr, endptr, base);
}

void mytolower(char *dest, const char *src)
{
    while (*src)
        *dest++ = (char)tolower((unsigned char)*src++);
    *dest = '\0';
}

str mytolower(const str &in)
{
    if (!in)
        return in;
    mstr m(in.len());
    for (size_t i = 0; i < in.len(); i++)
        m.cstr()[i] = (char)tolower((unsigned char)in.cstr()[i]);
    return str(m);
}

/* ---- conftab's settings -------------------------------------------------------- */

bool conftab_str::convert(const vec<str> &v, const str &loc, bool *e)
{
    if (dest_) {
        if (!count_args(v, 2))
            return false;
        value_ = v[1];
    } else if (scb_) {
        if (v.size() < 2)
            return false;
        value_ = v[1];
    } else {
        args_ = v;
    }
    loc_ = loc;
    errp_ = e;
    return true;
}

void conftab_str::set()
{
    if (dest_) {
        if (check_ && dest_->len()) {
            warn << loc_ << ": " << name << ": variable already defined\n";
            if (errp_)
                *errp_ = true;
        } else {
            *dest_ = value_;
        }
    } else if (cnfcb_) {
        (*cnfcb_)(args_, loc_, errp_);
    } else if (scb_) {
        (*scb_)(value_);
    }
}

void conftab_str::dump(strbuf &b) const
{
    str val;
    if (!dest_ && cnfcb_ && args_.size())
        val = join(" ", args_);
    else if (dest_ && *dest_)
        val = *dest_;
    if (val)
        b << "\"" << val << "\"";
    else
        b << "(null)";
}

bool conftab_bool::convert(const vec<str> &v, const str &, bool *)
{
    if (!count_args(v, 2))
        return false;
    bad_ = false;
    if (v[1] == "1")
        tmp_ = true;
    else if (v[1] == "0")
        tmp_ = false;
    else
        bad_ = true;
    return !bad_;
}

bool conftab_double::convert(const vec<str> &v, const str &, bool *)
{
    if (!count_args(v, 2))
        return false;
    char *end;
    tmp_ = strtod(v[1].cstr(), &end);
    return end != v[1].cstr();
}

/* ---- conftab ------------------------------------------------------------------- */

bool conftab::match(const vec<str> &av, const str &cf, int ln, bool *err)
{
    if (av.size() < 1)
        return false;
    conftab_el *el = tab_[mytolower(av[0])];
    if (!el)
        return false;
    str loc = strbuf() << cf << ":" << ln;
    if (!el->convert(av, loc, err)) {
        warn << cf << ":" << ln << ": usage: " << el->name << " <value>\n";
        *err = true;
    } else if (!el->inbounds()) {
        warn << cf << ":" << ln << ": " << el->name << " out of range\n";
        *err = true;
    } else {
        el->set();
        el->mark_set();
    }
    return true;
}

void conftab::reset()
{
    for (conftab_el *el : v_)
        el->reset();
}

void conftab::apply_defaults()
{
    for (conftab_el *el : v_) {
        if (!el->was_set() && el->apply_default()) {
            el->mark_set_by_default();
            el->mark_set();
        }
    }
}

void conftab::report(vec<str> *out)
{
    size_t width = 0;
    for (conftab_el *el : v_)
        width = std::max(width, el->get_name().len());
    width += 2;
    for (conftab_el *el : v_) {
        strbuf b;
        b << "'" << el->get_name() << "'";
        size_t pad = width - el->get_name().len();
        for (size_t i = 0; i < pad; i++)
            b << " ";
        b << "->  ";
        if (!el->was_set()) {
            b << "(not set)";
        } else {
            el->dump(b);
            if (el->was_set_by_default())
                b << " (by default)";
        }
        out->push_back(str(b));
    }
}

void conftab::report()
{
    vec<str> lines;
    report(&lines);
    for (const str &l : lines)
        warn << " " << l << "\n";
}

bool conftab::run(const str &file, u_int opts, int fd, status_t *sp)
{
    bool errors = false, unknown = false;
    if (opts & (CONFTAB_APPLY_DEFAULTS | CONFTAB_VERBOSE))
        reset();
    if (file) {
        parseargs pa(file, fd);
        if (opts & CONFTAB_VERBOSE)
            warn << "Parsing configuration file: " << file << "\n";
        vec<str> av;
        int line;
        while (pa.getline(&av, &line)) {
            if (!match(av, file, line, &errors)) {
                warn << file << ":" << line << ": unknown config parameter\n";
                unknown = true;
            }
        }
    }
    if (opts & CONFTAB_APPLY_DEFAULTS)
        apply_defaults();
    if (opts & CONFTAB_VERBOSE)
        report();
    if (sp)
        *sp = errors ? ERROR : unknown ? UNKNOWN : OK;
    return !errors && !unknown;
}
