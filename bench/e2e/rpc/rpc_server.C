/* SPDX-License-Identifier: MIT */
/*
 * rpc_server.C: bench/e2e/run-rpc.sh's server, written as SFS code is
 * (asrv::alloc, svccb, wrap); it builds on mely-compat and on sfslite's
 * libasync. RPCBENCH_NULL answers at once, RPCBENCH_SINK the argument's
 * length. On compat each connection's transport gets a color of its own
 * (the one line guarded by MELY_COMPAT_AXPRT_H), so that connections are
 * served on every worker; on libasync everything runs on its one thread.
 *   rpc_server PORT    (0: any; prints "serving 127.0.0.1:PORT")
 * Written for mely; no line comes from libasync.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include "async.h"
#include "arpc.h"
#include "rpcbench_prot.h"

struct bconn {
    ptr<asrv> s;
};

static int next_color = 1;

static void dispatch(ref<bconn> c, svccb *sbp)
{
    if (!sbp) {
        c->s = NULL;
        return;
    }
    switch (sbp->proc()) {
    case RPCBENCH_NULL:
        sbp->reply(NULL);
        break;
    case RPCBENCH_SINK: {
        u_int32_t n = sbp->Xtmpl getarg<rpcbench_data>()->size();
        sbp->replyref(n);
        break;
    }
    default:
        sbp->reject(PROC_UNAVAIL);
    }
}

static void accept_cb(int lfd)
{
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            return;
        make_async(fd);
        tcp_nodelay(fd);
        ref<axprt_stream> x = axprt_stream::alloc(fd);
#ifdef MELY_COMPAT_AXPRT_H
        x->setcolor(next_color);
        next_color = next_color % 1024 + 1;
#endif
        ref<bconn> c = New refcounted<bconn>;
        c->s = asrv::alloc(x, rpcbench_prog_1, wrap(dispatch, c));
    }
}

/* SIGTERM ends the server with exit(), so that MELY_STATS=1 prints the
 * runtime's counters (the run scripts stop the server so). */
static void stop_cb()
{
    exit(0);
}

int main(int argc, char **argv)
{
    setprogname(argv[0]);
    if (argc != 2)
        fatal << "usage: rpc_server PORT\n";
    int lfd = inetsocket(SOCK_STREAM, (u_int16_t)atoi(argv[1]), INADDR_LOOPBACK);
    if (lfd < 0 || listen(lfd, 128) < 0)
        fatal << "cannot listen\n";
    sockaddr_in sin;
    socklen_t len = sizeof(sin);
    getsockname(lfd, reinterpret_cast<sockaddr *>(&sin), &len);
    make_async(lfd);
    fdcb(lfd, selread, wrap(accept_cb, lfd));
    sigcb(SIGTERM, wrap(stop_cb));
    printf("rpc_server: serving 127.0.0.1:%d\n", ntohs(sin.sin_port));
    fflush(stdout);
    amain();
}
