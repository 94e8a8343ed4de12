/* SPDX-License-Identifier: MIT */
/*
 * asrv.h (mely-compat): libasync's RPC server.
 *
 *   ptr<asrv> s = asrv::alloc(x, prog_1, wrap(dispatch))
 *       serves one program version over transport x; dispatch(sbp) runs for
 *       each call of a procedure the version defines, with its argument
 *       decoded; dispatch(NULL) once when the transport ends.
 *   s->setcb(cb), s->setcb(NULL)   change or stop dispatching (calls that
 *       come while there is no callback are dropped, unanswered)
 *
 *   svccb (one call; freed by its answer):
 *   sbp->proc(), xid(), prog(), vers(), getsrv() (the asrv: it lives while
 *   the svccb does, as in libasync), getxprt(), getsa() (the sender's
 *   address on an unconnected axprt_dgram, where the answer goes; NULL
 *   on streams and connected datagram sockets),
 *   getcred(), getverf(), getaup() (an AUTH_UNIX credential, parsed)
 *   sbp->getarg<T>(), getvoidarg()   the decoded argument
 *   sbp->getres<T>(), getvoidres()   a result object of the table's type,
 *                                    freed with the svccb
 *   sbp->reply(&res), replyref(res)  SUCCESS and the result (NULL for void)
 *   sbp->reply(&res, xdrproc)        ... encoded with another xdr function
 *   sbp->reject(PROC_UNAVAIL ...), reject(AUTH_TOOWEAK ...)   an error
 *   sbp->ignore()                    no answer
 *
 * The server answers by itself, as RFC 5531 says: a call of RPC version
 * other than 2 with RPC_MISMATCH (2, 2); a program no asrv of the transport
 * serves with PROG_UNAVAIL; a version it does not serve with PROG_MISMATCH
 * (lowest, highest served); a procedure the version does not define with
 * PROC_UNAVAIL; an argument that does not decode with GARBAGE_ARGS; a reply
 * that does not encode, or is over the transport's record size, with
 * SYSTEM_ERR. A record that is not an RPC call at all (too short) is
 * dropped; a reply record on a transport with no aclnt too.
 *
 * Datagrams (axprt_dgram): the answer goes to the address the call came
 * from. As libasync's asrv_unreliable, each asrv keeps its last 16 answers:
 * a call that comes again (same xid, sender, program, version and
 * procedure: a client's retransmission) while its first copy is being
 * served is dropped, and after it was answered gets the same answer again,
 * without dispatch; reply(..., nocache = true) keeps an answer out of it,
 * and an ignored call leaves it (the next copy is dispatched).
 *
 * Colors: dispatch runs as an event of the transport's color (axprt.h): a
 * server that allocates each connection's transport on its own color serves
 * connections in parallel. reply/reject/ignore may be called from any color,
 * at any time after dispatch: the answer is written under the transport's
 * lock, and dropped (the svccb still freed) if the transport ended.
 * An svccb holds a count on its asrv (getsrv()) from dispatch to its
 * answer: dropping the last other ptr<asrv> meanwhile is safe from any
 * color; the asrv goes, and stops dispatching, once its calls are answered.
 * Missing: asrv_replay / asrv_unreliable as classes of their own (the
 * datagram reply cache above is built in), asrv_resumable,
 * asrv_delayed_eof, getaui (AUTH_UINT), fromresvport.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_ASRV_H
#define MELY_COMPAT_ASRV_H

#include <sys/socket.h>

#include "axprt.h"
#include "xdrmisc.h"

class asrv;

class svccb {
    friend class asrv;
    friend class xhinfo;

public:
    svccb(const svccb &) = delete;
    svccb &operator=(const svccb &) = delete;

    u_int32_t xid() const { return xid_; }
    u_int32_t prog() const { return prog_; }
    u_int32_t vers() const { return vers_; }
    u_int32_t proc() const { return proc_; }
    /* The asrv that took the call (never NULL in dispatch); the svccb
     * holds a count on it until it is answered. */
    const ptr<asrv> &getsrv() const { return srv_; }
    /* The transport the call came on (getsrv()->xprt()). */
    const ptr<axprt> &getxprt() const { return srv_x_; }

    void *getvoidarg() { return arg_; }
    const void *getvoidarg() const { return arg_; }
    template <class T> T *getarg() { return static_cast<T *>(arg_); }
    template <class T> const T *getarg() const { return static_cast<const T *>(arg_); }
    void *getvoidres();
    template <class T> T *getres() { return static_cast<T *>(getvoidres()); }

    const opaque_auth *getcred() const { return &cred_; }
    /* The call's AUTH_UNIX credential, parsed; NULL if the credential is
     * of another flavor or does not parse (the call is dispatched all the
     * same: the server decides). Valid while the svccb is. */
    const authunix_parms *getaup() const { return has_aup_ ? &aup_ : NULL; }
    const opaque_auth *getverf() const { return &verf_; }
    const sockaddr *getsa() const
    {
        return has_sa_ ? reinterpret_cast<const sockaddr *>(&sa_) : NULL;
    }

    void reply(const void *res, xdrproc_t xdr = NULL, bool nocache = false);
    template <class T> void replyref(const T &res, bool nocache = false)
    {
        reply(&res, NULL, nocache);
    }
    void replyref(const int &res, bool nocache = false)
    {
        int32_t v = res;
        reply(&v, NULL, nocache);
    }
    void reject(accept_stat stat);
    void reject(auth_stat stat);
    void ignore();

private:
    svccb() {}
    ~svccb();
    ptr<asrv> srv_;
    ptr<axprt> srv_x_;
    u_int32_t xid_ = 0, prog_ = 0, vers_ = 0, proc_ = 0;
    const rpcgen_table *tbl_ = nullptr;
    void *arg_ = nullptr;
    void *res_ = nullptr;
    opaque_auth cred_ = {0, nullptr, 0}, verf_ = {0, nullptr, 0};
    char authbuf_[2 * MAX_AUTH_BYTES];
    sockaddr_storage sa_;
    bool has_sa_ = false;
    authunix_parms aup_;
    bool has_aup_ = false;
    char aupname_[MAX_MACHINE_NAME + 1];
    gid_t aupgids_[NGRPS];
    bool cached_ = false; /* in the datagram reply cache, pending */
    bool answer(xdrsuio &out, bool nocache);
};

class asrv : public virtual refcount {
    friend class svccb;
    friend class xhinfo;

public:
    typedef callback<void, svccb *>::ref asrv_cb;
    const rpc_program &rp;

    asrv(const ref<axprt> &x, const rpc_program &p, asrv_cb::ptr cb);
    ~asrv();
    asrv(const asrv &) = delete;
    asrv &operator=(const asrv &) = delete;

    static ptr<asrv> alloc(ref<axprt> x, const rpc_program &p, asrv_cb::ptr cb = NULL);

    const ref<axprt> &xprt() const { return x_; }
    void setcb(asrv_cb::ptr cb);
    bool hascb();

private:
    ref<axprt> x_;
    asrv_cb::ptr cb_; /* under the dispatcher's lock */
    bool attached_ = false;
};

ptr<asrv> asrv_alloc(ref<axprt> x, const rpc_program &p, asrv::asrv_cb::ptr cb = NULL);

#endif /* MELY_COMPAT_ASRV_H */
