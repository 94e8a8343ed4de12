/* SPDX-License-Identifier: MIT */
/*
 * ex_server.C: a server of sfslite's tutorial/ex_prot.x (EX_PROG 31313, 1),
 * deterministic, written as SFS code is (asrv::alloc, svccb, wrap), for
 * sfslite-arpc-interop.sh. It builds unchanged on sfslite's libasync and on
 * mely-compat.
 *   ex_server PORT        listens on 127.0.0.1:PORT, serves connections;
 *                         prints each call (procedure, argument as XDR in
 *                         hex) and exits when the first connection ends
 * Answers: EX_NULL; EX_RANDOM a fixed sequence; EX_REVERSE the string
 * reversed; EX_STRUCT {"hello, world!", 34444}; EX_RANDOM2 n*3, or for n a
 * multiple of 11 PROC_UNAVAIL, of 13 AUTH_TOOWEAK, of 17 SYSTEM_ERR;
 * EX_PERFTEST the argument back.
 * Written for mely; no line comes from libasync.
 */
#include "ex_common.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

static u_int32_t nrandom;

struct exconn {
    ptr<asrv> s;
};

static void dispatch(ref<exconn> c, svccb *sbp)
{
    if (!sbp) {
        printf("end\n");
        fflush(stdout);
        c->s = NULL;
        exit(0);
    }
    u_int32_t p = sbp->proc();
    /* libasync's getsrv(): the asrv that took the call, on this connection. */
    if (sbp->getsrv() != c->s || sbp->getsrv()->xprt()->ateof())
        fatal << "getsrv() is not this connection's asrv\n";
    const rpcgen_table &t = ex_prog_1.tbl[p];
    printf("call %s arg=%s\n", t.name, ex_hex(t.xdr_arg, sbp->getvoidarg()).cstr());
    fflush(stdout);
    switch (p) {
    case EX_NULL:
        sbp->reply(NULL);
        break;
    case EX_RANDOM: {
        int r = (int)((nrandom++ * 7919u + 17) % 99999u);
        sbp->replyref(r);
        break;
    }
    case EX_REVERSE: {
        ex_str_t *a = sbp->Xtmpl getarg<ex_str_t>();
        mstr m(a->len());
        for (size_t i = 0; i < a->len(); i++)
            m.cstr()[i] = a->cstr()[a->len() - 1 - i];
        ex_str_t r = str(m);
        sbp->replyref(r);
        break;
    }
    case EX_STRUCT: {
        ex_struct_t s;
        s.s = "hello, world!";
        s.u = 34444;
        sbp->replyref(s);
        break;
    }
    case EX_RANDOM2: {
        u_int32_t n = *sbp->Xtmpl getarg<u_int32_t>();
        if (n % 11 == 0)
            sbp->reject(PROC_UNAVAIL);
        else if (n % 13 == 0)
            sbp->reject(AUTH_TOOWEAK);
        else if (n % 17 == 0)
            sbp->reject(SYSTEM_ERR);
        else
            sbp->replyref(n * 3);
        break;
    }
    case EX_PERFTEST:
        sbp->replyref(*sbp->Xtmpl getarg<vsize_t>());
        break;
    default:
        sbp->reject(PROC_UNAVAIL);
    }
}

static void accept_cb(int lfd)
{
    sockaddr_in sin;
    socklen_t len = sizeof(sin);
    int fd = accept(lfd, reinterpret_cast<sockaddr *>(&sin), &len);
    if (fd < 0)
        return;
    make_async(fd);
    tcp_nodelay(fd);
    ref<exconn> c = New refcounted<exconn>;
    c->s = asrv::alloc(axprt_stream::alloc(fd), ex_prog_1, wrap(dispatch, c));
}

int main(int argc, char **argv)
{
    setprogname(argv[0]);
    if (argc != 2)
        fatal << "usage: ex_server PORT\n";
    int lfd = inetsocket(SOCK_STREAM, (u_int16_t)atoi(argv[1]), INADDR_LOOPBACK);
    if (lfd < 0 || listen(lfd, 16) < 0)
        fatal << "cannot listen on port " << argv[1] << "\n";
    make_async(lfd);
    fdcb(lfd, selread, wrap(accept_cb, lfd));
    printf("listening\n");
    fflush(stdout);
    amain();
}
