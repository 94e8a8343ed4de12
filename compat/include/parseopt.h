/* SPDX-License-Identifier: MIT */
/*
 * parseopt.h (mely-compat): libasync's configuration-file reading.
 *
 * parseargs: splits a file into lines of arguments.
 *   parseargs pa(file);        reads all of file (or of fd, when given: file
 *                              then only names it in messages) and closes it
 *   while (pa.getline(&av, &line)) ...   the next line with at least one
 *                              argument, and its number; false at the end
 *   The rules: arguments are separated by blanks (spaces, tabs); a line whose
 *   first character is '#' is a comment (a '#' elsewhere is an argument like
 *   any other); `\` followed by a newline continues the line (also inside an
 *   argument); `\c` is the character c; double quotes group blanks and
 *   newlines into one argument and are removed ("" is an empty argument).
 *   Errors (a file that cannot be read, a `\` at the very end, a missing
 *   closing quote) call the virtual error(msg), which by default is
 *   fatal: "progname: file:line: msg". A subclass may override it.
 *
 * strtoi64(s, &end, base)      strtoll's rules for int64_t (base 0: 0x.., 0..)
 * convertint(s, &v, base)      true if the whole (non-empty) s is a number,
 *                              stored in *v (converted to T, not range-checked)
 * mytolower(dst, src), mytolower(s)   lower-case copies
 *
 * conftab: a table of named settings, filled from a file.
 *   conftab ct;
 *   ct.add("Port", &port, 1, 65535)      an integer of any type, in bounds
 *     .add("Port", &port, 1, 65535, 80)  ... with a default
 *     .add("Name", &name)                a str ("Name value")
 *     .add("Name", &name, "default")     ... with a default
 *     .add_check("Name", &name)          a str that may be set only once
 *     .add("Debug", &flag)               a bool: 1 or 0 (also with a default)
 *     .add("Ratio", &d, 0.0, 1.0)        a double in bounds (also with a default)
 *     .add("Hook", wrap(f))              f(vec<str> args, str "file:line", bool *err)
 *     .ads("Hook", wrap(g))              g(str first argument)
 *     .ignore("Old");                    accepted and ignored
 *   bool ok = ct.run(file, opts, fd, &status);
 *   Names are matched without regard to case. Each line of the file is
 *   "Name value..."; an unknown name, a wrong number of arguments ("usage:
 *   Name <value>") or a value out of range gives a warning with the file and
 *   line; run() returns false if there was any (status: ERROR for a bad
 *   value, else UNKNOWN for an unknown name, else OK). opts:
 *   CONFTAB_APPLY_DEFAULTS sets what the file did not set to its default;
 *   CONFTAB_VERBOSE warns what it parses and every setting's value after
 *   (report()). A null file reads nothing (defaults may still apply).
 *   report(&lines) describes every setting: 'Name'  ->  value [(by default)]
 *   or (not set).
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_PARSEOPT_H
#define MELY_COMPAT_PARSEOPT_H

#include <cstdint>

#include "amisc.h"
#include "ihash.h"
#include "str.h"
#include "vec.h"
#include "weak_template.h"

class parseargs {
    char *buf_;
    const char *lim_;
    const char *p_;

    bool at_continuation() const { return p_ + 1 < lim_ && p_[0] == '\\' && p_[1] == '\n'; }
    void skipblanks();
    void skiplwsp();
    str getarg();

protected:
    str filename;
    int lineno;

    virtual void error(str msg);

public:
    parseargs(str file, int fd = -1);
    virtual ~parseargs();
    parseargs(const parseargs &) = delete;
    parseargs &operator=(const parseargs &) = delete;

    bool getline(vec<str> *args, int *linep = nullptr);
};

int64_t strtoi64(const char *nptr, char **endptr = nullptr, int base = 0);

/* convertint: amisc.h (libasync declared it here; this header brings amisc.h). */

void mytolower(char *dest, const char *src);
str mytolower(const str &in);

/* One setting of a conftab. */
class conftab_el {
public:
    conftab_el(const str &n) : name(n), lcname(mytolower(n)) {}
    virtual ~conftab_el() {}

    /* Takes the line's arguments v (v[0] is the name) into a value held
     * aside; false if they do not fit (loc is "file:line", e an error flag
     * the value may set later). */
    virtual bool convert(const vec<str> &v, const str &loc, bool *e) = 0;
    /* The value held aside is acceptable. */
    virtual bool inbounds() = 0;
    /* Stores the value held aside. */
    virtual void set() = 0;
    /* Stores the default, if there is one; false if not. */
    virtual bool apply_default() = 0;
    virtual void dump(strbuf &b) const = 0;

    /* v has exactly l arguments, or more whose l-th starts a comment ('#'). */
    bool count_args(const vec<str> &v, u_int l)
    {
        return v.size() == l || (v.size() > l && v[l][0] == '#');
    }
    const str &get_name() const { return name; }
    bool was_set() const { return was_set_; }
    void reset() { was_set_ = by_default_ = false; }
    void mark_set() { was_set_ = true; }
    void mark_set_by_default() { by_default_ = true; }
    bool was_set_by_default() const { return by_default_; }

    const str name;
    const str lcname;
    ihash_entry<conftab_el> lnk;

private:
    bool was_set_ = false;
    bool by_default_ = false;
};

class conftab_ignore : public conftab_el {
public:
    conftab_ignore(const str &n) : conftab_el(n) {}
    bool convert(const vec<str> &, const str &, bool *) override { return true; }
    bool inbounds() override { return true; }
    void set() override {}
    bool apply_default() override { return false; }
    void dump(strbuf &b) const override { b << "IGNORED"; }
};

typedef callback<void, vec<str>, str, bool *>::ref confcb;

/* A str setting: into a str (optionally with a default, optionally settable
 * only once), or handed to a callback (all arguments, or the first). */
class conftab_str : public conftab_el {
public:
    conftab_str(const str &n, str *d, bool check) : conftab_el(n), dest_(d), check_(check) {}
    conftab_str(const str &n, confcb c) : conftab_el(n), cnfcb_(c) {}
    /* The arguments in this order tell it from the confcb form. */
    conftab_str(cbs c, const str &n) : conftab_el(n), scb_(c) {}
    conftab_str(const str &n, str *d, const str &def, bool check)
        : conftab_el(n), dest_(d), check_(check), default_(def), has_default_(true)
    {
    }

    bool convert(const vec<str> &v, const str &loc, bool *e) override;
    bool inbounds() override { return true; }
    void set() override;
    bool apply_default() override
    {
        if (has_default_ && dest_)
            *dest_ = default_;
        return has_default_;
    }
    void dump(strbuf &b) const override;

private:
    str *const dest_ = nullptr;
    confcb::ptr cnfcb_;
    cbs::ptr scb_;
    const bool check_ = false;
    const str default_;
    const bool has_default_ = false;

    vec<str> args_;
    str value_;
    str loc_;
    bool *errp_ = nullptr;
};

/* A setting of one value of type T: the value read (tmp_) goes to *dest_
 * once in bounds; a default, if given, when the setting is absent. */
template <class T> class conftab_value : public conftab_el {
public:
    void set() override { *dest_ = tmp_; }
    bool apply_default() override
    {
        if (has_default_)
            *dest_ = default_;
        return has_default_;
    }

protected:
    conftab_value(const str &n, T *d) : conftab_el(n), dest_(d) {}
    conftab_value(const str &n, T *d, T def) : conftab_el(n), dest_(d), default_(def), has_default_(true) {}

    T *const dest_;
    T tmp_ = T();
    const T default_ = T();
    const bool has_default_ = false;
};

template <class T> class conftab_int : public conftab_value<T> {
public:
    conftab_int(const str &n, T *d, T lb, T ub) : conftab_value<T>(n, d), lb_(lb), ub_(ub) {}
    conftab_int(const str &n, T *d, T lb, T ub, T def) : conftab_value<T>(n, d, def), lb_(lb), ub_(ub) {}

    bool convert(const vec<str> &v, const str &, bool *) override
    {
        return this->count_args(v, 2) && convertint(v[1], &this->tmp_);
    }
    bool inbounds() override { return this->tmp_ >= lb_ && this->tmp_ <= ub_; }
    void dump(strbuf &b) const override { b << *this->dest_; }

private:
    const T lb_, ub_;
};

class conftab_bool : public conftab_value<bool> {
public:
    conftab_bool(const str &n, bool *b) : conftab_value(n, b) {}
    conftab_bool(const str &n, bool *b, bool def) : conftab_value(n, b, def) {}

    /* "1" or "0". */
    bool convert(const vec<str> &v, const str &loc, bool *e) override;
    bool inbounds() override { return !bad_; }
    void dump(strbuf &b) const override { b << (*dest_ ? "True" : "False"); }

private:
    bool bad_ = false;
};

class conftab_double : public conftab_value<double> {
public:
    conftab_double(const str &n, double *d, double lb, double ub) : conftab_value(n, d), lb_(lb), ub_(ub) {}
    conftab_double(const str &n, double *d, double lb, double ub, double def)
        : conftab_value(n, d, def), lb_(lb), ub_(ub)
    {
    }

    /* A number strtod reads at the start of the value. */
    bool convert(const vec<str> &v, const str &loc, bool *e) override;
    bool inbounds() override { return tmp_ >= lb_ && tmp_ <= ub_; }
    void dump(strbuf &b) const override { b << *dest_; }

private:
    const double lb_, ub_;
};

enum { CONFTAB_VERBOSE = 0x1, CONFTAB_APPLY_DEFAULTS = 0x2 };

class conftab {
public:
    typedef enum { OK = 0, ERROR = 1, UNKNOWN = 2 } status_t;

    conftab() {}
    ~conftab() { tab_.deleteall(); }
    conftab(const conftab &) = delete;
    conftab &operator=(const conftab &) = delete;

    bool run(const str &file, u_int opts = 0, int fd = -1, status_t *sp = nullptr);

    template <typename T> conftab &add(const str &nm, T *dp, WEAK_TMPL(T) lb, WEAK_TMPL(T) ub)
    {
        return insert(New conftab_int<T>(nm, dp, lb, ub));
    }
    template <typename T>
    conftab &add(const str &nm, T *dp, WEAK_TMPL(T) lb, WEAK_TMPL(T) ub, WEAK_TMPL(T) def)
    {
        return insert(New conftab_int<T>(nm, dp, lb, ub, def));
    }
    template <class A> conftab &add(const str &nm, A a) { return insert(New conftab_str(nm, a)); }
    conftab &ads(const str &nm, cbs c) { return insert(New conftab_str(c, nm)); }
    conftab &add(const str &nm, str *s) { return insert(New conftab_str(nm, s, false)); }
    conftab &add_check(const str &nm, str *s) { return insert(New conftab_str(nm, s, true)); }
    conftab &add(const str &nm, str *s, const str &def)
    {
        return insert(New conftab_str(nm, s, def, false));
    }
    conftab &add_check(const str &nm, str *s, const str &def)
    {
        return insert(New conftab_str(nm, s, def, true));
    }
    conftab &add(const str &nm, bool *b) { return insert(New conftab_bool(nm, b)); }
    conftab &add(const str &nm, bool *b, bool def) { return insert(New conftab_bool(nm, b, def)); }
    conftab &add(const str &nm, double *d, double lb, double ub)
    {
        return insert(New conftab_double(nm, d, lb, ub));
    }
    conftab &add(const str &nm, double *d, double lb, double ub, double def)
    {
        return insert(New conftab_double(nm, d, lb, ub, def));
    }
    conftab &ignore(const str &nm) { return insert(New conftab_ignore(nm)); }

    conftab &insert(conftab_el *e)
    {
        tab_.insert(e);
        v_.push_back(e);
        return *this;
    }

    void apply_defaults();
    void report();
    void report(vec<str> *out);
    void reset();
    /* One line's arguments: true if av[0] names a setting (err set if its
     * value was bad). */
    bool match(const vec<str> &av, const str &cf, int ln, bool *err);

private:
    ihash<const str, conftab_el, &conftab_el::lcname, &conftab_el::lnk, hashfn<str>, equals<str>>
        tab_;
    vec<conftab_el *> v_;
};

#endif /* MELY_COMPAT_PARSEOPT_H */
