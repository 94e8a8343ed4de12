/* SPDX-License-Identifier: MIT */
/*
 * ex_client.C: a client of sfslite's tutorial/ex_prot.x that calls every
 * procedure, one call at a time, and prints each call's clnt_stat (as a
 * number) and result (as XDR in hex): the transcript sfslite-arpc-interop.sh
 * compares across sfslite's libasync and mely-compat, as client and as
 * server. Written as SFS code is (aclnt::call with wrap); it builds
 * unchanged on both.
 *   ex_client PORT        connects to 127.0.0.1:PORT
 * Calls: EX_NULL; EX_RANDOM three times; EX_REVERSE of "hello, world", "",
 * 255 bytes (the bound), 256 bytes (RPC_CANTENCODEARGS), 300 bytes sent as
 * a vsize_t (the server: GARBAGE_ARGS), and of "abc" with the result read
 * as an ex_struct_t (RPC_CANTDECODERES); EX_STRUCT; EX_RANDOM2 of 5, 22, 26,
 * 34 (a result, PROC_UNAVAIL, AUTH_TOOWEAK, SYSTEM_ERR); EX_PERFTEST of 0,
 * 1, 1000 and 65536 bytes (a 64 KB opaque); procedure 9 (PROC_UNAVAIL),
 * version 2 (PROG_MISMATCH), program 31314 (PROG_UNAVAIL).
 * Written for mely; no line comes from libasync.
 */
#include "ex_common.h"

#include <netinet/in.h>
#include <arpa/inet.h>

static ptr<aclnt> clnt;
static int step;

/* The results of the call in flight (one at a time). */
static ex_str_t r_str;
static int r_int;
static u_int32_t r_uint;
static ex_struct_t r_struct;
static vsize_t r_vsize;
static ex_str_t a_str;
static u_int32_t a_uint;
static vsize_t a_vsize;

static void next();

template <class P> static void done(const char *what, P proc, const void *res, clnt_stat err)
{
    if (err)
        printf("%s stat=%d\n", what, (int)err);
    else
        printf("%s stat=0 res=%s\n", what, proc ? ex_hex(proc, res).cstr() : "");
    fflush(stdout);
    next();
}

static void done_void(const char *what, clnt_stat err)
{
    done(what, xdr_void, NULL, err);
}
static void done_str(const char *what, clnt_stat err)
{
    done(what, xdr_ex_str_t, &r_str, err);
}
static void done_int(const char *what, clnt_stat err)
{
    done(what, xdr_int, &r_int, err);
}
static void done_uint(const char *what, clnt_stat err)
{
    done(what, xdr_u_int32_t, &r_uint, err);
}
static void done_struct(const char *what, clnt_stat err)
{
    done(what, xdr_ex_struct_t, &r_struct, err);
}
static void done_vsize(const char *what, clnt_stat err)
{
    done(what, xdr_vsize_t, &r_vsize, err);
}

static str pattern(size_t n)
{
    mstr m(n);
    for (size_t i = 0; i < n; i++)
        m.cstr()[i] = (char)('a' + (i * 7) % 26);
    return m;
}

static void perftest(const char *what, size_t n)
{
    a_vsize.buf.setsize(n);
    for (size_t i = 0; i < n; i++)
        a_vsize.buf[i] = (char)(i * 131 + 7);
    clnt->call(EX_PERFTEST, &a_vsize, &r_vsize, wrap(done_vsize, what));
}

static void next()
{
    switch (step++) {
    case 0:
        clnt->call(EX_NULL, NULL, NULL, wrap(done_void, "EX_NULL"));
        break;
    case 1:
    case 2:
    case 3:
        clnt->call(EX_RANDOM, NULL, &r_int, wrap(done_int, "EX_RANDOM"));
        break;
    case 4:
        a_str = "hello, world";
        clnt->call(EX_REVERSE, &a_str, &r_str, wrap(done_str, "EX_REVERSE hello"));
        break;
    case 5:
        a_str = "";
        clnt->call(EX_REVERSE, &a_str, &r_str, wrap(done_str, "EX_REVERSE empty"));
        break;
    case 6:
        a_str = pattern(255);
        clnt->call(EX_REVERSE, &a_str, &r_str, wrap(done_str, "EX_REVERSE 255"));
        break;
    case 7: {
        /* Over the bound: the client does not encode it (a string of
         * 1000 bytes at most, which is laid out as an ex_str_t, given to
         * EX_REVERSE's xdr_ex_str_t). */
        static rpc_str<1000> big;
        big = pattern(256);
        clnt->call(EX_REVERSE, &big, &r_str, wrap(done_str, "EX_REVERSE 256"));
        break;
    }
    case 8:
        /* 300 bytes on the wire as a string: the server cannot decode it. */
        a_vsize.buf.setsize(300);
        for (size_t i = 0; i < 300; i++)
            a_vsize.buf[i] = 'x';
        clnt->call(EX_REVERSE, &a_vsize, &r_str, wrap(done_str, "EX_REVERSE 300"), NULL,
                   xdr_vsize_t);
        break;
    case 9:
        /* A result that is not an ex_struct_t. */
        a_str = "abc";
        clnt->call(EX_REVERSE, &a_str, &r_struct, wrap(done_struct, "EX_REVERSE as struct"),
                   NULL, NULL, xdr_ex_struct_t);
        break;
    case 10:
        clnt->call(EX_STRUCT, NULL, &r_struct, wrap(done_struct, "EX_STRUCT"));
        break;
    case 11:
    case 12:
    case 13:
    case 14: {
        static const u_int32_t v[] = {5, 22, 26, 34};
        static const char *const names[] = {"EX_RANDOM2 5", "EX_RANDOM2 22", "EX_RANDOM2 26",
                                            "EX_RANDOM2 34"};
        a_uint = v[step - 12];
        clnt->call(EX_RANDOM2, &a_uint, &r_uint, wrap(done_uint, names[step - 12]));
        break;
    }
    case 15:
        perftest("EX_PERFTEST 0", 0);
        break;
    case 16:
        perftest("EX_PERFTEST 1", 1);
        break;
    case 17:
        perftest("EX_PERFTEST 1000", 1000);
        break;
    case 18:
        perftest("EX_PERFTEST 65536", 65536);
        break;
    case 19:
        clnt->call(9, NULL, NULL, wrap(done_void, "procedure 9"), NULL, xdr_void, xdr_void,
                   EX_PROG, EX_VERS);
        break;
    case 20:
        clnt->call(EX_NULL, NULL, NULL, wrap(done_void, "version 2"), NULL, xdr_void, xdr_void,
                   EX_PROG, 2);
        break;
    case 21:
        clnt->call(EX_NULL, NULL, NULL, wrap(done_void, "program 31314"), NULL, xdr_void,
                   xdr_void, 31314, EX_VERS);
        break;
    default:
        printf("done\n");
        fflush(stdout);
        exit(0);
    }
}

static void connected(int fd)
{
    if (fd < 0)
        fatal << "cannot connect\n";
    tcp_nodelay(fd);
    clnt = aclnt::alloc(axprt_stream::alloc(fd), ex_prog_1);
    next();
}

int main(int argc, char **argv)
{
    setprogname(argv[0]);
    if (argc != 2)
        fatal << "usage: ex_client PORT\n";
    in_addr a;
    a.s_addr = htonl(INADDR_LOOPBACK);
    tcpconnect(a, (u_int16_t)atoi(argv[1]), wrap(connected));
    amain();
}
