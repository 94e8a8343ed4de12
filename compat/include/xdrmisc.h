/* SPDX-License-Identifier: MIT */
/*
 * xdrmisc.h (mely-compat): XDR (RFC 4506) encoding and decoding of the types
 * of rpctypes.h, as libasync's arpc and mely-rpcc's output use them.
 *
 *   xdrsuio x(XDR_ENCODE)      encodes into a suio: x.uio(), x.iov(), x.iovcnt()
 *   xdrsuio x(XDR_DECODE)      decodes what x.uio() holds (bytes are consumed)
 *   xdrmem x(buf, len, op)     encodes into or decodes from a buffer
 *   x.xdrp(), (XDR *) &x       the stream
 *   rpc_traverse(xdrp, obj)    encode or decode obj; false if the bytes ran
 *                              out (or, encoding into xdrmem, the room) or
 *                              broke a bound: a length above the type's
 *                              maximum or above what is left, a bool not 0 or
 *                              1, a union tag no arm takes, non-zero padding
 *                              is accepted (as most decoders do)
 *   xdr_putint, xdr_getint, xdr_puthyper, xdr_gethyper,
 *   xdr_putpadbytes, xdr_getpadbytes   the primitives
 *   XDR_GETPOS(x), XDR_SETPOS(x, p), XDR_INLINE(x, n), XDR_DESTROY(x)
 *   xdr2str(obj), str2xdr(obj, s), xdr2bytes(bytes, obj),
 *   bytes2xdr(obj, bytes), buf2xdr(obj, p, n)
 *   xdr_void, xdr_false, xdr_bool, xdr_int, xdr_int32_t, xdr_u_int32_t,
 *   xdr_int64_t, xdr_u_int64_t, xdr_string (a rpc_str<>), and their
 *   T_alloc(): the (XDR *, void *) functions of the built-in types
 *   xdr_free(proc, objp), xdr_delete(proc, objp), rpc_destruct(objp)
 *   rpc_xdr_apply(xdrs, obj)   what mely-rpcc's xdr_T functions do: encode,
 *                              decode, or free (reset obj to a new value)
 *   rpc_bundle_t               (proc, arg, res), for call wrappers
 *
 * Decoding allocates only what the input's bytes justify: a vector's length
 * is checked against the bytes left before its elements are made, so a
 * 12-byte message cannot ask for 4 GB.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_XDRMISC_H
#define MELY_COMPAT_XDRMISC_H

#include "rpctypes.h"

/* ---- RPC messages (RFC 5531), with Sun's names ---------------------------------- */

#ifndef MELY_COMPAT_RPC_ENUMS
#define MELY_COMPAT_RPC_ENUMS 1
enum msg_type { CALL = 0, REPLY = 1 };
enum reply_stat { MSG_ACCEPTED = 0, MSG_DENIED = 1 };
enum accept_stat {
    SUCCESS = 0,
    PROG_UNAVAIL = 1,
    PROG_MISMATCH = 2,
    PROC_UNAVAIL = 3,
    GARBAGE_ARGS = 4,
    SYSTEM_ERR = 5
};
enum reject_stat { RPC_MISMATCH = 0, AUTH_ERROR = 1 };
enum auth_stat {
    AUTH_OK = 0,
    AUTH_BADCRED = 1,
    AUTH_REJECTEDCRED = 2,
    AUTH_BADVERF = 3,
    AUTH_REJECTEDVERF = 4,
    AUTH_TOOWEAK = 5,
    AUTH_INVALIDRESP = 6,
    AUTH_FAILED = 7
};
/* A call's outcome, as the client sees it (Sun's numbers). */
enum clnt_stat {
    RPC_SUCCESS = 0,
    RPC_CANTENCODEARGS = 1,
    RPC_CANTDECODERES = 2,
    RPC_CANTSEND = 3,
    RPC_CANTRECV = 4,
    RPC_TIMEDOUT = 5,
    RPC_VERSMISMATCH = 6,
    RPC_AUTHERROR = 7,
    RPC_PROGUNAVAIL = 8,
    RPC_PROGVERSMISMATCH = 9,
    RPC_PROCUNAVAIL = 10,
    RPC_CANTDECODEARGS = 11,
    RPC_SYSTEMERROR = 12,
    RPC_UNKNOWNHOST = 13,
    RPC_PMAPFAILURE = 14,
    RPC_PROGNOTREGISTERED = 15,
    RPC_FAILED = 16,
    RPC_UNKNOWNPROTO = 17
};
enum { AUTH_NONE = 0, AUTH_SYS = 1, AUTH_UNIX = 1, AUTH_SHORT = 2, AUTH_DH = 3 };
enum { MAX_AUTH_BYTES = 400, RPC_MSG_VERSION = 2 };
/* A credential or verifier: a flavor and up to 400 bytes. */
struct opaque_auth {
    int32_t oa_flavor;
    char *oa_base;
    u_int oa_length;
};
/* What a client authenticates with: the credential and verifier sent in
 * each call (an AUTH_NONE pair when the call's AUTH * is NULL). */
struct AUTH {
    opaque_auth ah_cred;
    opaque_auth ah_verf;
};
/* AUTH_UNIX (AUTH_SYS) credentials, RFC 5531 appendix A, in Sun's struct:
 * a stamp, the machine's name (255 bytes at most), uid, gid and up to 16
 * more groups. */
enum { MAX_MACHINE_NAME = 255, NGRPS = 16 };
struct authunix_parms {
    u_long aup_time;
    char *aup_machname;
    uid_t aup_uid;
    gid_t aup_gid;
    u_int aup_len;
    gid_t *aup_gids;
};
#define authsys_parms authunix_parms
/* Parses the n bytes of an AUTH_UNIX credential's body into *aup, whose
 * pointers then point into name (MAX_MACHINE_NAME + 1 bytes, the name
 * NUL-terminated) and gids (NGRPS); false if the bytes are not exactly one
 * such credential (a name or group list over its bound, bytes short or
 * left over). */
bool authunix_parse(const char *p, size_t n, authunix_parms *aup, char *name, gid_t *gids);
/* An AUTH whose credential is AUTH_UNIX (verifier AUTH_NONE), for
 * aclnt::call; NULL (errno EINVAL) if machname is over 255 bytes or len
 * not 0..16. Free it with AUTH_DESTROY (auth_destroy). _default: this
 * host's name, effective uid, gid and groups (the first 16). */
AUTH *authunix_create(const char *machname, uid_t uid, gid_t gid, int len, const gid_t *gids);
AUTH *authunix_create_default();
extern "C" {
/* libasync's: the same with u_int32_t ids; _realids: real uid and gid. */
AUTH *authunixint_create(const char *host, u_int32_t uid, u_int32_t gid, u_int32_t ngroups,
                         const u_int32_t *groups);
AUTH *authunix_create_realids();
}
/* Frees an AUTH made by the functions above. */
void auth_destroy(AUTH *auth);
#define AUTH_DESTROY(auth) auth_destroy(auth)
#endif
/* The message of a clnt_stat ("RPC: Timed out"...). */
const char *clnt_sperrno(clnt_stat stat);
std::ostream &operator<<(std::ostream &os, clnt_stat stat);
const strbuf &strbuf_cat(const strbuf &sb, clnt_stat stat);

/* ---- Streams ------------------------------------------------------------------- */

#define XDR_GETLONG(xdrs, longp) (*(xdrs)->x_ops->x_getlong)(xdrs, longp)
#define XDR_PUTLONG(xdrs, longp) (*(xdrs)->x_ops->x_putlong)(xdrs, longp)
#define XDR_GETBYTES(xdrs, addr, len) (*(xdrs)->x_ops->x_getbytes)(xdrs, addr, len)
#define XDR_PUTBYTES(xdrs, addr, len) (*(xdrs)->x_ops->x_putbytes)(xdrs, addr, len)
#define XDR_GETPOS(xdrs) (*(xdrs)->x_ops->x_getpostn)(xdrs)
#define XDR_SETPOS(xdrs, pos) (*(xdrs)->x_ops->x_setpostn)(xdrs, pos)
#define XDR_INLINE(xdrs, len) (*(xdrs)->x_ops->x_inline)(xdrs, len)
#define XDR_DESTROY(xdrs)                                                                     \
    do {                                                                                      \
        if ((xdrs)->x_ops->x_destroy)                                                         \
            (*(xdrs)->x_ops->x_destroy)(xdrs);                                                \
    } while (0)

/* Streams in C style (sfslite's names). xdrmem_create: len bytes at addr. */
void xdrsuio_create(XDR *xdrs, enum xdr_op op);
void xdrsuio_scrub_create(XDR *xdrs, enum xdr_op op);
void xdrmem_create(XDR *xdrs, char *addr, u_int len, enum xdr_op op);
/* The suio of an xdrsuio stream (NULL for another stream). */
suio *xsuio(XDR *xdrs);
bool isxdrsuio(XDR *xdrs);
/* The bytes a decoding stream has left (0 if it cannot tell). */
size_t xdr_remaining(XDR *xdrs);

class xdrbase : public XDR {
protected:
    xdrbase() {}
    ~xdrbase() { XDR_DESTROY(static_cast<XDR *>(this)); }

public:
    xdrbase(const xdrbase &) = delete;
    xdrbase &operator=(const xdrbase &) = delete;
    XDR *xdrp() { return this; }
};

struct xdrsuio : xdrbase {
    explicit xdrsuio(xdr_op op = XDR_ENCODE, bool scrub = false)
    {
        if (scrub)
            xdrsuio_scrub_create(this, op);
        else
            xdrsuio_create(this, op);
    }
    suio *uio() { return xsuio(this); }
    const iovec *iov() { return uio()->iov(); }
    u_int iovcnt() { return (u_int)uio()->iovcnt(); }
    void hold_onto(const str &) {}
};

struct xdrmem : xdrbase {
    explicit xdrmem(char *base, size_t len, xdr_op op = XDR_DECODE)
    {
        xdrmem_create(this, base, (u_int)len, op);
    }
    explicit xdrmem(const char *base, size_t len, xdr_op op = XDR_DECODE)
    {
        if (op != XDR_DECODE)
            panic("xdrmem: a const buffer is for decoding\n");
        xdrmem_create(this, const_cast<char *>(base), (u_int)len, op);
    }
};

/* ---- Primitives --------------------------------------------------------------------- */

inline bool xdr_putint(XDR *xdrs, u_int32_t val)
{
    long l = (long)val;
    return XDR_PUTLONG(xdrs, &l);
}
inline bool xdr_getint(XDR *xdrs, u_int32_t &val)
{
    long l;
    if (!XDR_GETLONG(xdrs, &l))
        return false;
    val = (u_int32_t)l;
    return true;
}
inline bool xdr_puthyper(XDR *xdrs, u_int64_t val)
{
    return xdr_putint(xdrs, (u_int32_t)(val >> 32)) && xdr_putint(xdrs, (u_int32_t)val);
}
inline bool xdr_gethyper(XDR *xdrs, u_int64_t &val)
{
    u_int32_t hi, lo;
    if (!xdr_getint(xdrs, hi) || !xdr_getint(xdrs, lo))
        return false;
    val = (u_int64_t)hi << 32 | lo;
    return true;
}
extern const char __xdr_zero_bytes[4];
/* n bytes then zeros to a multiple of 4. */
inline bool xdr_putpadbytes(XDR *xdrs, const void *p, size_t n)
{
    if (n > 0xffffffffu)
        return false;
    if (n && !XDR_PUTBYTES(xdrs, static_cast<const char *>(p), (u_int)n))
        return false;
    size_t pad = (4 - (n & 3)) & 3;
    return !pad || XDR_PUTBYTES(xdrs, __xdr_zero_bytes, (u_int)pad);
}
inline bool xdr_getpadbytes(XDR *xdrs, void *p, size_t n)
{
    if (n > 0xffffffffu)
        return false;
    if (n && !XDR_GETBYTES(xdrs, static_cast<char *>(p), (u_int)n))
        return false;
    char pad[4];
    size_t np = (4 - (n & 3)) & 3;
    return !np || XDR_GETBYTES(xdrs, pad, (u_int)np);
}

/* ---- rpc_traverse on an XDR stream ------------------------------------------------- */

inline bool rpc_traverse(XDR *xdrs, u_int32_t &obj, const char * = NULL)
{
    switch (xdrs->x_op) {
    case XDR_ENCODE:
        return xdr_putint(xdrs, obj);
    case XDR_DECODE:
        return xdr_getint(xdrs, obj);
    default:
        return true;
    }
}
inline bool rpc_traverse(XDR *xdrs, u_int64_t &obj, const char * = NULL)
{
    switch (xdrs->x_op) {
    case XDR_ENCODE:
        return xdr_puthyper(xdrs, obj);
    case XDR_DECODE:
        return xdr_gethyper(xdrs, obj);
    default:
        return true;
    }
}

/* A length read from the stream: within the type's bound, and (when the
 * stream can tell) within what is left at elemsize bytes per element. */
bool xdr_check_len(XDR *xdrs, u_int32_t n, size_t max, size_t elemsize);

inline bool rpc_traverse_vec_len(XDR *xdrs, u_int32_t &n, size_t max)
{
    if (!rpc_traverse(xdrs, n))
        return false;
    if (xdrs->x_op == XDR_DECODE)
        return xdr_check_len(xdrs, n, max, 4);
    return n <= max;
}

template <size_t n> inline bool rpc_traverse(XDR *xdrs, rpc_opaque<n> &obj, const char * = NULL)
{
    switch (xdrs->x_op) {
    case XDR_ENCODE:
        return xdr_putpadbytes(xdrs, obj.base(), n);
    case XDR_DECODE:
        return xdr_getpadbytes(xdrs, obj.base(), n);
    default:
        return true;
    }
}

template <size_t max> inline bool rpc_traverse(XDR *xdrs, rpc_bytes<max> &obj, const char * = NULL)
{
    u_int32_t n;
    switch (xdrs->x_op) {
    case XDR_ENCODE:
        if (obj.size() > max)
            return false;
        return xdr_putint(xdrs, (u_int32_t)obj.size()) &&
               xdr_putpadbytes(xdrs, obj.base(), obj.size());
    case XDR_DECODE:
        if (!xdr_getint(xdrs, n) || !xdr_check_len(xdrs, n, max, 1))
            return false;
        obj.setsize(n);
        return xdr_getpadbytes(xdrs, obj.base(), n);
    default:
        return true;
    }
}

/* Strings: any bytes (a str may hold NULs). A null str encodes as "". */
bool xdr_str_decode(XDR *xdrs, str &obj, size_t max);
inline bool xdr_str_encode(XDR *xdrs, const str &obj, size_t max)
{
    if (obj.len() > max)
        return false;
    return xdr_putint(xdrs, (u_int32_t)obj.len()) && xdr_putpadbytes(xdrs, obj.cstr(), obj.len());
}
template <size_t max> inline bool rpc_traverse(XDR *xdrs, rpc_str<max> &obj, const char * = NULL)
{
    switch (xdrs->x_op) {
    case XDR_ENCODE:
        return xdr_str_encode(xdrs, obj, max);
    case XDR_DECODE:
        return xdr_str_decode(xdrs, obj, max);
    default:
        return true;
    }
}
inline bool rpc_traverse(XDR *xdrs, str &obj, const char * = NULL)
{
    switch (xdrs->x_op) {
    case XDR_ENCODE:
        return xdr_str_encode(xdrs, obj, RPC_INFINITY);
    case XDR_DECODE:
        return xdr_str_decode(xdrs, obj, RPC_INFINITY);
    default:
        return true;
    }
}

/* ---- Whole values ---------------------------------------------------------------------- */

/* Resets *objp to a new T (XDR_FREE: what the decode allocated is freed). */
template <class T> inline void rpc_destruct(T *objp)
{
    objp->~T();
    new (static_cast<void *>(objp)) T();
}

/* Not an XDR operation: xdr_delete's request to delete the object. */
#define MELY_XDR_DELETE ((enum xdr_op)3)

template <class T> inline bool_t rpc_xdr_apply(XDR *xdrs, T &obj)
{
    if (xdrs->x_op == MELY_XDR_DELETE) {
        delete &obj;
        return TRUE;
    }
    switch (xdrs->x_op) {
    case XDR_ENCODE:
    case XDR_DECODE:
        return rpc_traverse(xdrs, obj);
    case XDR_FREE:
        rpc_destruct(&obj);
        return TRUE;
    default:
        return FALSE;
    }
}

inline void xdr_free(xdrproc_t proc, void *objp)
{
    XDR x;
    memset(&x, 0, sizeof x);
    x.x_op = XDR_FREE;
    proc(&x, objp);
}
/* Frees what objp holds and objp itself, allocated by the T_alloc() that
 * goes with proc (mely-rpcc's xdr_T functions and the built-in ones delete
 * the object when asked with x_op MELY_XDR_DELETE). */
void xdr_delete(xdrproc_t proc, void *objp);

#define DECLXDR(type)                                                                         \
    bool_t xdr_##type(XDR *, void *);                                                         \
    void *type##_alloc();
DECLXDR(void)
DECLXDR(false)
DECLXDR(string)
DECLXDR(bool)
DECLXDR(int)
DECLXDR(int32_t)
DECLXDR(u_int32_t)
DECLXDR(int64_t)
DECLXDR(u_int64_t)
#undef DECLXDR
void print_void(const void *, const strbuf *, int, const char *, const char *);
void print_false(const void *, const strbuf *, int, const char *, const char *);
RPC_PRINT_TYPE_DECL(bool)
RPC_PRINT_TYPE_DECL(int32_t)
RPC_PRINT_TYPE_DECL(u_int32_t)
RPC_PRINT_TYPE_DECL(int64_t)
RPC_PRINT_TYPE_DECL(u_int64_t)
void print_string(const void *, const strbuf *, int, const char *, const char *);

/* One procedure's entry (mely-rpcc's tables); XDRTBL_EMPTY for numbers the
 * version does not define. */
#define XDRTBL_DECL(proc, arg, res)                                                           \
    {#proc,       &typeid(arg), arg##_alloc, xdr_##arg, print_##arg,                          \
     &typeid(res), res##_alloc, xdr_##res,  print_##res}
#define XDRTBL_EMPTY                                                                          \
    {                                                                                         \
        NULL, &typeid(void), void_alloc, xdr_false, print_false, &typeid(void), void_alloc,   \
            xdr_false, print_false                                                            \
    }

/* ---- Values to and from bytes ------------------------------------------------------------- */

template <class T> str xdr2str(const T &t, bool scrub = false)
{
    xdrsuio x(XDR_ENCODE, scrub);
    XDR *xp = &x;
    if (!rpc_traverse(xp, const_cast<T &>(t)))
        return str();
    return str(*x.uio());
}
template <class T> bool str2xdr(T &t, const str &s)
{
    xdrmem x(s.cstr(), s.len());
    XDR *xp = &x;
    return rpc_traverse(xp, t);
}
template <class T, size_t n> bool xdr2bytes(rpc_bytes<n> &out, const T &t, bool scrub = false)
{
    xdrsuio x(XDR_ENCODE, scrub);
    XDR *xp = &x;
    if (!rpc_traverse(xp, const_cast<T &>(t)) || x.uio()->resid() > n)
        return false;
    out.setsize(x.uio()->resid());
    x.uio()->copyout(out.base(), out.size());
    return true;
}
template <class T, size_t n> bool bytes2xdr(T &t, const rpc_bytes<n> &in)
{
    xdrmem x(in.base(), in.size());
    XDR *xp = &x;
    return rpc_traverse(xp, t);
}
template <class T> bool buf2xdr(T &t, const void *buf, size_t len)
{
    xdrmem x(static_cast<const char *>(buf), len);
    XDR *xp = &x;
    return rpc_traverse(xp, t);
}

class rpc_bundle_t {
public:
    rpc_bundle_t(u_int32_t p, const void *a, void *r) : m_proc(p), m_arg(a), m_res(r) {}
    u_int32_t proc() const { return m_proc; }
    const void *arg() const { return m_arg; }
    void *res() { return m_res; }
    const void *res() const { return m_res; }

private:
    u_int32_t m_proc;
    const void *m_arg;
    void *m_res;
};

#endif /* MELY_COMPAT_XDRMISC_H */
