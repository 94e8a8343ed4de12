/* SPDX-License-Identifier: MIT */
/*
 * arpc_unix.cpp: arpc over Unix-domain stream sockets (axprt_unix) and
 * descriptor passing.
 *   A server listening at a path (axprt_unix on each accepted socket, color
 *   21) and a client from axprt_unix_connect (color 22): a call and its
 *   reply; a pipe's write end sent with sendfd before a call, the server
 *   takes it (recvfd) in dispatch and writes through it, the client reads
 *   the bytes, then end of file (both copies closed: closeit); sendfd(fd,
 *   false) leaves the sender's copy open; six descriptors never taken: two
 *   closed at once (4 wait at most), the other four when the connection
 *   ends (each pipe's read end sees end of file).
 *   On the wire, against a raw peer: sendfd is a 4-byte empty fragment with
 *   the descriptor, before the call's record; the peer sends one the same
 *   way to compat's server, which takes it.
 *   AUTH_UNIX: a credential from authunix_create parsed by getaup (uid,
 *   gid, groups, name); one built by hand as RFC 5531 lays it out, too; one
 *   whose machine name is over 255 bytes gives getaup() NULL, the call
 *   still served; authunix_create of 17 groups is NULL.
 *   allow_recvfd false: recvfd() is -1 and the descriptor is gone (its
 *   pipe's read end sees end of file). axprt_unix::alloc of a pipe: a
 *   transport at its end. The number of open descriptors
 *   (/proc/self/fd) is the same at the end as at the start.
 */
#include "arpc.h"
#include "demo_prot.h"

#include <atomic>
#include <string>
#include <thread>

#include <dirent.h>
#include <poll.h>
#include <sys/un.h>

#include "ctest.h"
#include "rawrpc.h"

static int count_fds()
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* Reads what is there (5 s at most for the first byte): "" at end of file. */
static std::string read_some(int fd)
{
    pollfd p = {fd, POLLIN, 0};
    CHECK(poll(&p, 1, 5000) == 1);
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf);
    CHECK(n >= 0);
    return std::string(buf, (size_t)n);
}

/* ---- the server ------------------------------------------------------------------------ */

static std::atomic<int> g_srv_eofs{0};

static void dispatch(ptr<asrv> *keep, svccb *sbp)
{
    if (!sbp) {
        g_srv_eofs++;
        *keep = nullptr;
        delete keep;
        return;
    }
    axprt_unix *ux = dynamic_cast<axprt_unix *>(sbp->getxprt().get());
    CHECK(ux);
    switch (sbp->proc()) {
    case DEMO_NULL:
        sbp->reply(NULL);
        break;
    case DEMO_ADD: {
        demo_pair *p = sbp->getarg<demo_pair>();
        sbp->replyref(p->a + p->b);
        break;
    }
    case DEMO_ECHO: {
        /* Writes the argument through the descriptor that came with it. */
        int fd = ux->recvfd();
        CHECK(fd >= 0);
        demo_blob *b = sbp->getarg<demo_blob>();
        CHECK(write(fd, b->base(), b->size()) == (ssize_t)b->size());
        close(fd);
        sbp->replyref(*b);
        break;
    }
    case DEMO_STATS: {
        /* calls: the AUTH_UNIX uid (all ones if none), color: its 2nd group. */
        const authunix_parms *a = sbp->getaup();
        demo_stats *st = sbp->getres<demo_stats>();
        st->calls = a ? (unsigned)a->aup_uid : 0xffffffffu;
        st->color = a && a->aup_len >= 2 ? (unsigned)a->aup_gids[1] : 0;
        if (a && !strcmp(a->aup_machname, "host1"))
            CHECK(a->aup_gid == 100 && a->aup_len == 2 && a->aup_gids[0] == 10);
        if (a && !strcmp(a->aup_machname, "raw"))
            CHECK(a->aup_time == 7 && a->aup_gid == 6 && a->aup_len == 3);
        sbp->reply(st);
        break;
    }
    case DEMO_LOOKUP: {
        /* value: 1 if a descriptor was there (written "ok" and closed). */
        demo_lookup_res *r = sbp->getres<demo_lookup_res>();
        r->set_stat(DEMO_OK);
        int fd = ux->recvfd();
        *r->value = fd >= 0;
        if (fd >= 0) {
            CHECK(write(fd, "ok", 2) == 2);
            close(fd);
        }
        sbp->reply(r);
        break;
    }
    default:
        sbp->reject(PROC_UNAVAIL);
    }
}

/* Serves transport x until its end. */
static void serve(ref<axprt_unix> x)
{
    ptr<asrv> *keep = new ptr<asrv>;
    *keep = asrv::alloc(x, demo_prog_1);
    CHECK(*keep);
    (*keep)->setcb(wrap(dispatch, keep));
}

static int g_listen = -1;

static void on_accept()
{
    CHECK(get_current_color() == 21);
    int fd = accept(g_listen, NULL, NULL);
    if (fd < 0)
        return;
    ref<axprt_unix> x = axprt_unix::alloc(fd);
    CHECK(x->getcolor() == 21 && !x->ateof());
    serve(x);
}

/* ---- the client ------------------------------------------------------------------------ */

static int g_fds_before;
static char g_path[108];
static ptr<aclnt> g_c;
static ptr<axprt_unix> g_cx;
static int32_t g_res;
static demo_blob g_blob;
static demo_lookup_res g_look;
static int g_p[2], g_q[2], g_r[6][2];

static void wire_test();

/* Runs then on color 22 once the server saw n ends (polled: the
 * transports go by events, this color's among them). */
static void after_eofs(int n, cbv then, int tries)
{
    if (g_srv_eofs.load() < n) {
        CHECK(tries < 200);
        delaycb(0, 25000000, cwrap(after_eofs, n, then, tries + 1, 22));
        return;
    }
    CHECK(g_srv_eofs.load() == n);
    (*then)();
}

static void step4b()
{
    /* The server closed them all: two at once, four at its end. */
    for (int i = 0; i < 6; i++) {
        CHECK(read_some(g_r[i][0]) == "");
        close(g_r[i][0]);
    }
    printf("unix: call, sendfd/recvfd, closeit, unclaimed descriptors closed\n");
    wire_test();
}

static void step4(clnt_stat err)
{
    CHECK(err == RPC_SUCCESS && get_current_color() == 22);
    /* Six sent, none taken: the connection ends. */
    g_c = nullptr;
    g_cx = nullptr;
    after_eofs(1, wrap(step4b), 0);
}

static void step3(clnt_stat err)
{
    CHECK(err == RPC_SUCCESS && get_current_color() == 22);
    CHECK(g_look.stat == DEMO_OK && *g_look.value == 1);
    CHECK(read_some(g_q[0]) == "ok");
    /* Not closed here: closeit was false. */
    CHECK(write(g_q[1], "x", 1) == 1);
    CHECK(read_some(g_q[0]) == "x");
    close(g_q[0]);
    close(g_q[1]);
    for (int i = 0; i < 6; i++) {
        CHECK(pipe(g_r[i]) == 0);
        g_cx->sendfd(g_r[i][1]);
    }
    g_c->call(DEMO_NULL, NULL, NULL, wrap(step4));
}

static void step2(clnt_stat err)
{
    CHECK(err == RPC_SUCCESS && get_current_color() == 22);
    CHECK(std::string(g_blob.base(), g_blob.size()) == "through the pipe");
    CHECK(read_some(g_p[0]) == "through the pipe");
    CHECK(read_some(g_p[0]) == ""); /* both copies of the write end are closed */
    close(g_p[0]);
    CHECK(pipe(g_q) == 0);
    g_cx->sendfd(g_q[1], false);
    demo_name n = "take";
    g_c->call(DEMO_LOOKUP, &n, &g_look, wrap(step3));
}

static demo_stats g_stats;

static void step1b(AUTH *auth, clnt_stat err)
{
    CHECK(err == RPC_SUCCESS && get_current_color() == 22);
    CHECK(g_stats.calls == 1000 && g_stats.color == 20);
    AUTH_DESTROY(auth);
    printf("unix: AUTH_UNIX credential sent (authunix_create) and parsed (getaup)\n");
    CHECK(pipe(g_p) == 0);
    g_cx->sendfd(g_p[1]);
    demo_blob b;
    b.setsize(16);
    memcpy(b.base(), "through the pipe", 16);
    g_c->call(DEMO_ECHO, &b, &g_blob, wrap(step2));
}

static void step1(clnt_stat err);

static void start_client()
{
    g_fds_before = count_fds();
    g_cx = axprt_unix_connect(g_path);
    CHECK(g_cx && !g_cx->ateof());
    g_c = aclnt::alloc(g_cx, demo_prog_1);
    demo_pair p;
    p.a = 40;
    p.b = 2;
    g_c->call(DEMO_ADD, &p, &g_res, wrap(step1));
}

static void step1(clnt_stat err)
{
    CHECK(err == RPC_SUCCESS && g_res == 42 && get_current_color() == 22);
    gid_t many[17] = {0};
    CHECK(!authunix_create("host1", 1000, 100, 17, many));
    gid_t gids[2] = {10, 20};
    AUTH *auth = authunix_create("host1", 1000, 100, 2, gids);
    CHECK(auth && auth->ah_cred.oa_flavor == AUTH_UNIX);
    g_c->call(DEMO_STATS, NULL, &g_stats, wrap(step1b, auth), auth);
}

/* ---- on the wire -------------------------------------------------------------------------- */

static void final_check(int tries);

static ptr<aclnt> g_wc;
static int g_wpipe[2];
static int g_npipe[2];

/* The raw peer: a descriptor in, a call in, a descriptor out. */
static void wire_peer(int fd)
{
    /* compat's sendfd: 4 zero bytes carrying the descriptor. */
    char z[4];
    int got = -1;
    ssize_t n = readfd(fd, z, 4, &got);
    CHECK(n == 4 && !memcmp(z, "\0\0\0\0", 4) && got >= 0);
    CHECK(write(got, "w", 1) == 1);
    close(got);
    /* Then the call's record (NULL), answered. */
    char h[4];
    CHECK(read(fd, h, 4) == 4);
    u_int32_t hv;
    memcpy(&hv, h, 4);
    hv = ntohl(hv);
    CHECK((hv & 0x80000000u) && (hv & 0x7fffffff) == 40);
    std::string rec(40, '\0');
    size_t off = 0;
    while (off < 40) {
        ssize_t k = read(fd, &rec[off], 40 - off);
        CHECK(k > 0);
        off += (size_t)k;
    }
    CHECK(rr_get32(rec, 20) == DEMO_NULL);
    std::string rep = rr_reply(rr_get32(rec, 0), SUCCESS);
    std::string out;
    rr_put32(out, 0x80000000u | (u_int32_t)rep.size());
    out += rep;
    CHECK(write(fd, out.data(), out.size()) == (ssize_t)out.size());
    /* A break with a descriptor, then a call that takes it (LOOKUP). */
    int pp[2];
    CHECK(pipe(pp) == 0);
    CHECK(writefd(fd, "\0\0\0\0", 4, pp[1]) == 4);
    close(pp[1]);
    std::string call = rr_call(77, DEMO_PROG, DEMO_VERS, DEMO_LOOKUP);
    rr_put32(call, 4);
    call += "take";
    out.clear();
    rr_put32(out, 0x80000000u | (u_int32_t)call.size());
    out += call;
    CHECK(write(fd, out.data(), out.size()) == (ssize_t)out.size());
    CHECK(read(fd, h, 4) == 4);
    memcpy(&hv, h, 4);
    hv = ntohl(hv) & 0x7fffffff;
    std::string r(hv, '\0');
    off = 0;
    while (off < hv) {
        ssize_t k = read(fd, &r[off], hv - off);
        CHECK(k > 0);
        off += (size_t)k;
    }
    off = rr_check_accepted(r, 77, SUCCESS);
    CHECK(rr_get32(r, off) == DEMO_OK && rr_get32(r, off + 8) == 1);
    CHECK(read_some(pp[0]) == "ok");
    CHECK(read_some(pp[0]) == "");
    close(pp[0]);
    /* AUTH_UNIX credentials as RFC 5531 lays them out: parsed; one with a
     * 300-byte machine name (over 255): not (getaup NULL, still served). */
    for (int bad = 0; bad < 2; bad++) {
        std::string cred;
        rr_put32(cred, 7);
        std::string name = bad ? std::string(300, 'm') : std::string("raw");
        rr_put32(cred, (u_int32_t)name.size());
        cred += name;
        cred.append((4 - name.size() % 4) % 4, '\0');
        rr_put32(cred, 5);
        rr_put32(cred, 6);
        rr_put32(cred, 3);
        rr_put32(cred, 1);
        rr_put32(cred, 2);
        rr_put32(cred, 3);
        std::string c;
        rr_put32(c, 80 + bad);
        rr_put32(c, 0);
        rr_put32(c, 2);
        rr_put32(c, DEMO_PROG);
        rr_put32(c, DEMO_VERS);
        rr_put32(c, DEMO_STATS);
        rr_put32(c, 1); /* AUTH_UNIX */
        rr_put32(c, (u_int32_t)cred.size());
        c += cred;
        rr_put32(c, 0);
        rr_put32(c, 0);
        out.clear();
        rr_put32(out, 0x80000000u | (u_int32_t)c.size());
        out += c;
        CHECK(write(fd, out.data(), out.size()) == (ssize_t)out.size());
        CHECK(read(fd, h, 4) == 4);
        memcpy(&hv, h, 4);
        hv = ntohl(hv) & 0x7fffffff;
        r.assign(hv, '\0');
        off = 0;
        while (off < hv) {
            ssize_t k = read(fd, &r[off], hv - off);
            CHECK(k > 0);
            off += (size_t)k;
        }
        off = rr_check_accepted(r, 80 + bad, SUCCESS);
        if (bad)
            CHECK(rr_get32(r, off) == 0xffffffffu && rr_get32(r, off + 4) == 0);
        else
            CHECK(rr_get32(r, off) == 5 && rr_get32(r, off + 4) == 2);
    }
    close(fd);
}

static void nofd_done(clnt_stat err)
{
    CHECK(err == RPC_SUCCESS);
    CHECK(g_look.stat == DEMO_OK && *g_look.value == 0);
    CHECK(read_some(g_npipe[0]) == ""); /* the kernel dropped it */
    close(g_npipe[0]);
    g_wc = nullptr;
    /* A pipe is not a Unix socket. */
    int pp[2];
    CHECK(pipe(pp) == 0);
    ref<axprt_unix> bad = axprt_unix::alloc(pp[0]);
    CHECK(bad->ateof());
    close(pp[1]);
    printf("unix: allow_recvfd false, alloc of a pipe\n");
    final_check(0);
}

/* allow_recvfd false on the server's side. */
static void nofd_test()
{
    int sp[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
    ref<axprt_unix> sx = axprt_unix::alloc(sp[0]);
    sx->allow_recvfd = false;
    serve(sx);
    ref<axprt_unix> cx = axprt_unix::alloc(sp[1]);
    g_wc = aclnt::alloc(cx, demo_prog_1);
    CHECK(pipe(g_npipe) == 0);
    cx->sendfd(g_npipe[1]);
    demo_name n = "take";
    g_wc->call(DEMO_LOOKUP, &n, &g_look, wrap(nofd_done));
}

static void wire_done(clnt_stat err)
{
    CHECK(err == RPC_SUCCESS && get_current_color() == 24);
    CHECK(read_some(g_wpipe[0]) == "w");
    CHECK(read_some(g_wpipe[0]) == "");
    close(g_wpipe[0]);
    printf("unix: on the wire, both directions\n");
}

static void wire_test()
{
    int sp[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
    ref<axprt_unix> x = axprt_unix::alloc(sp[0]);
    x->setcolor(24);
    serve(x); /* the peer's call comes on the same transport */
    g_wc = aclnt::alloc(x, demo_prog_1);
    std::thread peer(wire_peer, sp[1]);
    CHECK(pipe(g_wpipe) == 0);
    x->sendfd(g_wpipe[1]);
    g_wc->call(DEMO_NULL, NULL, NULL, wrap(wire_done));
    peer.detach();
    /* The peer closes when done: the server sees the end. */
    after_eofs(2, wrap(+[] {
                   g_wc = nullptr;
                   nofd_test();
               }),
               0);
}

/* No descriptor left behind: transports go by events of their colors, so
 * the count may need a moment. */
static void final_check(int tries)
{
    int now = count_fds();
    if (now != g_fds_before) {
        CHECK(tries < 100);
        delaycb(0, 50000000, cwrap(final_check, tries + 1, 22));
        return;
    }
    printf("unix: %d descriptors open before, %d after\n", g_fds_before, now);
    close(g_listen);
    unlink(g_path);
    exit(0);
}

int main()
{
    ct_watchdog(60);
    snprintf(g_path, sizeof g_path, "/tmp/mely-arpc-unix-%d", (int)getpid());
    unlink(g_path);
    g_listen = unixsocket(g_path);
    CHECK(g_listen >= 0);
    CHECK(listen(g_listen, 8) == 0);
    make_async(g_listen);
    fdcb(g_listen, selread, cwrap(on_accept, 21));
    /* The runtime's own descriptors are made by its first timer and watch:
     * counted only after one of each. */
    delaycb(0, 1000000, cwrap(start_client, 22));
    amain();
}
