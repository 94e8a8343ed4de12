/* SPDX-License-Identifier: MIT */
/*
 * demo_server: an RPC server written the way SFS servers are (asrv::alloc,
 * a dispatch function switching on sbp->proc()), serving demo_prot.x over
 * TCP. Each connection gets its own color, so that connections are served
 * in parallel on the workers; DEMO_LATER is answered from another color.
 *
 *   demo_server [port]     prints "port N" once listening (0: any port)
 *
 * Ends on SIGTERM or SIGINT.
 */
#include "arpc.h"
#include "demo_prot.h"

struct conn {
    ptr<asrv> s;
    unsigned calls = 0;
    int color;
};

static int g_next_color = 1;

static void reply_later(svccb *sbp, int32_t v)
{
    /* Runs on color 4242, not the connection's: the answer still goes out. */
    int32_t res = v + 1;
    sbp->replyref(res);
}

static void dispatch(ref<conn> c, svccb *sbp)
{
    if (!sbp) {
        /* End of the connection: drop the server (and with it this callback). */
        c->s = NULL;
        return;
    }
    c->calls++;
    switch (sbp->proc()) {
    case DEMO_NULL:
        sbp->reply(NULL);
        break;
    case DEMO_ADD: {
        demo_pair *p = sbp->getarg<demo_pair>();
        int32_t sum = p->a + p->b;
        sbp->replyref(sum);
        break;
    }
    case DEMO_REVERSE: {
        demo_name *n = sbp->getarg<demo_name>();
        mstr m(n->len());
        for (size_t i = 0; i < n->len(); i++)
            m.cstr()[i] = (*n)[(ptrdiff_t)(n->len() - 1 - i)];
        demo_name r = str(m);
        sbp->replyref(r);
        break;
    }
    case DEMO_LOOKUP: {
        demo_name *n = sbp->getarg<demo_name>();
        demo_lookup_res *res = sbp->getres<demo_lookup_res>();
        if (*n == "one") {
            res->set_stat(DEMO_OK);
            *res->value = 1;
        } else if (*n == "big") {
            res->set_stat(DEMO_OK);
            *res->value = 0x123456789abcdefULL;
        } else {
            res->set_stat(DEMO_NOTFOUND);
        }
        sbp->reply(res);
        break;
    }
    case DEMO_STATS: {
        demo_stats st;
        st.calls = c->calls;
        st.color = (u_int32_t)get_current_color();
        sbp->replyref(st);
        break;
    }
    case DEMO_ECHO:
        sbp->reply(sbp->getarg<demo_blob>());
        break;
    case DEMO_LATER:
        cpucb(cwrap(reply_later, sbp, *sbp->getarg<int32_t>(), 4242));
        break;
    case DEMO_SILENT:
        sbp->ignore();
        break;
    default:
        sbp->reject(PROC_UNAVAIL);
        break;
    }
}

static void accept_cb(int lfd)
{
    sockaddr_in sin;
    socklen_t len = sizeof sin;
    int fd = accept(lfd, (sockaddr *)&sin, &len);
    if (fd < 0)
        return;
    tcp_nodelay(fd);
    ref<conn> c = New refcounted<conn>;
    c->color = g_next_color++;
    if (g_next_color > 64)
        g_next_color = 1;
    ref<axprt_stream> x = axprt_stream::alloc(fd);
    x->setcolor(c->color);
    c->s = asrv::alloc(x, demo_prog_1, wrap(dispatch, c));
}

static void stop()
{
    exit(0);
}

int main(int argc, char **argv)
{
    setprogname(argv[0]);
    int port = argc > 1 ? atoi(argv[1]) : 0;
    int fd = inetsocket(SOCK_STREAM, (u_int16_t)port, INADDR_LOOPBACK);
    if (fd < 0)
        fatal("socket: %m\n");
    if (listen(fd, 128) < 0)
        fatal("listen: %m\n");
    sockaddr_in sin;
    socklen_t len = sizeof sin;
    getsockname(fd, (sockaddr *)&sin, &len);
    printf("port %d\n", ntohs(sin.sin_port));
    fflush(stdout);
    make_async(fd);
    fdcb(fd, selread, wrap(accept_cb, fd));
    sigcb(SIGTERM, wrap(stop));
    sigcb(SIGINT, wrap(stop));
    amain();
}
