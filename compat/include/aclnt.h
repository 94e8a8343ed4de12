/* SPDX-License-Identifier: MIT */
/*
 * aclnt.h (mely-compat): libasync's RPC client.
 *
 *   ptr<aclnt> c = aclnt::alloc(x, prog_1, d = NULL)
 *                                              a client of one program version
 *                                              over transport x (NULL if x is
 *                                              dead); d: where calls go on an
 *                                              unconnected axprt_dgram (a call's
 *                                              own dest, the last argument of
 *                                              call, overrides it)
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
 * Datagrams (x->reliable false, axprt_dgram): a call is sent again while
 * no reply came, as libasync's aclnt does (its tmoq<..., 2, 5>): sends at
 * 0, 2, 6, 14 and 30 s, then RPC_TIMEDOUT at 62 s (timedcall's own timeout
 * ends it earlier). A reply is matched by xid and, on an unconnected
 * transport, by the address it came from (the call's destination: a reply
 * from elsewhere is a stray, dropped); the first reply ends the call, a
 * duplicate (the answer to a retransmission) is dropped.
 * mely_aclnt_backoff(minto_ms, maxsend) (new) changes the schedule for
 * calls made after it: first wait minto_ms, doubled after each send,
 * maxsend sends in all (libasync: 2000, 5); (0, 0) restores it.
 *
 * Colors: cb runs as an event of the transport's color (axprt.h), whatever
 * its own color, as libasync ran it from the transport's input. call() may
 * be made from any color; a reply is matched to its call by xid. A result
 * buffer must stay valid until cb ran (or the call was cancelled).
 * Retransmissions and the final RPC_TIMEDOUT run on it too.
 * Missing: scall (a blocking call), rawcall, aclnt_resumable, acallrpc,
 * pmap_map (registering with the portmapper). AUTH_UNIX credentials:
 * authunix_create (xdrmisc.h).
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_ACLNT_H
#define MELY_COMPAT_ACLNT_H

#include <sys/socket.h>

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
    ~callbase();
    ptr<aclnt> c_;
    u_int32_t xid_ = 0;
    aclnt_cb::ptr cb_;
    void *out_ = nullptr;
    xdrproc_t outproc_ = nullptr;
    timecb_t *tmo_ = nullptr;
    /* Datagram transports: the message (sent again), where it went (an
     * unconnected transport; also what a reply must come from), the sends
     * so far and the next one's timer. */
    char *msg_ = nullptr;
    size_t msglen_ = 0;
    sockaddr_storage dest_;
    bool has_dest_ = false;
    u_int nsent_ = 0;
    u_int minto_ms_ = 0, maxsend_ = 0;
    timecb_t *rtmo_ = nullptr;
};

/* The datagram retransmission schedule (see above; new). */
void mely_aclnt_backoff(u_int minto_ms, u_int maxsend);

/* ---- Finding a server through the portmapper (libasync's acallrpc.C) ----
 *   aclntudp_create(host, port, prog_1, cb)   cb(c, RPC_SUCCESS) with an
 *       aclnt of prog_1 over the process's shared UDP transport (udpxprt()),
 *       calls going to host:port; port 0: asked of host's portmapper first
 *       (PMAPPROC_GETPORT, protocol UDP, over udpclnt()).
 *   aclnttcp_create(host, port, prog_1, cb, xa = axprt_stream_alloc_default)
 *       the same over a new TCP connection (xa(fd) makes its transport).
 *   Both also take an in_addr. Errors: cb(NULL, RPC_UNKNOWNHOST) (the
 *   name does not resolve), RPC_PMAPFAILURE (the portmapper did not
 *   answer: after the datagram schedule above, or answered an error),
 *   RPC_PROGNOTREGISTERED (it answered port 0), RPC_FAILED (no socket, or
 *   the connection failed).
 *   udpxprt(), udpclnt(): the shared unconnected UDP transport (made on
 *   first use, with the color then current: its calls' callbacks run
 *   there) and an aclnt over it for calls that name their program
 *   (progno, versno) and destination.
 *   mely_pmap_port(port) (new): the portmapper's UDP port (111; 0 puts it
 *   back), for tests.
 * Differences: names are resolved with getaddrinfo (blocking the calling
 * color: libasync had its own asynchronous resolver), IPv4 only as in
 * libasync; cb always runs as an event of the calling color, never inside
 * the call; the TCP socket is not bound to a reserved port when root. */
typedef callback<ptr<axprt_stream>, int>::ref axprtalloc_fn;
extern const axprtalloc_fn axprt_stream_alloc_default;
struct in_addr;
void aclntudp_create(const char *host, int port, const rpc_program &rp, aclntalloc_cb cb);
void aclntudp_create(const in_addr &addr, int port, const rpc_program &rp, aclntalloc_cb cb);
void aclnttcp_create(const char *host, int port, const rpc_program &rp, aclntalloc_cb cb,
                     axprtalloc_fn xa = axprt_stream_alloc_default);
void aclnttcp_create(const in_addr &addr, int port, const rpc_program &rp, aclntalloc_cb cb,
                     axprtalloc_fn xa = axprt_stream_alloc_default);
ptr<axprt_dgram> udpxprt();
ptr<aclnt> udpclnt();
void mely_pmap_port(u_int16_t port);

class aclnt : public virtual refcount {
    friend class xhinfo;
    friend class callbase;

public:
    const rpc_program &rp;

    aclnt(const ref<axprt> &x, const rpc_program &p);
    ~aclnt();
    aclnt(const aclnt &) = delete;
    aclnt &operator=(const aclnt &) = delete;

    static ptr<aclnt> alloc(ref<axprt> x, const rpc_program &p, const sockaddr *d = NULL);

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
    sockaddr_storage dest_;
    bool has_dest_ = false;
};

#endif /* MELY_COMPAT_ACLNT_H */
