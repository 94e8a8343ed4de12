/* SPDX-License-Identifier: MIT */
/*
 * xdr.cpp: XDR streams over a suio (xdrsuio) and a buffer (xdrmem), the
 * built-in types' xdr functions, rpc_print's printer, rpc_program::lookup.
 */
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include <arpa/inet.h>

#include "xdrmisc.h"

const char __xdr_zero_bytes[4] = {0, 0, 0, 0};

/* ---- xdrsuio: x_private is the suio; x_handy: 1 when it scrubs ---------------------- */

namespace {

suio *su(XDR *x)
{
    return reinterpret_cast<suio *>(x->x_private);
}

bool_t suio_getlong(XDR *x, long *lp)
{
    suio *u = su(x);
    if (u->resid() < 4)
        return FALSE;
    uint32_t v;
    memcpy(&v, u->iov()->iov_base, 4);
    u->rembytes(4);
    *lp = (long)ntohl(v);
    return TRUE;
}
bool_t suio_putlong(XDR *x, const long *lp)
{
    uint32_t v = htonl((uint32_t)*lp);
    su(x)->copy(&v, 4);
    return TRUE;
}
bool_t suio_getbytes(XDR *x, char *p, u_int n)
{
    suio *u = su(x);
    if (u->resid() < n)
        return FALSE;
    u->copyout(p, n);
    u->rembytes(n);
    return TRUE;
}
bool_t suio_putbytes(XDR *x, const char *p, u_int n)
{
    su(x)->copy(p, n);
    return TRUE;
}
u_int suio_getpostn(XDR *x)
{
    return (u_int)su(x)->resid();
}
bool_t suio_setpostn(XDR *, u_int)
{
    return FALSE;
}
int32_t *suio_inline(XDR *x, u_int n)
{
    suio *u = su(x);
    if (x->x_op == XDR_ENCODE) {
        char *p = u->getspace(n);
        u->print(p, n);
        return reinterpret_cast<int32_t *>(p);
    }
    if (x->x_op != XDR_DECODE || u->resid() < n || !u->iovcnt())
        return nullptr;
    /* The bytes stay valid until the next operation on the stream. */
    int32_t *p = static_cast<int32_t *>(u->iov()->iov_base);
    u->rembytes(n);
    return p;
}
void suio_destroy(XDR *x)
{
    suio *u = su(x);
    if (x->x_handy && u->resid()) {
        /* Scrubbed: zero the bytes held before the buffer goes. */
        char *p = static_cast<char *>(u->iov()->iov_base);
        memset(p, 0, u->resid());
    }
    delete u;
    x->x_private = nullptr;
}
const xdr_ops suio_ops = {suio_getlong,  suio_putlong,  suio_getbytes, suio_putbytes,
                          suio_getpostn, suio_setpostn, suio_inline,   suio_destroy};

/* ---- xdrmem: x_base the buffer, x_private the position, x_handy bytes left ---------- */

bool_t mem_getlong(XDR *x, long *lp)
{
    if (x->x_handy < 4)
        return FALSE;
    uint32_t v;
    memcpy(&v, x->x_private, 4);
    x->x_private += 4;
    x->x_handy -= 4;
    *lp = (long)ntohl(v);
    return TRUE;
}
bool_t mem_putlong(XDR *x, const long *lp)
{
    if (x->x_handy < 4)
        return FALSE;
    uint32_t v = htonl((uint32_t)*lp);
    memcpy(x->x_private, &v, 4);
    x->x_private += 4;
    x->x_handy -= 4;
    return TRUE;
}
bool_t mem_getbytes(XDR *x, char *p, u_int n)
{
    if (x->x_handy < n)
        return FALSE;
    memcpy(p, x->x_private, n);
    x->x_private += n;
    x->x_handy -= n;
    return TRUE;
}
bool_t mem_putbytes(XDR *x, const char *p, u_int n)
{
    if (x->x_handy < n)
        return FALSE;
    memcpy(x->x_private, p, n);
    x->x_private += n;
    x->x_handy -= n;
    return TRUE;
}
u_int mem_getpostn(XDR *x)
{
    return (u_int)(x->x_private - x->x_base);
}
bool_t mem_setpostn(XDR *x, u_int pos)
{
    u_int total = (u_int)(x->x_private - x->x_base) + x->x_handy;
    if (pos > total)
        return FALSE;
    x->x_private = x->x_base + pos;
    x->x_handy = total - pos;
    return TRUE;
}
int32_t *mem_inline(XDR *x, u_int n)
{
    if (x->x_handy < n)
        return nullptr;
    int32_t *p = reinterpret_cast<int32_t *>(x->x_private);
    x->x_private += n;
    x->x_handy -= n;
    return p;
}
const xdr_ops mem_ops = {mem_getlong,  mem_putlong,  mem_getbytes, mem_putbytes,
                         mem_getpostn, mem_setpostn, mem_inline,   nullptr};

void suio_create(XDR *x, xdr_op op, bool scrub)
{
    memset(x, 0, sizeof *x);
    x->x_op = op;
    x->x_ops = &suio_ops;
    x->x_private = reinterpret_cast<char *>(new suio);
    x->x_handy = scrub;
}

} // namespace

void xdrsuio_create(XDR *xdrs, enum xdr_op op)
{
    suio_create(xdrs, op, false);
}

void xdrsuio_scrub_create(XDR *xdrs, enum xdr_op op)
{
    suio_create(xdrs, op, true);
}

void xdrmem_create(XDR *xdrs, char *addr, u_int len, enum xdr_op op)
{
    memset(xdrs, 0, sizeof *xdrs);
    xdrs->x_op = op;
    xdrs->x_ops = &mem_ops;
    xdrs->x_base = addr;
    xdrs->x_private = addr;
    xdrs->x_handy = len;
}

bool isxdrsuio(XDR *xdrs)
{
    return xdrs->x_ops == &suio_ops;
}

suio *xsuio(XDR *xdrs)
{
    return isxdrsuio(xdrs) ? su(xdrs) : nullptr;
}

size_t xdr_remaining(XDR *xdrs)
{
    if (xdrs->x_ops == &mem_ops)
        return xdrs->x_handy;
    if (xdrs->x_ops == &suio_ops)
        return su(xdrs)->resid();
    return 0;
}

bool xdr_check_len(XDR *xdrs, u_int32_t n, size_t max, size_t elemsize)
{
    if (n > max)
        return false;
    if (xdrs->x_ops == &mem_ops || xdrs->x_ops == &suio_ops) {
        /* Every element takes at least elemsize bytes on the wire. */
        size_t left = xdr_remaining(xdrs);
        if ((uint64_t)n * elemsize > left)
            return false;
    }
    return true;
}

bool xdr_str_decode(XDR *xdrs, str &obj, size_t max)
{
    u_int32_t n;
    if (!xdr_getint(xdrs, n) || !xdr_check_len(xdrs, n, max, 1))
        return false;
    mstr m(n);
    if (!xdr_getpadbytes(xdrs, m.cstr(), n))
        return false;
    obj = m;
    return true;
}

void xdr_delete(xdrproc_t proc, void *objp)
{
    if (!objp)
        return;
    XDR x;
    memset(&x, 0, sizeof x);
    x.x_op = MELY_XDR_DELETE;
    proc(&x, objp);
}

/* ---- The built-in types ---------------------------------------------------------------- */

namespace {
/* void's objects: one static byte stands for all of them. */
char void_obj;
} // namespace

void *void_alloc()
{
    return &void_obj;
}
bool_t xdr_void(XDR *, void *)
{
    return TRUE;
}
void *false_alloc()
{
    return &void_obj;
}
bool_t xdr_false(XDR *xdrs, void *)
{
    return xdrs->x_op == MELY_XDR_DELETE || xdrs->x_op == XDR_FREE;
}
void print_void(const void *, const strbuf *sbp, int, const char *name, const char *prefix)
{
    if (sbp)
        *sbp << (prefix ? prefix : "") << (name ? name : "") << (name ? " = " : "") << "void";
}
void print_false(const void *o, const strbuf *sbp, int r, const char *name, const char *prefix)
{
    print_void(o, sbp, r, name, prefix);
}

#define BUILTIN_XDR(NAME, T)                                                                  \
    void *NAME##_alloc() { return New T(); }                                                  \
    bool_t xdr_##NAME(XDR *xdrs, void *objp) { return rpc_xdr_apply(xdrs, *static_cast<T *>(objp)); } \
    void print_##NAME(const void *objp, const strbuf *sbp, int recdepth, const char *name,    \
                      const char *prefix)                                                     \
    {                                                                                         \
        if (sbp) {                                                                            \
            rpc_print(*sbp, *static_cast<const T *>(objp), recdepth, name, prefix);           \
        } else {                                                                              \
            strbuf sb;                                                                        \
            rpc_print(sb, *static_cast<const T *>(objp), recdepth, name, prefix);             \
            warnx << sb << "\n";                                                              \
        }                                                                                     \
    }

BUILTIN_XDR(bool, bool)
BUILTIN_XDR(int, int32_t)
BUILTIN_XDR(int32_t, int32_t)
BUILTIN_XDR(u_int32_t, u_int32_t)
BUILTIN_XDR(int64_t, int64_t)
BUILTIN_XDR(u_int64_t, u_int64_t)
BUILTIN_XDR(string, rpc_str<RPC_INFINITY>)

#define BUILTIN_DUMP(NAME, T)                                                                 \
    void dump_##NAME(const T *objp) { print_##NAME(objp, nullptr, -1, #NAME, ""); }
BUILTIN_DUMP(bool, bool)
BUILTIN_DUMP(int32_t, int32_t)
BUILTIN_DUMP(u_int32_t, u_int32_t)
BUILTIN_DUMP(int64_t, int64_t)
BUILTIN_DUMP(u_int64_t, u_int64_t)

/* ---- rpc_printer -------------------------------------------------------------------------- */

void rpc_printer::sep()
{
    if (multi_) {
        sb_ << prefix_;
        for (int i = 0; i < depth_; i++)
            sb_ << "  ";
    } else if (!first_) {
        sb_ << " ";
    }
    first_ = false;
}

void rpc_printer::name(const char *field)
{
    sep();
    if (field)
        sb_ << field << " = ";
}

void rpc_printer::enter(const char *field)
{
    name(field);
    sb_ << "{";
    if (multi_)
        sb_ << "\n";
    depth_++;
    first_ = true;
}

void rpc_printer::exit()
{
    depth_--;
    if (multi_) {
        sb_ << prefix_;
        for (int i = 0; i < depth_; i++)
            sb_ << "  ";
    } else {
        sb_ << " ";
    }
    sb_ << "}";
    if (depth_ > 0)
        sb_ << ";";
    if (multi_)
        sb_ << "\n";
    first_ = false;
}

namespace {
void leaf_end(rpc_printer &p, bool multi)
{
    p.sb() << ";";
    if (multi)
        p.sb() << "\n";
}
} // namespace

bool rpc_traverse(rpc_printer &p, u_int32_t &obj, const char *field)
{
    p.name(field);
    p.sb() << obj;
    leaf_end(p, p.multi());
    return true;
}
bool rpc_traverse(rpc_printer &p, int32_t &obj, const char *field)
{
    p.name(field);
    p.sb() << obj;
    leaf_end(p, p.multi());
    return true;
}
bool rpc_traverse(rpc_printer &p, u_int64_t &obj, const char *field)
{
    p.name(field);
    p.sb() << obj;
    leaf_end(p, p.multi());
    return true;
}
bool rpc_traverse(rpc_printer &p, int64_t &obj, const char *field)
{
    p.name(field);
    p.sb() << obj;
    leaf_end(p, p.multi());
    return true;
}
bool rpc_traverse(rpc_printer &p, bool &obj, const char *field)
{
    p.name(field);
    p.sb() << (obj ? "TRUE" : "FALSE");
    leaf_end(p, p.multi());
    return true;
}
bool rpc_traverse(rpc_printer &p, double &obj, const char *field)
{
    p.name(field);
    p.sb().fmt("%g", obj);
    leaf_end(p, p.multi());
    return true;
}
bool rpc_traverse(rpc_printer &p, str &obj, const char *field)
{
    p.name(field);
    p.sb() << "\"";
    for (size_t i = 0; i < obj.len(); i++) {
        unsigned char c = (unsigned char)obj[(ptrdiff_t)i];
        if (c == '"' || c == '\\')
            p.sb().fmt("\\%c", c);
        else if (c >= 0x20 && c < 0x7f)
            p.sb().fmt("%c", c);
        else
            p.sb().fmt("\\x%02x", c);
    }
    p.sb() << "\"";
    leaf_end(p, p.multi());
    return true;
}
void rpc_print_bytes(rpc_printer &p, const char *buf, size_t n, const char *field)
{
    p.name(field);
    p.sb() << "0x";
    for (size_t i = 0; i < n; i++)
        p.sb().fmt("%02x", (unsigned char)buf[i]);
    leaf_end(p, p.multi());
}

/* ---- rpc_program -------------------------------------------------------------------------- */

bool rpc_program::lookup(const char *rpc, u_int32_t *out) const
{
    for (size_t i = 0; i < nproc; i++) {
        if (tbl[i].name && !strcmp(tbl[i].name, rpc)) {
            *out = (u_int32_t)i;
            return true;
        }
    }
    return false;
}
