/* SPDX-License-Identifier: MIT */
/*
 * arpc_pmap.cpp: aclntudp_create and aclnttcp_create finding demo_prog_1
 * through a stand-in portmapper (PMAPPROC_GETPORT of RFC 1833, served by
 * compat's own asrv on a UDP socket; mely_pmap_port points the lookups at
 * it, so no rpcbind is needed):
 *   by name over UDP and over TCP (a call through each client succeeds);
 *   a program not registered: RPC_PROGNOTREGISTERED; a port given: no
 *   lookup; a portmapper that never answers: RPC_PMAPFAILURE (after a
 *   100 ms x 2 schedule); a name that does not resolve: RPC_UNKNOWNHOST.
 *   Every result runs as an event of the calling color, never inside.
 */
#include "arpc.h"
#include "demo_prot.h"
#include "pmap_test.h"

#include <atomic>

#include "ctest.h"

static int bound(int type)
{
    int fd = inetsocket(type, 0, INADDR_LOOPBACK);
    CHECK(fd >= 0);
    return fd;
}

static std::atomic<int> g_getports{0};
static u_int16_t g_udp_port, g_tcp_port;

static void demo_dispatch(svccb *sbp)
{
    if (!sbp)
        return;
    if (sbp->proc() == DEMO_ADD) {
        demo_pair *p = sbp->getarg<demo_pair>();
        sbp->replyref(p->a + p->b);
    } else {
        sbp->reject(PROC_UNAVAIL);
    }
}

static void pmap_dispatch(svccb *sbp)
{
    if (!sbp)
        return;
    if (sbp->proc() != PMAP_TEST_GETPORT) {
        sbp->reply(NULL);
        return;
    }
    g_getports++;
    pmap_mapping *m = sbp->getarg<pmap_mapping>();
    u_int32_t port = 0;
    if (m->prog == DEMO_PROG && m->vers == DEMO_VERS)
        port = m->prot == IPPROTO_UDP ? g_udp_port : m->prot == IPPROTO_TCP ? g_tcp_port : 0;
    sbp->replyref(port);
}

static int g_listen;
static void on_accept()
{
    int fd = accept(g_listen, NULL, NULL);
    if (fd < 0)
        return;
    ptr<asrv> *keep = new ptr<asrv>(asrv::alloc(axprt_stream::alloc(fd), demo_prog_1));
    (*keep)->setcb(wrap(+[](ptr<asrv> *k, svccb *sbp) {
        if (!sbp) {
            delete k;
            return;
        }
        demo_dispatch(sbp);
    }, keep));
}

static const rpc_program other_prog_1 = {0x20000999, 1, NULL, 0, "other_prog_1"};
static ptr<aclnt> g_c;
static int32_t g_res;
static bool g_inside;

static void t6(ptr<aclnt> c, clnt_stat stat)
{
    CHECK(!g_inside && get_current_color() == 34);
    CHECK(!c && stat == RPC_UNKNOWNHOST);
    printf("pmap: UDP and TCP by name, not registered, port given, no portmapper, "
           "unknown host\n");
    exit(0);
}

static void t5(ptr<aclnt> c, clnt_stat stat)
{
    CHECK(!g_inside && get_current_color() == 34);
    CHECK(!c && stat == RPC_PMAPFAILURE);
    g_inside = true;
    aclntudp_create("", 0, demo_prog_1, wrap(t6));
    g_inside = false;
}

static void t4b(clnt_stat err)
{
    CHECK(err == RPC_SUCCESS && g_res == 5);
    CHECK(g_getports.load() == 3);
    g_c = nullptr;
    /* A portmapper that never answers. */
    int silent = bound(SOCK_DGRAM);
    mely_pmap_port(ct_port_of(silent));
    mely_aclnt_backoff(100, 2);
    g_inside = true;
    aclntudp_create("127.0.0.1", 0, demo_prog_1, wrap(t5));
    g_inside = false;
}

static void t4(ptr<aclnt> c, clnt_stat stat)
{
    CHECK(!g_inside && get_current_color() == 34);
    CHECK(c && stat == RPC_SUCCESS);
    CHECK(g_getports.load() == 3); /* the port was given: no lookup */
    g_c = c;
    demo_pair p;
    p.a = 2;
    p.b = 3;
    g_c->call(DEMO_ADD, &p, &g_res, wrap(t4b));
}

static void t3(ptr<aclnt> c, clnt_stat stat)
{
    CHECK(!g_inside && get_current_color() == 34);
    CHECK(!c && stat == RPC_PROGNOTREGISTERED);
    CHECK(g_getports.load() == 3);
    g_inside = true;
    aclntudp_create("127.0.0.1", g_udp_port, demo_prog_1, wrap(t4));
    g_inside = false;
}

static void t2b(clnt_stat err)
{
    CHECK(err == RPC_SUCCESS && g_res == 42);
    g_c = nullptr;
    in_addr lo;
    lo.s_addr = htonl(INADDR_LOOPBACK);
    g_inside = true;
    aclntudp_create(lo, 0, other_prog_1, wrap(t3));
    g_inside = false;
}

static void t2(ptr<aclnt> c, clnt_stat stat)
{
    CHECK(!g_inside && get_current_color() == 34);
    CHECK(c && stat == RPC_SUCCESS && c->xprt()->reliable);
    CHECK(g_getports.load() == 2);
    g_c = c;
    demo_pair p;
    p.a = 40;
    p.b = 2;
    g_c->call(DEMO_ADD, &p, &g_res, wrap(t2b));
}

static void t1b(clnt_stat err)
{
    CHECK(err == RPC_SUCCESS && g_res == 42);
    g_c = nullptr;
    g_inside = true;
    aclnttcp_create("127.0.0.1", 0, demo_prog_1, wrap(t2));
    g_inside = false;
}

static void t1(ptr<aclnt> c, clnt_stat stat)
{
    CHECK(!g_inside && get_current_color() == 34);
    CHECK(c && stat == RPC_SUCCESS && !c->xprt()->reliable);
    CHECK(g_getports.load() == 1);
    CHECK(c->xprt() == udpxprt());
    g_c = c;
    demo_pair p;
    p.a = 40;
    p.b = 2;
    g_c->call(DEMO_ADD, &p, &g_res, wrap(t1b));
}

static void start()
{
    g_inside = true;
    aclntudp_create("127.0.0.1", 0, demo_prog_1, wrap(t1));
    g_inside = false;
}

int main()
{
    ct_watchdog(30);
    /* demo_prog_1 over UDP and over TCP. */
    int u = bound(SOCK_DGRAM);
    g_udp_port = ct_port_of(u);
    ptr<asrv> us = asrv::alloc(axprt_dgram::alloc(u, sizeof(sockaddr_in)), demo_prog_1,
                               wrap(demo_dispatch));
    g_listen = bound(SOCK_STREAM);
    g_tcp_port = ct_port_of(g_listen);
    CHECK(listen(g_listen, 8) == 0);
    make_async(g_listen);
    fdcb(g_listen, selread, cwrap(on_accept, 32));
    /* The stand-in portmapper. */
    int pm = bound(SOCK_DGRAM);
    ref<axprt_dgram> px = axprt_dgram::alloc(pm, sizeof(sockaddr_in));
    px->setcolor(33);
    ptr<asrv> ps = asrv::alloc(px, pmap_test_prog_2, wrap(pmap_dispatch));
    mely_pmap_port(ct_port_of(pm));
    cpucb(cwrap(start, 34));
    amain();
}
