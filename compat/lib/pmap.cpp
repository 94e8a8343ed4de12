/* SPDX-License-Identifier: MIT */
/*
 * pmap.cpp: finding an RPC server through the portmapper (RFC 1833, version
 * 2: PMAPPROC_GETPORT), as libasync's aclntudp_create and aclnttcp_create
 * do, over the process's shared UDP transport (udpxprt, udpclnt).
 * Written for mely; no line comes from libasync.
 */
#include <atomic>
#include <cstring>
#include <mutex>

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "arpc.h"

namespace {

enum : u_int32_t { PMAP_PROGNO = 100000, PMAP_VERSNO = 2, PMAPPROC_GETPORT_NO = 3 };

std::atomic<u_int16_t> g_pmap_port{111};

const rpc_program noprog = {0, 0, nullptr, 0, "noprog"};

/* Made once and kept to the end (never destroyed: an exit-time destructor
 * would post the transport's destruction to a runtime going away). */
std::mutex g_udp_mu;
ptr<axprt_dgram> *g_udpxprt;
ptr<aclnt> *g_udpclnt;

void udp_init()
{
    std::lock_guard<std::mutex> g(g_udp_mu);
    if (g_udpclnt)
        return;
    int fd = inetsocket(SOCK_DGRAM);
    if (fd < 0)
        fatal("udpxprt: inetsocket: %m\n");
    g_udpxprt = new ptr<axprt_dgram>(axprt_dgram::alloc(fd, sizeof(sockaddr_in)));
    g_udpclnt = new ptr<aclnt>(aclnt::alloc(*g_udpxprt, noprog));
    if (!*g_udpclnt)
        fatal("udpclnt: aclnt::alloc failed\n");
}

/* A PMAPPROC_GETPORT argument (RFC 1833's mapping) and result. */
struct mapping4 {
    u_int32_t prog, vers, prot, port;
};

int xdr_mapping4(XDR *x, void *p)
{
    mapping4 *m = static_cast<mapping4 *>(p);
    if (x->x_op != XDR_ENCODE)
        return x->x_op == XDR_FREE;
    return xdr_putint(x, m->prog) && xdr_putint(x, m->vers) && xdr_putint(x, m->prot) &&
           xdr_putint(x, m->port);
}

int xdr_port(XDR *x, void *p)
{
    if (x->x_op != XDR_DECODE)
        return x->x_op == XDR_FREE;
    return xdr_getint(x, *static_cast<u_int32_t *>(p));
}

typedef callback<void, sockaddr_in, clnt_stat>::ref addr_cb;

/* One lookup: host's address, then the program's port. */
struct lookup {
    u_int32_t prog, vers, prot;
    sockaddr_in sin;
    mapping4 arg;
    u_int32_t port = 0;
    addr_cb cb;
    lookup(u_int32_t p, u_int32_t v, u_int32_t pr, addr_cb c) : prog(p), vers(v), prot(pr), cb(c)
    {
        memset(&sin, 0, sizeof sin);
        sin.sin_family = AF_INET;
    }
};

void lookup_done(lookup *l, clnt_stat stat)
{
    addr_cb cb = l->cb;
    sockaddr_in sin = l->sin;
    delete l;
    (*cb)(sin, stat);
}

void got_port(lookup *l, clnt_stat stat)
{
    if (stat) {
        lookup_done(l, RPC_PMAPFAILURE);
        return;
    }
    if (!l->port || l->port > 0xffff) {
        lookup_done(l, RPC_PROGNOTREGISTERED);
        return;
    }
    l->sin.sin_port = htons((u_int16_t)l->port);
    lookup_done(l, RPC_SUCCESS);
}

/* The address is known: the port given, or asked of the portmapper. */
void get_port(lookup *l, int port)
{
    if (port) {
        l->sin.sin_port = htons((u_int16_t)port);
        lookup_done(l, RPC_SUCCESS);
        return;
    }
    sockaddr_in pm = l->sin;
    pm.sin_port = htons(g_pmap_port.load(std::memory_order_relaxed));
    l->arg = mapping4{l->prog, l->vers, l->prot, 0};
    udpclnt()->call(PMAPPROC_GETPORT_NO, &l->arg, &l->port, wrap(got_port, l), NULL,
                    xdr_mapping4, xdr_port, PMAP_PROGNO, PMAP_VERSNO,
                    reinterpret_cast<sockaddr *>(&pm));
}

void start_lookup(lookup *l, const char *host, int port)
{
    addrinfo hints, *res = nullptr;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    if (!host || getaddrinfo(host, nullptr, &hints, &res) != 0 || !res) {
        lookup_done(l, RPC_UNKNOWNHOST);
        return;
    }
    l->sin.sin_addr = reinterpret_cast<sockaddr_in *>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    get_port(l, port);
}

/* ---- UDP ---- */

void udp_have_addr(const rpc_program *rp, aclntalloc_cb cb, sockaddr_in sin, clnt_stat stat)
{
    if (stat) {
        (*cb)(nullptr, stat);
        return;
    }
    (*cb)(aclnt::alloc(udpxprt(), *rp, reinterpret_cast<sockaddr *>(&sin)), RPC_SUCCESS);
}

void udp_start_host(str host, int port, const rpc_program *rp, aclntalloc_cb cb)
{
    start_lookup(new lookup(rp->progno, rp->versno, IPPROTO_UDP, wrap(udp_have_addr, rp, cb)),
                 host.cstr(), port);
}

void udp_start_addr(in_addr a, int port, const rpc_program *rp, aclntalloc_cb cb)
{
    lookup *l = new lookup(rp->progno, rp->versno, IPPROTO_UDP, wrap(udp_have_addr, rp, cb));
    l->sin.sin_addr = a;
    get_port(l, port);
}

/* ---- TCP ---- */

void tcp_connected(const rpc_program *rp, aclntalloc_cb cb, axprtalloc_fn xa, int fd)
{
    if (fd < 0) {
        (*cb)(nullptr, RPC_FAILED);
        return;
    }
    ptr<axprt_stream> x = (*xa)(fd);
    if (!x) {
        (*cb)(nullptr, RPC_FAILED);
        return;
    }
    (*cb)(aclnt::alloc(x, *rp), RPC_SUCCESS);
}

void tcp_have_addr(const rpc_program *rp, aclntalloc_cb cb, axprtalloc_fn xa, sockaddr_in sin,
                   clnt_stat stat)
{
    if (stat) {
        (*cb)(nullptr, stat);
        return;
    }
    tcpconnect(sin.sin_addr, ntohs(sin.sin_port),
               cwrap(tcp_connected, rp, cb, xa, get_current_color()));
}

void tcp_start_host(str host, int port, const rpc_program *rp, aclntalloc_cb cb,
                    axprtalloc_fn xa)
{
    start_lookup(new lookup(rp->progno, rp->versno, IPPROTO_TCP, wrap(tcp_have_addr, rp, cb, xa)),
                 host.cstr(), port);
}

void tcp_start_addr(in_addr a, int port, const rpc_program *rp, aclntalloc_cb cb,
                    axprtalloc_fn xa)
{
    lookup *l = new lookup(rp->progno, rp->versno, IPPROTO_TCP, wrap(tcp_have_addr, rp, cb, xa));
    l->sin.sin_addr = a;
    get_port(l, port);
}

ptr<axprt_stream> stream_alloc(int fd)
{
    return axprt_stream::alloc(fd);
}

} // namespace

const axprtalloc_fn axprt_stream_alloc_default = wrap(stream_alloc);

void mely_pmap_port(u_int16_t port)
{
    g_pmap_port.store(port ? port : 111, std::memory_order_relaxed);
}

ptr<axprt_dgram> udpxprt()
{
    udp_init();
    return *g_udpxprt;
}

ptr<aclnt> udpclnt()
{
    udp_init();
    return *g_udpclnt;
}

/* Each starts as an event of the calling color, so cb never runs inside. */
void aclntudp_create(const char *host, int port, const rpc_program &rp, aclntalloc_cb cb)
{
    cpucb(cwrap(udp_start_host, str(host ? host : ""), port, &rp, cb, get_current_color()));
}

void aclntudp_create(const in_addr &addr, int port, const rpc_program &rp, aclntalloc_cb cb)
{
    cpucb(cwrap(udp_start_addr, addr, port, &rp, cb, get_current_color()));
}

void aclnttcp_create(const char *host, int port, const rpc_program &rp, aclntalloc_cb cb,
                     axprtalloc_fn xa)
{
    cpucb(cwrap(tcp_start_host, str(host ? host : ""), port, &rp, cb, xa, get_current_color()));
}

void aclnttcp_create(const in_addr &addr, int port, const rpc_program &rp, aclntalloc_cb cb,
                     axprtalloc_fn xa)
{
    cpucb(cwrap(tcp_start_addr, addr, port, &rp, cb, xa, get_current_color()));
}
