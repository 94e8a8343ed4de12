/* SPDX-License-Identifier: MIT */
/*
 * rpctypes.h (mely-compat): the C++ types of XDR data, as libasync's arpc and
 * the code mely-rpcc generates (doc/porting.md, "RPC") use them.
 *
 *   rpc_str<N>        a str of at most N bytes (string s<N>)
 *   rpc_bytes<N>      a vec<char> of at most N bytes (opaque o<N>)
 *   rpc_opaque<N>     exactly N bytes, an array<char, N> (opaque o[N])
 *   rpc_vec<T, N>     a vec<T> of at most N elements (T v<N>)
 *   array<T, N>       exactly N elements (T v[N]; array.h)
 *   rpc_ptr<T>        an optional T, owned (T *p): NULL, alloc(), assign(p),
 *                     release(), clear(); copies copy the T
 *   union_entry<T>    an arm of a discriminated union (union.h's)
 *   RPC_INFINITY      the bound of <> (2^31 - 1)
 *
 * rpc_traverse(t, obj, field) walks a value for a traverser t: XDR * (encode,
 * decode: xdrmisc.h), rpc_printer (rpc_print), or a program's own. A traverser
 * gives rpc_traverse(t, u_int32_t &, field) and (u_int64_t &), and for speed
 * may give the byte types and str; the rest is built here on those.
 * rpc_enter_struct / rpc_exit_struct tell a traverser a composite starts and
 * ends (they do nothing unless it overloads them).
 *
 * Tables: rpcgen_table (one procedure: its name, argument and result types,
 * their alloc, xdr and print functions) and rpc_program (program, version,
 * table, size, name), as mely-rpcc's output fills them.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_RPCTYPES_H
#define MELY_COMPAT_RPCTYPES_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <typeinfo>

#include <sys/types.h>

#include "array.h"
#include "err.h"
#include "refcnt.h"
#include "str.h"
#include "vec.h"

#include "stllike.h" /* implicit_cast, which .x pass-through lines use */
#include "union.h"

/* ---- The XDR stream (xdrmisc.h creates them) ----------------------------- */

#ifndef MELY_COMPAT_XDR_TYPES
#define MELY_COMPAT_XDR_TYPES 1
typedef int32_t bool_t;
#ifndef TRUE
#define TRUE 1
#endif
#ifndef FALSE
#define FALSE 0
#endif
enum xdr_op { XDR_ENCODE = 0, XDR_DECODE = 1, XDR_FREE = 2 };
struct XDR;
/* A stream's operations (Sun's names; x_getlong/x_putlong move 32 bits). */
struct xdr_ops {
    bool_t (*x_getlong)(XDR *, long *);
    bool_t (*x_putlong)(XDR *, const long *);
    bool_t (*x_getbytes)(XDR *, char *, u_int);
    bool_t (*x_putbytes)(XDR *, const char *, u_int);
    u_int (*x_getpostn)(XDR *);
    bool_t (*x_setpostn)(XDR *, u_int);
    int32_t *(*x_inline)(XDR *, u_int);
    void (*x_destroy)(XDR *);
};
struct XDR {
    enum xdr_op x_op;
    const struct xdr_ops *x_ops;
    char *x_public;  /* the program's */
    char *x_private; /* the stream's */
    char *x_base;    /* the stream's */
    u_int x_handy;   /* the stream's */
};
typedef bool_t (*xdrproc_t)(XDR *, void *);
namespace sfs {
typedef ::xdrproc_t xdrproc_t;
}
#endif

/* ---- Tables -------------------------------------------------------------------- */

typedef void *(*xdr_alloc_t)();
typedef void (*rpc_print_fn_t)(const void *, const strbuf *, int, const char *, const char *);

struct rpcgen_table {
    const char *name; /* NULL: no such procedure */
    const std::type_info *type_arg;
    xdr_alloc_t alloc_arg;
    xdrproc_t xdr_arg;
    rpc_print_fn_t print_arg;
    const std::type_info *type_res;
    xdr_alloc_t alloc_res;
    xdrproc_t xdr_res;
    rpc_print_fn_t print_res;
};

struct rpc_program {
    u_int32_t progno;
    u_int32_t versno;
    const struct rpcgen_table *tbl;
    size_t nproc;
    const char *name;
    /* The procedure named rpc ("EX_NULL"); false if none. */
    bool lookup(const char *rpc, u_int32_t *out) const;
};

struct xdr_procpair_t {
    xdr_procpair_t() : alloc(NULL), proc(NULL) {}
    xdr_procpair_t(xdr_alloc_t a, xdrproc_t p) : alloc(a), proc(p) {}
    xdr_alloc_t alloc;
    xdrproc_t proc;
};

enum { RPC_INFINITY = 0x7fffffff };

/* ---- Containers ------------------------------------------------------------------ */

template <class T> class rpc_ptr {
    T *p_ = nullptr;

public:
    rpc_ptr() {}
    rpc_ptr(const rpc_ptr &o) : p_(o.p_ ? New T(*o.p_) : nullptr) {}
    ~rpc_ptr() { delete p_; }
    rpc_ptr &operator=(const rpc_ptr &o)
    {
        if (!o.p_)
            clear();
        else if (p_)
            *p_ = *o.p_;
        else
            p_ = New T(*o.p_);
        return *this;
    }
    void clear()
    {
        delete p_;
        p_ = nullptr;
    }
    rpc_ptr &alloc()
    {
        if (!p_)
            p_ = New T;
        return *this;
    }
    rpc_ptr &assign(T *t)
    {
        if (t != p_) {
            clear();
            p_ = t;
        }
        return *this;
    }
    T *release()
    {
        T *r = p_;
        p_ = nullptr;
        return r;
    }
    void swap(rpc_ptr &o)
    {
        T *t = o.p_;
        o.p_ = p_;
        p_ = t;
    }
    operator T *() const { return p_; }
    T *operator->() const { return p_; }
    T &operator*() const { return *p_; }
};
template <class T> inline void swap(rpc_ptr<T> &a, rpc_ptr<T> &b)
{
    a.swap(b);
}

template <class T, size_t max> class rpc_vec : public vec<T> {
    typedef vec<T> super;

public:
    enum { maxsize = max };
    typedef typename super::elm_t elm_t;
    rpc_vec() {}
    rpc_vec(const rpc_vec &v) : super(v) {}
    template <size_t m> rpc_vec(const rpc_vec<T, m> &v) : super(v) {}
    rpc_vec &operator=(const rpc_vec &v)
    {
        super::operator=(v);
        return *this;
    }
    template <size_t m> rpc_vec &operator=(const rpc_vec<T, m> &v)
    {
        super::operator=(v);
        return *this;
    }
    /* Takes n elements from p. */
    void set(const elm_t *p, size_t n)
    {
        super::clear();
        for (size_t i = 0; i < n; i++)
            super::push_back(p[i]);
    }
};

template <size_t max = RPC_INFINITY> struct rpc_str : str {
    enum { maxsize = max };
    rpc_str() : str("") {}
    rpc_str(const str &s) : str(s) {}
    rpc_str(const char *p) : str(p) {}
    rpc_str(const char *p, size_t n) : str(p, n) {}
    rpc_str(const strbuf &sb) : str(sb) {}
    rpc_str &operator=(const str &s)
    {
        str::operator=(s);
        return *this;
    }
    rpc_str &operator=(const char *p)
    {
        str::operator=(p);
        return *this;
    }
    rpc_str &operator=(const strbuf &sb)
    {
        str::operator=(sb);
        return *this;
    }
};

template <size_t n = RPC_INFINITY> struct rpc_opaque : array<char, n> {
    rpc_opaque() { memset(this->base(), 0, n); }
};

template <size_t n = RPC_INFINITY> struct rpc_bytes : rpc_vec<char, n> {
    rpc_bytes() {}
    rpc_bytes(const rpc_vec<char, n> &v) : rpc_vec<char, n>(v) {}
    template <size_t m> rpc_bytes(const rpc_bytes<m> &v) : rpc_vec<char, n>(v) {}
    rpc_bytes &operator=(const str &s)
    {
        this->set(s.cstr(), s.len());
        return *this;
    }
    template <size_t m> rpc_bytes &operator=(const rpc_bytes<m> &v)
    {
        rpc_vec<char, n>::operator=(v);
        return *this;
    }
};

template <size_t n> inline bool operator==(const rpc_opaque<n> &a, const rpc_opaque<n> &b)
{
    return !memcmp(a.base(), b.base(), n);
}
template <size_t n> inline bool operator!=(const rpc_opaque<n> &a, const rpc_opaque<n> &b)
{
    return !(a == b);
}
template <size_t n, size_t m> inline bool operator==(const rpc_bytes<n> &a, const rpc_bytes<m> &b)
{
    return a.size() == b.size() && (!a.size() || !memcmp(a.base(), b.base(), a.size()));
}
template <size_t n, size_t m> inline bool operator!=(const rpc_bytes<n> &a, const rpc_bytes<m> &b)
{
    return !(a == b);
}
template <size_t n> struct equals<rpc_opaque<n>> {
    bool operator()(const rpc_opaque<n> &a, const rpc_opaque<n> &b) const { return a == b; }
};
template <size_t n> struct equals<rpc_bytes<n>> {
    bool operator()(const rpc_bytes<n> &a, const rpc_bytes<n> &b) const { return a == b; }
};
template <size_t n> struct hashfn<rpc_opaque<n>> {
    hash_t operator()(const rpc_opaque<n> &a) const { return hash_bytes(a.base(), (int)n); }
};
template <size_t n> struct hashfn<rpc_bytes<n>> {
    hash_t operator()(const rpc_bytes<n> &a) const
    {
        return hash_bytes(a.base(), (int)a.size());
    }
};

/* ---- Traversal --------------------------------------------------------------------- */

/* Hooks a traverser may overload (rpc_printer does). */
template <class T> inline void rpc_enter_struct(T &, const char *) {}
template <class T> inline void rpc_exit_struct(T &, const char *) {}

/* Signed and other scalars on the two primitive ones. */
template <class T> inline bool rpc_traverse(T &t, int32_t &obj, const char *field = NULL)
{
    u_int32_t v = (u_int32_t)obj;
    if (!rpc_traverse(t, v, field))
        return false;
    obj = (int32_t)v;
    return true;
}
template <class T> inline bool rpc_traverse(T &t, int64_t &obj, const char *field = NULL)
{
    u_int64_t v = (u_int64_t)obj;
    if (!rpc_traverse(t, v, field))
        return false;
    obj = (int64_t)v;
    return true;
}
/* bool is an enum { FALSE, TRUE } on the wire: other values do not decode. */
template <class T> inline bool rpc_traverse(T &t, bool &obj, const char *field = NULL)
{
    /* Read as a byte: a bool being decoded into may never have been set
     * (a struct's member), and loading it as a bool is undefined. */
    unsigned char b;
    memcpy(&b, &obj, 1);
    u_int32_t v = b != 0;
    if (!rpc_traverse(t, v, field) || v > 1)
        return false;
    obj = v;
    return true;
}
template <class T> inline bool rpc_traverse(T &t, double &obj, const char *field = NULL)
{
    u_int64_t v;
    static_assert(sizeof v == sizeof obj, "IEEE double");
    memcpy(&v, &obj, sizeof v);
    if (!rpc_traverse(t, v, field))
        return false;
    memcpy(&obj, &v, sizeof v);
    return true;
}
template <class T> inline bool rpc_traverse(T &t, float &obj, const char *field = NULL)
{
    u_int32_t v;
    static_assert(sizeof v == sizeof obj, "IEEE float");
    memcpy(&v, &obj, sizeof v);
    if (!rpc_traverse(t, v, field))
        return false;
    memcpy(&obj, &v, sizeof v);
    return true;
}

/* XDR's quadruple (128-bit float): carried as 16 opaque bytes. */
struct quadruple {
    unsigned char b[16];
};
template <class T> inline bool rpc_traverse(T &t, quadruple &obj, const char *field = NULL)
{
    rpc_enter_struct(t, field);
    bool ok = true;
    for (int i = 0; ok && i < 16; i += 4) {
        u_int32_t v = (u_int32_t)obj.b[i] << 24 | (u_int32_t)obj.b[i + 1] << 16 |
                      (u_int32_t)obj.b[i + 2] << 8 | obj.b[i + 3];
        ok = rpc_traverse(t, v);
        obj.b[i] = (unsigned char)(v >> 24);
        obj.b[i + 1] = (unsigned char)(v >> 16);
        obj.b[i + 2] = (unsigned char)(v >> 8);
        obj.b[i + 3] = (unsigned char)v;
    }
    rpc_exit_struct(t, field);
    return ok;
}

/* Decoding a vector's length (a traverser may refuse what it cannot hold). */
template <class T> inline bool rpc_traverse_len(T &t, u_int32_t &n, size_t max)
{
    return rpc_traverse(t, n, NULL) && n <= max;
}

template <class T, class E, size_t n>
inline bool rpc_traverse(T &t, array<E, n> &obj, const char *field = NULL)
{
    rpc_enter_struct(t, field);
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++)
        ok = rpc_traverse(t, obj[i]);
    rpc_exit_struct(t, field);
    return ok;
}

template <class T, class E, size_t max>
inline bool rpc_traverse(T &t, rpc_vec<E, max> &obj, const char *field = NULL)
{
    rpc_enter_struct(t, field);
    u_int32_t n = (u_int32_t)obj.size();
    bool ok = rpc_traverse_vec_len(t, n, max);
    if (ok && n != obj.size())
        obj.setsize(n);
    for (size_t i = 0; ok && i < n; i++)
        ok = rpc_traverse(t, obj[i]);
    rpc_exit_struct(t, field);
    return ok;
}

template <class T, class E> inline bool rpc_traverse(T &t, rpc_ptr<E> &obj, const char *field = NULL)
{
    /* optional-data: a bool, then the value if TRUE */
    bool present = obj != nullptr;
    if (!rpc_traverse(t, present, field))
        return false;
    if (!present) {
        obj.clear();
        return true;
    }
    obj.alloc();
    return rpc_traverse(t, *obj, field);
}

/* The generic length check for traversers that do not decode (printing). */
template <class T> inline bool rpc_traverse_vec_len(T &t, u_int32_t &n, size_t max)
{
    return rpc_traverse_len(t, n, max);
}

/* ---- Printing ------------------------------------------------------------------------ */

/* A traverser that writes a value in a readable form:
 *   name = { field = 1; s = "abc"; v = [2] { 1, 2 }; }
 * (one line when prefix is NULL; one field a line, indented, otherwise). */
class rpc_printer {
    const strbuf &sb_;
    str prefix_;
    bool multi_;
    int depth_ = 0;
    int recdepth_;
    bool first_ = true;

    void sep();

public:
    rpc_printer(const strbuf &sb, int recdepth, const char *prefix)
        : sb_(sb), prefix_(prefix ? prefix : ""), multi_(prefix != nullptr), recdepth_(recdepth)
    {
    }
    void name(const char *field);
    void enter(const char *field);
    void exit();
    const strbuf &sb() const { return sb_; }
    bool multi() const { return multi_; }
    bool deep() const { return recdepth_ >= 0 && depth_ > recdepth_; }
};
inline void rpc_enter_struct(rpc_printer &p, const char *f)
{
    p.enter(f);
}
inline void rpc_exit_struct(rpc_printer &p, const char *)
{
    p.exit();
}
bool rpc_traverse(rpc_printer &p, u_int32_t &obj, const char *field = NULL);
bool rpc_traverse(rpc_printer &p, int32_t &obj, const char *field = NULL);
bool rpc_traverse(rpc_printer &p, u_int64_t &obj, const char *field = NULL);
bool rpc_traverse(rpc_printer &p, int64_t &obj, const char *field = NULL);
bool rpc_traverse(rpc_printer &p, bool &obj, const char *field = NULL);
bool rpc_traverse(rpc_printer &p, double &obj, const char *field = NULL);
bool rpc_traverse(rpc_printer &p, str &obj, const char *field = NULL);
/* Bytes in hex. */
void rpc_print_bytes(rpc_printer &p, const char *buf, size_t n, const char *field);
template <size_t n> inline bool rpc_traverse(rpc_printer &p, rpc_str<n> &obj, const char *field = NULL)
{
    return rpc_traverse(p, static_cast<str &>(obj), field);
}
template <size_t n>
inline bool rpc_traverse(rpc_printer &p, rpc_opaque<n> &obj, const char *field = NULL)
{
    rpc_print_bytes(p, obj.base(), n, field);
    return true;
}
template <size_t n>
inline bool rpc_traverse(rpc_printer &p, rpc_bytes<n> &obj, const char *field = NULL)
{
    rpc_print_bytes(p, obj.base(), obj.size(), field);
    return true;
}
inline bool rpc_traverse_vec_len(rpc_printer &, u_int32_t &, size_t)
{
    return true;
}

/* rpc_print(sb, obj, recdepth, name, prefix): appends obj to sb. recdepth
 * (-1: no limit) bounds how deep nested values are printed. */
template <class T>
const strbuf &rpc_print(const strbuf &sb, const T &obj, int recdepth = -1,
                        const char *name = NULL, const char *prefix = NULL)
{
    rpc_printer p(sb, recdepth, prefix);
    rpc_traverse(p, const_cast<T &>(obj), name);
    if (prefix)
        sb << "\n";
    return sb;
}

/* ---- What mely-rpcc's output declares for each type -------------------------------------- */

#define RPC_PRINT_TYPE_DECL(T)                                                                \
    void print_##T(const void *, const strbuf *, int, const char *, const char *);            \
    void dump_##T(const T *);
#define RPC_STRUCT_DECL(T) RPC_PRINT_TYPE_DECL(T)
#define RPC_UNION_DECL(T) RPC_PRINT_TYPE_DECL(T)
#define RPC_ENUM_DECL(T) RPC_PRINT_TYPE_DECL(T)
#define RPC_TYPEDEF_DECL(T) RPC_PRINT_TYPE_DECL(T)
/* print_T(objp, sbp, recdepth, name, prefix): rpc_print to *sbp, or to
 * stderr (warnx) when sbp is NULL; dump_T(objp): to stderr. */
#define RPC_PRINT_DEFINE(T)                                                                   \
    void print_##T(const void *_objp, const strbuf *_sbp, int _recdepth, const char *_name,   \
                   const char *_prefix)                                                       \
    {                                                                                         \
        if (_sbp) {                                                                           \
            rpc_print(*_sbp, *static_cast<const T *>(_objp), _recdepth, _name, _prefix);      \
        } else {                                                                              \
            strbuf _sb;                                                                       \
            rpc_print(_sb, *static_cast<const T *>(_objp), _recdepth, _name, _prefix);        \
            warnx << _sb << "\n";                                                             \
        }                                                                                     \
    }                                                                                         \
    void dump_##T(const T *_objp) { print_##T(_objp, NULL, -1, #T, ""); }

#endif /* MELY_COMPAT_RPCTYPES_H */
