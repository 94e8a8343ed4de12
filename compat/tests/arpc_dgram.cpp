/* SPDX-License-Identifier: MIT */
/*
 * arpc_dgram.cpp: arpc over UDP (axprt_dgram), against raw peers on
 * loopback that send and check datagrams byte by byte, and compat against
 * itself.
 *   server (asrv on an unconnected socket, color 7, 1024-byte messages):
 *   the answer goes to the sender; a call sent again after its answer gets
 *   the same bytes without a second dispatch; the same xid from another
 *   sender is a new call; bad datagrams (3 bytes, a message type 7, a cut
 *   call header, 2000 bytes) are dropped and counted (bad_msgs() 4) while a
 *   good call is answered; an unknown program gets PROG_UNAVAIL; a copy of a
 *   call still being served is dropped (one answer, sent from color 4242);
 *   an ignored call leaves the cache (its copy is dispatched again).
 *   client (aclnt on a connected socket, color 3, schedule 200 ms x 3): the
 *   first send goes unanswered, the retransmission is the same bytes; a
 *   stray reply (another xid), a garbage datagram and a duplicate of the
 *   answer are ignored, the callback runs once with the result; a call
 *   never answered is sent 3 times, then RPC_TIMEDOUT; timedcall(0.3 s)
 *   RPC_TIMEDOUT; on an unconnected socket the reply must come from the
 *   call's destination (a reply with the right xid from another port is
 *   dropped), and a call's own dest overrides aclnt::alloc's.
 *   compat to compat, libasync's default schedule: the server ignores the
 *   first datagram, the client's retransmission (2 s later) is answered;
 *   the call is made from color 10, its callback runs on the transport's, 11.
 */
#include "arpc.h"
#include "demo_prot.h"

#include <atomic>
#include <string>
#include <thread>

#include <poll.h>

#include "ctest.h"
#include "rawrpc.h"

/* ---- raw UDP ------------------------------------------------------------------------------ */

static int udp_bound()
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(fd >= 0);
    sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(fd, (sockaddr *)&sin, sizeof sin) == 0);
    return fd;
}

static sockaddr_in addr_of(int fd)
{
    sockaddr_in sin;
    socklen_t len = sizeof sin;
    CHECK(getsockname(fd, (sockaddr *)&sin, &len) == 0);
    return sin;
}

static void send_to(int fd, const std::string &m, const sockaddr_in &to)
{
    CHECK(sendto(fd, m.data(), m.size(), 0, (const sockaddr *)&to, sizeof to) ==
          (ssize_t)m.size());
}

/* The next datagram (10 s at most); *from its sender. "" on timeout when
 * may_time_out, else a failure. */
static std::string recv_dgram(int fd, sockaddr_in *from = nullptr, int ms = 10000,
                              bool may_time_out = false)
{
    pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, ms);
    if (r == 0 && may_time_out)
        return "";
    CHECK(r == 1);
    char buf[4096];
    sockaddr_in sin;
    socklen_t len = sizeof sin;
    ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (sockaddr *)&sin, &len);
    CHECK(n >= 0);
    if (from)
        *from = sin;
    return std::string(buf, (size_t)n);
}

static bool same(const sockaddr_in &a, const sockaddr_in &b)
{
    return a.sin_port == b.sin_port && a.sin_addr.s_addr == b.sin_addr.s_addr;
}

static std::string add_call(u_int32_t xid, u_int32_t a, u_int32_t b)
{
    std::string m = rr_call(xid, DEMO_PROG, DEMO_VERS, DEMO_ADD);
    rr_put32(m, a);
    rr_put32(m, b);
    return m;
}

/* ---- server: asrv over an unconnected socket ------------------------------------------------ */

static std::atomic<int> g_adds{0}, g_laters{0}, g_silents{0};
static svccb *g_held;

static void later(svccb *sbp)
{
    CHECK(get_current_color() == 4242);
    sbp->replyref(*sbp->getarg<int32_t>() + 1);
}

static void srv_dispatch(svccb *sbp)
{
    CHECK(sbp);
    CHECK(get_current_color() == 7);
    CHECK(sbp->getsa() && sbp->getsa()->sa_family == AF_INET);
    switch (sbp->proc()) {
    case DEMO_NULL:
        sbp->reply(NULL);
        break;
    case DEMO_ADD: {
        g_adds++;
        demo_pair *p = sbp->getarg<demo_pair>();
        sbp->replyref(p->a + p->b);
        break;
    }
    case DEMO_LATER:
        g_laters++;
        g_held = sbp;
        break;
    case DEMO_STATS: {
        /* The held call is answered now, from another color. */
        CHECK(g_held);
        cpucb(cwrap(later, g_held, 4242));
        g_held = nullptr;
        demo_stats *st = sbp->getres<demo_stats>();
        st->calls = 1;
        st->color = 7;
        sbp->reply(st);
        break;
    }
    case DEMO_SILENT:
        g_silents++;
        sbp->ignore();
        break;
    default:
        sbp->reject(PROC_UNAVAIL);
    }
}

static void server_peer(sockaddr_in srv, ref<axprt_dgram> sx)
{
    int p1 = udp_bound(), p2 = udp_bound();
    sockaddr_in from;
    /* A call: the answer comes to this socket, from the server's. */
    std::string call1 = add_call(1, 40, 2);
    send_to(p1, call1, srv);
    std::string r1 = recv_dgram(p1, &from);
    CHECK(same(from, srv));
    size_t off = rr_check_accepted(r1, 1, SUCCESS);
    CHECK(rr_get32(r1, off) == 42 && r1.size() == off + 4);
    /* Sent again: the same answer, from the cache. */
    send_to(p1, call1, srv);
    CHECK(recv_dgram(p1) == r1);
    CHECK(g_adds.load() == 1);
    /* The same xid from another sender: a call of its own. */
    send_to(p2, add_call(1, 1, 1), srv);
    std::string r2 = recv_dgram(p2, &from);
    off = rr_check_accepted(r2, 1, SUCCESS);
    CHECK(rr_get32(r2, off) == 2);
    CHECK(g_adds.load() == 2);
    /* Bad datagrams, then a good call. */
    send_to(p1, "abc", srv);
    std::string bad;
    rr_put32(bad, 77);
    rr_put32(bad, 7);
    send_to(p1, bad, srv);
    send_to(p1, rr_call(78, DEMO_PROG, DEMO_VERS, DEMO_NULL).substr(0, 30), srv);
    send_to(p1, std::string(2000, 'z'), srv);
    send_to(p1, rr_call(2, DEMO_PROG, DEMO_VERS, DEMO_NULL), srv);
    std::string r = recv_dgram(p1);
    rr_check_accepted(r, 2, SUCCESS);
    CHECK(r.size() == 24);
    CHECK(sx->bad_msgs() == 4);
    /* An unknown program. */
    send_to(p1, rr_call(3, 0x20000001, 1, 0), srv);
    rr_check_accepted(recv_dgram(p1), 3, PROG_UNAVAIL);
    /* A copy of a call being served is dropped: one answer. */
    std::string lc = rr_call(50, DEMO_PROG, DEMO_VERS, DEMO_LATER);
    rr_put32(lc, 7);
    send_to(p1, lc, srv);
    send_to(p1, lc, srv);
    send_to(p1, rr_call(51, DEMO_PROG, DEMO_VERS, DEMO_STATS), srv);
    bool got50 = false, got51 = false;
    for (int i = 0; i < 2; i++) {
        r = recv_dgram(p1);
        if (rr_get32(r, 0) == 50) {
            off = rr_check_accepted(r, 50, SUCCESS);
            CHECK(rr_get32(r, off) == 8 && !got50);
            got50 = true;
        } else {
            off = rr_check_accepted(r, 51, SUCCESS);
            CHECK(rr_get32(r, off) == 1 && rr_get32(r, off + 4) == 7 && !got51);
            got51 = true;
        }
    }
    send_to(p1, rr_call(52, DEMO_PROG, DEMO_VERS, DEMO_NULL), srv);
    rr_check_accepted(recv_dgram(p1), 52, SUCCESS); /* not a second answer to 50 */
    CHECK(g_laters.load() == 1);
    /* An ignored call leaves the cache: its copy is dispatched again. */
    std::string sc = rr_call(60, DEMO_PROG, DEMO_VERS, DEMO_SILENT);
    send_to(p1, sc, srv);
    send_to(p1, sc, srv);
    send_to(p1, rr_call(61, DEMO_PROG, DEMO_VERS, DEMO_NULL), srv);
    rr_check_accepted(recv_dgram(p1), 61, SUCCESS);
    CHECK(g_silents.load() == 2);
    close(p1);
    close(p2);
    printf("server: answers to senders, reply cache, 4 bad datagrams dropped\n");
}

/* ---- client: aclnt against a raw server --------------------------------------------------- */

static ptr<aclnt> g_c;
static int32_t g_res;
static std::atomic<int> g_c1_calls{0};
static std::atomic<bool> g_timed_out{false};
static int g_rawsrv; /* the raw server's socket */
static sockaddr_in g_rawaddr;
/* Those of the unconnected part: where calls go, and another. */
static int g_usrv, g_usrv2;
static sockaddr_in g_uaddr, g_uaddr2;

static void unconnected_client();

static void c4(clnt_stat err)
{
    CHECK(get_current_color() == 3);
    CHECK(err == RPC_TIMEDOUT);
    g_c = nullptr;
    unconnected_client();
}

static void c3(clnt_stat err)
{
    CHECK(get_current_color() == 3);
    CHECK(err == RPC_TIMEDOUT);
    g_timed_out = true;
    g_c->timedcall(0, 300000000L, DEMO_SILENT, NULL, NULL, wrap(c4));
}

static void c2(clnt_stat err)
{
    CHECK(get_current_color() == 3);
    CHECK(err == RPC_SUCCESS);
    CHECK(g_c1_calls.load() == 1);
    CHECK(g_c->xprt()->bad_msgs() == 1);
    g_c->call(DEMO_SILENT, NULL, NULL, wrap(c3));
}

static void c1(clnt_stat err)
{
    CHECK(get_current_color() == 3);
    CHECK(err == RPC_SUCCESS && g_res == 11);
    g_c1_calls++;
    g_c->call(DEMO_NULL, NULL, NULL, wrap(c2));
}

static void client_peer()
{
    int fd = g_rawsrv;
    sockaddr_in from;
    /* Call 1: not answered; its retransmission is the same datagram. */
    std::string d1 = recv_dgram(fd, &from);
    u_int32_t xid = rr_get32(d1, 0);
    CHECK(rr_get32(d1, 4) == CALL && rr_get32(d1, 12) == DEMO_PROG);
    CHECK(rr_get32(d1, 20) == DEMO_ADD && rr_get32(d1, 40) == 5 && rr_get32(d1, 44) == 6);
    std::string d2 = recv_dgram(fd);
    CHECK(d2 == d1);
    /* Garbage, a stray reply, the answer, the answer again. */
    send_to(fd, "xyz", from);
    std::string stray = rr_reply(xid + 1, SUCCESS);
    rr_put32(stray, 1000);
    send_to(fd, stray, from);
    std::string ans = rr_reply(xid, SUCCESS);
    rr_put32(ans, 11);
    send_to(fd, ans, from);
    send_to(fd, ans, from);
    /* Call 2 (NULL), answered; there may be a third copy of call 1 first. */
    std::string d;
    do
        d = recv_dgram(fd);
    while (rr_get32(d, 0) == xid);
    CHECK(rr_get32(d, 20) == DEMO_NULL);
    send_to(fd, rr_reply(rr_get32(d, 0), SUCCESS), from);
    /* Call 3 (SILENT): never answered; 3 sends, then RPC_TIMEDOUT. */
    d = recv_dgram(fd);
    u_int32_t sxid = rr_get32(d, 0);
    CHECK(rr_get32(d, 20) == DEMO_SILENT);
    /* Every copy is in this socket's buffer once the client timed out:
     * read until then and until the buffer stays empty (call 4's copies
     * are skipped). */
    int copies = 1;
    for (;;) {
        bool after = g_timed_out.load();
        std::string e = recv_dgram(fd, nullptr, 50, true);
        if (e.empty()) {
            if (after)
                break;
            continue;
        }
        if (rr_get32(e, 0) != sxid)
            continue;
        CHECK(e == d);
        copies++;
    }
    CHECK(copies == 3);
    printf("client: retransmission, stray/garbage/duplicate ignored, 3 sends then RPC_TIMEDOUT\n");
}

/* Unconnected: replies must come from the destination. */
static void u2(clnt_stat err)
{
    CHECK(get_current_color() == 3);
    CHECK(err == RPC_SUCCESS && g_res == 5);
    g_c = nullptr;
    printf("client: unconnected socket, reply source checked, per-call dest\n");
    ct_done();
}

static void u1(clnt_stat err)
{
    CHECK(get_current_color() == 3);
    CHECK(err == RPC_SUCCESS && g_res == 3);
    demo_pair p;
    p.a = 2;
    p.b = 3;
    g_c->call(DEMO_ADD, &p, &g_res, wrap(u2), NULL, NULL, NULL, 0, 0,
              (sockaddr *)&g_uaddr2);
}

static void unconnected_peer()
{
    sockaddr_in from;
    std::string d = recv_dgram(g_usrv, &from);
    u_int32_t xid = rr_get32(d, 0);
    std::string wrong = rr_reply(xid, SUCCESS);
    rr_put32(wrong, 999);
    send_to(g_usrv2, wrong, from); /* right xid, wrong source: dropped */
    std::string ans = rr_reply(xid, SUCCESS);
    rr_put32(ans, 3);
    send_to(g_usrv, ans, from);
    /* The second call goes to the other socket (its own dest). */
    d = recv_dgram(g_usrv2, &from);
    CHECK(rr_get32(d, 40) == 2 && rr_get32(d, 44) == 3);
    ans = rr_reply(rr_get32(d, 0), SUCCESS);
    rr_put32(ans, 5);
    send_to(g_usrv2, ans, from);
}

static void unconnected_client()
{
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(u >= 0);
    ref<axprt_dgram> x = axprt_dgram::alloc(u, sizeof(sockaddr_in));
    CHECK(!x->connected && !x->reliable);
    x->setcolor(3);
    g_c = aclnt::alloc(x, demo_prog_1, (const sockaddr *)&g_uaddr);
    std::thread(unconnected_peer).detach();
    demo_pair p;
    p.a = 1;
    p.b = 2;
    g_c->call(DEMO_ADD, &p, &g_res, wrap(u1));
}

static void start_client()
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(fd >= 0);
    CHECK(connect(fd, (sockaddr *)&g_rawaddr, sizeof g_rawaddr) == 0);
    ref<axprt_dgram> x = axprt_dgram::alloc(fd);
    CHECK(x->connected && !x->reliable);
    x->setcolor(3);
    g_c = aclnt::alloc(x, demo_prog_1);
    std::thread(client_peer).detach();
    demo_pair p;
    p.a = 5;
    p.b = 6;
    g_c->call(DEMO_ADD, &p, &g_res, wrap(c1));
}

/* ---- compat to compat, libasync's schedule ---------------------------------------------------- */

static std::atomic<int> g_cc_adds{0};
static ptr<asrv> g_ccsrv;
static ptr<aclnt> g_cc;
static int32_t g_ccres;

static void cc_dispatch(svccb *sbp)
{
    CHECK(sbp && get_current_color() == 9);
    if (sbp->proc() != DEMO_ADD) {
        sbp->reject(PROC_UNAVAIL);
        return;
    }
    if (g_cc_adds++ == 0) {
        sbp->ignore(); /* the first datagram is lost */
        return;
    }
    demo_pair *p = sbp->getarg<demo_pair>();
    sbp->replyref(p->a + p->b);
}

static void cc_done(clnt_stat err)
{
    CHECK(get_current_color() == 11);
    CHECK(err == RPC_SUCCESS && g_ccres == 42);
    CHECK(g_cc_adds.load() == 2);
    g_cc = nullptr;
    g_ccsrv = nullptr;
    printf("compat to compat: first call ignored, answered after the retransmission\n");
    /* Then the client against the raw server, 200 ms x 3 (a call takes
     * the schedule in force when it is made). */
    mely_aclnt_backoff(200, 3);
    cpucb(cwrap(start_client, 3));
    ct_done();
}

static void start_cc()
{
    int s = udp_bound();
    sockaddr_in sa = addr_of(s);
    ref<axprt_dgram> sx = axprt_dgram::alloc(s, sizeof(sockaddr_in));
    sx->setcolor(9);
    g_ccsrv = asrv::alloc(sx, demo_prog_1, wrap(cc_dispatch));
    int c = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(connect(c, (sockaddr *)&sa, sizeof sa) == 0);
    ref<axprt_dgram> cx = axprt_dgram::alloc(c);
    cx->setcolor(11); /* the call is made from color 10 */
    g_cc = aclnt::alloc(cx, demo_prog_1);
    demo_pair p;
    p.a = 20;
    p.b = 22;
    g_cc->call(DEMO_ADD, &p, &g_ccres, wrap(cc_done));
}

int main()
{
    ct_watchdog(60);
    ct_expect(3);
    /* Server. */
    int s = udp_bound();
    sockaddr_in srv = addr_of(s);
    ref<axprt_dgram> sx = axprt_dgram::alloc(s, sizeof(sockaddr_in), 1024);
    CHECK(!sx->connected && !sx->reliable);
    sx->setcolor(7);
    ptr<asrv> srvp = asrv::alloc(sx, demo_prog_1, wrap(srv_dispatch));
    CHECK(srvp);
    std::thread([srv, sx, srvp] {
        server_peer(srv, sx);
        ct_done();
    }).detach();
    g_rawsrv = udp_bound();
    g_rawaddr = addr_of(g_rawsrv);
    g_usrv = udp_bound();
    g_uaddr = addr_of(g_usrv);
    g_usrv2 = udp_bound();
    g_uaddr2 = addr_of(g_usrv2);
    /* Compat to compat with libasync's schedule, then the client parts. */
    cpucb(cwrap(start_cc, 10));
    amain();
}
