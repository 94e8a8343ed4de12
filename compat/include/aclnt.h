/* SPDX-License-Identifier: MIT */
/*
 * aclnt.h (mely-compat): libasync's RPC client.
 *
 *   ptr<aclnt> c = aclnt::alloc(x, prog_1)     a client of one program version
 *                                              over transport x (NULL if x is dead)
 *   c->call(proc, &arg, &res, cb)              cb(clnt_stat) once: RPC_SUCCESS
 *                                              with res decoded, or the error
 *   c->timedcall(sec, proc, &arg, &res, cb)    ... RPC_TIMEDOUT after sec seconds
 *   c->timedcall(sec, nsec, proc, ...)
 *   call(proc, in, out, cb, auth, inproc, outproc, progno, versno): the
 *   arguments' and results' xdr functions default to the table's; progno and
 *   versno to the client's. in may be NULL for void arguments, out NULL
 *   for void results.
 *   callbase *cb = c->call(...); cb->cancel()  the callback never runs
 *                                              (from the transport's color)
 *   c->seteofcb(cb)                            cb() when the transport ends
 *
 * Errors: the server's answers map to RPC_PROGUNAVAIL, RPC_PROGVERSMISMATCH,
 * RPC_PROCUNAVAIL, RPC_CANTDECODEARGS (GARBAGE_ARGS), RPC_SYSTEMERROR,
 * RPC_VERSMISMATCH, RPC_AUTHERROR; results that do not decode give
 * RPC_CANTDECODERES; arguments that do not encode RPC_CANTENCODEARGS; a
 * call on a dead transport or larger than its records RPC_CANTSEND; calls
 * pending when the transport ends RPC_CANTRECV.
 *
 * Colors: cb runs as an event of the transport's color (axprt.h), whatever
 * its own color, as libasync ran it from the transport's input. call() may
 * be made from any color; a reply is matched to its call by xid. A result
 * buffer must stay valid until cb ran (or the call was cancelled).
 * Missing: scall (a blocking call), rawcall, aclnt_resumable, the
 * portmapper helpers (acallrpc), authunix credentials other than given
 * raw in an AUTH.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_ACLNT_H
#define MELY_COMPAT_ACLNT_H

#include "axprt.h"
#include "xdrmisc.h"

class aclnt;
struct timecb_t;

typedef callback<void, clnt_stat>::ref aclnt_cb;
typedef callback<void, ptr<aclnt>, clnt_stat>::ref aclntalloc_cb;

class callbase {
    friend class aclnt;
    friend class xhinfo;

public:
    /* Forgets the call: its callback never runs. From the transport's
     * color, before the callback ran. */
    void cancel();
    u_int32_t xid() const { return xid_; }

    /* The library's (arpc.cpp). */
    callbase() {}
    ~callbase() {}
    ptr<aclnt> c_;
    u_int32_t xid_ = 0;
    aclnt_cb::ptr cb_;
    void *out_ = nullptr;
    xdrproc_t outproc_ = nullptr;
    timecb_t *tmo_ = nullptr;
};

class aclnt : public virtual refcount {
    friend class xhinfo;
    friend class callbase;

public:
    const rpc_program &rp;

    aclnt(const ref<axprt> &x, const rpc_program &p);
    ~aclnt();
    aclnt(const aclnt &) = delete;
    aclnt &operator=(const aclnt &) = delete;

    static ptr<aclnt> alloc(ref<axprt> x, const rpc_program &p);

    const ref<axprt> &xprt() const { return x_; }

    callbase *call(u_int32_t procno, const void *in, void *out, aclnt_cb cb, AUTH *auth = NULL,
                   xdrproc_t inproc = NULL, xdrproc_t outproc = NULL, u_int32_t progno = 0,
                   u_int32_t versno = 0, sockaddr *dest = NULL);
    callbase *timedcall(time_t sec, long nsec, u_int32_t procno, const void *in, void *out,
                        aclnt_cb cb, AUTH *auth = NULL, xdrproc_t inproc = NULL,
                        xdrproc_t outproc = NULL, u_int32_t progno = 0, u_int32_t versno = 0,
                        sockaddr *dest = NULL);
    callbase *timedcall(time_t sec, u_int32_t procno, const void *in, void *out, aclnt_cb cb,
                        AUTH *auth = NULL, xdrproc_t inproc = NULL, xdrproc_t outproc = NULL,
                        u_int32_t progno = 0, u_int32_t versno = 0, sockaddr *dest = NULL)
    {
        return timedcall(sec, 0, procno, in, out, cb, auth, inproc, outproc, progno, versno,
                         dest);
    }
    void seteofcb(callback<void>::ptr cb);
    /* Calls sent and not answered yet. */
    bool calls_outstanding();

private:
    ref<axprt> x_;
    callback<void>::ptr eofcb_;
    bool attached_ = false;
};

#endif /* MELY_COMPAT_ACLNT_H */
