/* SPDX-License-Identifier: MIT */
/*
 * arpc.cpp: asrv and aclnt against a peer that speaks raw RPC (RFC 5531) on
 * the other end of a socketpair, from a thread of its own:
 *   server side: a good call; RPC version 3 (RPC_MISMATCH 2..2); an unknown
 *   program (PROG_UNAVAIL), version (PROG_MISMATCH 1..1), procedure
 *   (PROC_UNAVAIL); arguments that do not decode (GARBAGE_ARGS); a 3-byte
 *   record (dropped, the server goes on); a call in two fragments; dispatch
 *   on the transport's color (7) and a reply from color 4242; then a record
 *   header of 2^31-1 bytes: the server closes and dispatch(NULL) runs once.
 *   client side: the call's header; a reply with another xid (ignored);
 *   PROC_UNAVAIL -> RPC_PROCUNAVAIL; a result cut short -> RPC_CANTDECODERES;
 *   the peer closing with a call pending -> RPC_CANTRECV; a call after
 *   that -> RPC_CANTSEND.
 *   getsrv(): the asrv that took the call; the svccb keeps it alive after
 *   the server dropped it (a reply from color 4242 then), and it is gone
 *   once answered (the next call gets PROG_UNAVAIL); then 3000 pipelined
 *   calls while color 12 allocates and drops an asrv over and over: each
 *   call is served by it (getsrv() the asrv that ran dispatch) or gets
 *   PROG_UNAVAIL, never a crash or a freed asrv.
 */
#include "arpc.h"
#include "demo_prot.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "ctest.h"

/* ---- raw RPC on a blocking fd ----------------------------------------------------- */

static void put32(std::string &s, u_int32_t v)
{
    v = htonl(v);
    s.append((const char *)&v, 4);
}
static u_int32_t get32(const std::string &s, size_t off)
{
    CHECK(s.size() >= off + 4);
    u_int32_t v;
    memcpy(&v, s.data() + off, 4);
    return ntohl(v);
}
static void write_all(int fd, const std::string &s)
{
    size_t done = 0;
    while (done < s.size()) {
        ssize_t n = write(fd, s.data() + done, s.size() - done);
        CHECK(n > 0);
        done += (size_t)n;
    }
}
/* One record (all fragments); "" at end of file. */
static std::string read_record(int fd)
{
    std::string rec;
    for (;;) {
        char h[4];
        size_t got = 0;
        while (got < 4) {
            ssize_t n = read(fd, h + got, 4 - got);
            if (n == 0 && got == 0)
                return "";
            CHECK(n > 0);
            got += (size_t)n;
        }
        u_int32_t hv;
        memcpy(&hv, h, 4);
        hv = ntohl(hv);
        size_t len = hv & 0x7fffffff;
        std::string frag(len, '\0');
        got = 0;
        while (got < len) {
            ssize_t n = read(fd, &frag[got], len - got);
            CHECK(n > 0);
            got += (size_t)n;
        }
        rec += frag;
        if (hv & 0x80000000u)
            return rec;
    }
}
static void send_record(int fd, const std::string &body)
{
    std::string r;
    put32(r, 0x80000000u | (u_int32_t)body.size());
    write_all(fd, r + body);
}
static std::string call_msg(u_int32_t xid, u_int32_t rpcvers, u_int32_t prog, u_int32_t vers,
                            u_int32_t proc)
{
    std::string s;
    put32(s, xid);
    put32(s, CALL);
    put32(s, rpcvers);
    put32(s, prog);
    put32(s, vers);
    put32(s, proc);
    put32(s, AUTH_NONE);
    put32(s, 0);
    put32(s, AUTH_NONE);
    put32(s, 0);
    return s;
}
/* Checks an accepted reply's header; returns the offset of what follows the stat. */
static size_t check_accepted(const std::string &r, u_int32_t xid, u_int32_t stat)
{
    CHECK(get32(r, 0) == xid);
    CHECK(get32(r, 4) == REPLY);
    CHECK(get32(r, 8) == MSG_ACCEPTED);
    CHECK(get32(r, 12) == AUTH_NONE && get32(r, 16) == 0);
    CHECK(get32(r, 20) == stat);
    return 24;
}

/* ---- server side ----------------------------------------------------------------------- */

static ptr<asrv> g_srv;
static std::atomic<int> g_srv_eofs{0};
static std::atomic<bool> g_server_done{false}, g_client_done{false};
static std::atomic<int> g_getsrv_done{0};

static void maybe_exit()
{
    if (g_server_done.load() && g_client_done.load() && g_getsrv_done.load())
        exit(0);
}

static void later(svccb *sbp, int32_t v)
{
    CHECK(get_current_color() == 4242);
    sbp->replyref(v + 1);
}

static void dispatch(svccb *sbp)
{
    if (!sbp) {
        CHECK(get_current_color() == 7);
        g_srv_eofs++;
        g_srv = NULL;
        return;
    }
    CHECK(get_current_color() == 7);
    switch (sbp->proc()) {
    case DEMO_NULL:
        sbp->reply(NULL);
        break;
    case DEMO_ADD: {
        demo_pair *p = sbp->getarg<demo_pair>();
        sbp->replyref(p->a + p->b);
        break;
    }
    case DEMO_LATER:
        cpucb(cwrap(later, sbp, *sbp->getarg<int32_t>(), 4242));
        break;
    default:
        sbp->reject(PROC_UNAVAIL);
    }
}

static void server_peer(int fd)
{
    std::string r;
    /* A good call. */
    std::string m = call_msg(1, 2, DEMO_PROG, DEMO_VERS, DEMO_ADD);
    put32(m, 40);
    put32(m, 2);
    send_record(fd, m);
    r = read_record(fd);
    size_t off = check_accepted(r, 1, SUCCESS);
    CHECK(get32(r, off) == 42 && r.size() == off + 4);
    /* RPC version 3. */
    send_record(fd, call_msg(2, 3, DEMO_PROG, DEMO_VERS, DEMO_NULL));
    r = read_record(fd);
    CHECK(get32(r, 0) == 2 && get32(r, 4) == REPLY && get32(r, 8) == MSG_DENIED);
    CHECK(get32(r, 12) == RPC_MISMATCH && get32(r, 16) == 2 && get32(r, 20) == 2);
    /* Unknown program, version, procedure. */
    send_record(fd, call_msg(3, 2, 12345, 1, 0));
    check_accepted(read_record(fd), 3, PROG_UNAVAIL);
    send_record(fd, call_msg(4, 2, DEMO_PROG, 9, 0));
    r = read_record(fd);
    off = check_accepted(r, 4, PROG_MISMATCH);
    CHECK(get32(r, off) == 1 && get32(r, off + 4) == 1);
    send_record(fd, call_msg(5, 2, DEMO_PROG, DEMO_VERS, 50));
    check_accepted(read_record(fd), 5, PROC_UNAVAIL);
    /* Arguments cut short. */
    m = call_msg(6, 2, DEMO_PROG, DEMO_VERS, DEMO_ADD);
    put32(m, 1);
    send_record(fd, m);
    check_accepted(read_record(fd), 6, GARBAGE_ARGS);
    /* A string argument longer than its bound (DEMO_MAXNAME). */
    m = call_msg(7, 2, DEMO_PROG, DEMO_VERS, DEMO_REVERSE);
    put32(m, 100);
    m += std::string(100, 'x');
    send_record(fd, m);
    check_accepted(read_record(fd), 7, GARBAGE_ARGS);
    /* Not an RPC message: dropped. A reply on a server: dropped. Then a
     * call in two fragments, answered. */
    send_record(fd, "abc");
    std::string rep;
    put32(rep, 99);
    put32(rep, REPLY);
    send_record(fd, rep);
    m = call_msg(8, 2, DEMO_PROG, DEMO_VERS, DEMO_NULL);
    std::string two;
    put32(two, 12);
    two += m.substr(0, 12);
    put32(two, 0x80000000u | (u_int32_t)(m.size() - 12));
    two += m.substr(12);
    write_all(fd, two);
    r = read_record(fd);
    check_accepted(r, 8, SUCCESS);
    CHECK(r.size() == 24);
    /* A reply from another color. */
    m = call_msg(9, 2, DEMO_PROG, DEMO_VERS, DEMO_LATER);
    put32(m, 7);
    send_record(fd, m);
    r = read_record(fd);
    off = check_accepted(r, 9, SUCCESS);
    CHECK(get32(r, off) == 8);
    /* A record over the transport's size: the server closes. */
    std::string big;
    put32(big, 0x7fffffff);
    write_all(fd, big);
    CHECK(read_record(fd) == "");
    close(fd);
    for (int i = 0; i < 200 && g_srv_eofs.load() == 0; i++)
        usleep(10000);
    usleep(50000);
    CHECK(g_srv_eofs.load() == 1);
    g_server_done = true;
    cpucb(wrap(maybe_exit));
}

/* ---- getsrv ---------------------------------------------------------------------------- */

/* Another program on the same transport, with no procedure: it keeps the
 * transport a server's, so a call of demo_prog_1 while no asrv serves it
 * gets PROG_UNAVAIL. */
static const rpc_program other_prog_1 = {0x20000999, 1, NULL, 0, "other_prog_1"};
static ptr<asrv> g_s1, g_other;
static std::atomic<bool> g_churn{false};

static void later_s1(svccb *sbp, int32_t v)
{
    CHECK(get_current_color() == 4242);
    /* The server dropped it: the svccb holds the only count. */
    CHECK(sbp->getsrv() && sbp->getsrv()->refcount_getcnt() == 1);
    CHECK(sbp->getsrv()->xprt().get() == sbp->getxprt().get());
    sbp->replyref(v + 1);
}

static void dispatch_s1(asrv *self, svccb *sbp)
{
    if (!sbp)
        return;
    CHECK(get_current_color() == 11);
    CHECK(sbp->getsrv().get() == self);
    switch (sbp->proc()) {
    case DEMO_ADD: {
        demo_pair *p = sbp->getarg<demo_pair>();
        sbp->replyref(p->a + p->b);
        break;
    }
    case DEMO_LATER:
        g_s1 = NULL; /* the svccb keeps it */
        cpucb(cwrap(later_s1, sbp, *sbp->getarg<int32_t>(), 4242));
        break;
    default:
        sbp->reject(PROC_UNAVAIL);
    }
}

static void dispatch_other(svccb *sbp)
{
    if (!sbp) {
        g_other = NULL;
        g_getsrv_done++;
    }
}

static void dispatch_churned(svccb *sbp)
{
    if (!sbp)
        return;
    CHECK(get_current_color() == 11);
    CHECK(sbp->getsrv() && &sbp->getsrv()->rp == &demo_prog_1);
    CHECK(sbp->getsrv()->refcount_getcnt() >= 1);
    demo_pair *p = sbp->getarg<demo_pair>();
    sbp->replyref(p->a + p->b);
}

/* Color 12: an asrv of demo_prog_1 allocated and dropped, again and again,
 * while calls come. */
static void churn(ref<axprt> x)
{
    if (!g_churn.load())
        return;
    asrv::alloc(x, demo_prog_1, wrap(dispatch_churned)); /* and dropped */
    cpucb(cwrap(churn, x, 12));
}

static std::string add_call(u_int32_t xid, u_int32_t a, u_int32_t b)
{
    std::string m = call_msg(xid, 2, DEMO_PROG, DEMO_VERS, DEMO_ADD);
    put32(m, a);
    put32(m, b);
    return m;
}

static void getsrv_peer(int fd, ref<axprt> x)
{
    send_record(fd, add_call(1, 1, 2));
    std::string r = read_record(fd);
    size_t off = check_accepted(r, 1, SUCCESS);
    CHECK(get32(r, off) == 3);
    std::string m = call_msg(2, 2, DEMO_PROG, DEMO_VERS, DEMO_LATER);
    put32(m, 5);
    send_record(fd, m);
    r = read_record(fd);
    off = check_accepted(r, 2, SUCCESS);
    CHECK(get32(r, off) == 6);
    /* Answered, the asrv goes (its svccb may still be on its way out). */
    for (int i = 0;; i++) {
        CHECK(i < 200);
        send_record(fd, add_call(3, 1, 2));
        r = read_record(fd);
        if (get32(r, 12) == AUTH_NONE && get32(r, 20) == PROG_UNAVAIL)
            break;
        usleep(10000);
    }
    check_accepted(r, 3, PROG_UNAVAIL);
    /* Calls while an asrv comes and goes. */
    g_churn = true;
    cpucb(cwrap(churn, x, 12));
    std::thread sender([fd] {
        for (u_int32_t i = 0; i < 3000; i++)
            send_record(fd, add_call(100 + i, i, 1));
    });
    int served = 0, unavail = 0;
    for (u_int32_t i = 0; i < 3000; i++) {
        r = read_record(fd);
        u_int32_t xid = get32(r, 0);
        CHECK(xid >= 100 && xid < 3100);
        if (get32(r, 20) == PROG_UNAVAIL) {
            check_accepted(r, xid, PROG_UNAVAIL);
            unavail++;
        } else {
            off = check_accepted(r, xid, SUCCESS);
            CHECK(get32(r, off) == xid - 100 + 1);
            served++;
        }
    }
    sender.join();
    g_churn = false;
    printf("getsrv: 3000 calls while an asrv came and went: %d served, %d PROG_UNAVAIL\n",
           served, unavail);
    close(fd);
    for (int i = 0; i < 300 && g_getsrv_done.load() == 0; i++)
        usleep(10000);
    CHECK(g_getsrv_done.load() == 1);
}

static void start_getsrv(int fd, int peer)
{
    ref<axprt_stream> x = axprt_stream::alloc(fd);
    x->setcolor(11);
    g_s1 = asrv::alloc(x, demo_prog_1);
    g_s1->setcb(wrap(dispatch_s1, g_s1.get()));
    g_other = asrv::alloc(x, other_prog_1, wrap(dispatch_other));
    ref<axprt> xr = x;
    std::thread([peer, xr] {
        getsrv_peer(peer, xr);
        cpucb(wrap(maybe_exit));
    }).detach();
}

/* ---- client side ------------------------------------------------------------------------ */

static ptr<aclnt> g_clnt;
static int32_t g_res;
static demo_stats g_stats;

static void client_peer(int fd)
{
    /* Call 1: check its header; answer with another xid, then PROC_UNAVAIL. */
    std::string c = read_record(fd);
    u_int32_t xid = get32(c, 0);
    CHECK(get32(c, 4) == CALL && get32(c, 8) == 2 && get32(c, 12) == DEMO_PROG);
    CHECK(get32(c, 16) == DEMO_VERS && get32(c, 20) == DEMO_ADD);
    CHECK(get32(c, 24) == AUTH_NONE && get32(c, 28) == 0);
    CHECK(get32(c, 40) == 5 && get32(c, 44) == 6 && c.size() == 48);
    std::string r;
    put32(r, xid + 1);
    put32(r, REPLY);
    put32(r, MSG_ACCEPTED);
    put32(r, 0);
    put32(r, 0);
    put32(r, SUCCESS);
    put32(r, 1000);
    send_record(fd, r);
    r.clear();
    put32(r, xid);
    put32(r, REPLY);
    put32(r, MSG_ACCEPTED);
    put32(r, 0);
    put32(r, 0);
    put32(r, PROC_UNAVAIL);
    send_record(fd, r);
    /* Call 2: a result cut short. */
    c = read_record(fd);
    xid = get32(c, 0);
    CHECK(get32(c, 20) == DEMO_STATS);
    r.clear();
    put32(r, xid);
    put32(r, REPLY);
    put32(r, MSG_ACCEPTED);
    put32(r, 0);
    put32(r, 0);
    put32(r, SUCCESS);
    put32(r, 1); /* demo_stats needs 8 bytes */
    send_record(fd, r);
    /* Call 3: read, then close with it pending. */
    c = read_record(fd);
    CHECK(get32(c, 20) == DEMO_NULL);
    close(fd);
}

static void call4(clnt_stat err)
{
    CHECK(err == RPC_CANTSEND);
    CHECK(!g_clnt->calls_outstanding());
    g_clnt = NULL;
    g_client_done = true;
    maybe_exit();
}

static void call3(clnt_stat err)
{
    CHECK(err == RPC_CANTRECV);
    g_clnt->call(DEMO_NULL, NULL, NULL, wrap(call4));
}

static void call2(clnt_stat err)
{
    CHECK(err == RPC_CANTDECODERES);
    g_clnt->call(DEMO_NULL, NULL, NULL, wrap(call3));
    CHECK(g_clnt->calls_outstanding());
}

static void call1(clnt_stat err)
{
    CHECK(err == RPC_PROCUNAVAIL);
    g_clnt->call(DEMO_STATS, NULL, &g_stats, wrap(call2));
}

static void start_client(int fd)
{
    ref<axprt_stream> x = axprt_stream::alloc(fd);
    g_clnt = aclnt::alloc(x, demo_prog_1);
    demo_pair p;
    p.a = 5;
    p.b = 6;
    g_clnt->call(DEMO_ADD, &p, &g_res, wrap(call1));
}

int main()
{
    ct_watchdog(30);
    int sp[2], cp[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, cp) == 0);

    ref<axprt_stream> x = axprt_stream::alloc(sp[0]);
    x->setcolor(7);
    g_srv = asrv::alloc(x, demo_prog_1, wrap(dispatch));
    CHECK(g_srv);
    std::thread(server_peer, sp[1]).detach();

    cpucb(cwrap(start_client, cp[0], 3));
    std::thread(client_peer, cp[1]).detach();

    int gp[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, gp) == 0);
    cpucb(cwrap(start_getsrv, gp[0], gp[1], 11));
    amain();
}
