/* SPDX-License-Identifier: MIT */
/*
 * demo_client: an RPC client written the way SFS clients are (tcpconnect,
 * aclnt::alloc, c->call with wrap'd callbacks chained one after the other),
 * against demo_server. Checks every answer; prints "demo_client: all ok"
 * and exits 0, or says what failed and exits 1.
 *
 *   demo_client port [null-calls]
 */
#include "arpc.h"
#include "demo_prot.h"

static ptr<aclnt> g_c;
static int g_port;
static int g_nulls = 1000;

static void check(bool ok, const char *what)
{
    if (!ok)
        fatal << "FAILED: " << what << "\n";
}

static void step_wrongvers(clnt_stat err);
static void step_timeout(clnt_stat err);

static void step_done(clnt_stat err)
{
    check(err == RPC_PROCUNAVAIL, "an unknown procedure gives RPC_PROCUNAVAIL");
    warnx << "demo_client: all ok\n";
    exit(0);
}

static void step_timeout(clnt_stat err)
{
    check(err == RPC_TIMEDOUT, "DEMO_SILENT times out");
    /* Procedure 99 is not in the table: a raw call with our own xdr functions. */
    g_c->call(99, NULL, NULL, wrap(step_done), NULL, xdr_void, xdr_void);
}

static void step_wrongvers(clnt_stat err)
{
    check(err == RPC_PROGVERSMISMATCH, "version 9 gives RPC_PROGVERSMISMATCH");
    g_c->timedcall(1, DEMO_SILENT, NULL, NULL, wrap(step_timeout));
}

static void step_later(int32_t *res, clnt_stat err)
{
    check(err == RPC_SUCCESS && *res == 42, "DEMO_LATER(41) = 42 (answered from another color)");
    delete res;
    g_c->call(DEMO_NULL, NULL, NULL, wrap(step_wrongvers), NULL, NULL, NULL, 0, 9);
}

static void step_echo(demo_blob *res, clnt_stat err)
{
    check(err == RPC_SUCCESS && res->size() == 60000, "DEMO_ECHO of 60000 bytes");
    for (size_t i = 0; i < res->size(); i++)
        check((*res)[i] == (char)(i * 7), "DEMO_ECHO's bytes");
    delete res;
    int32_t *out = New int32_t(0);
    int32_t arg = 41;
    g_c->call(DEMO_LATER, &arg, out, wrap(step_later, out));
}

static void step_stats(demo_stats *st, clnt_stat err)
{
    check(err == RPC_SUCCESS, "DEMO_STATS");
    check(st->calls >= 5 + (unsigned)g_nulls, "DEMO_STATS counts the calls");
    check(st->color != 0, "the connection is served on a color of its own");
    delete st;
    demo_blob arg;
    arg.setsize(60000);
    for (size_t i = 0; i < arg.size(); i++)
        arg[i] = (char)(i * 7);
    demo_blob *res = New demo_blob;
    g_c->call(DEMO_ECHO, &arg, res, wrap(step_echo, res));
}

static void step_lookup2(demo_lookup_res *res, clnt_stat err)
{
    check(err == RPC_SUCCESS && res->stat == DEMO_NOTFOUND, "DEMO_LOOKUP(nothing)");
    delete res;
    demo_stats *st = New demo_stats;
    g_c->call(DEMO_STATS, NULL, st, wrap(step_stats, st));
}

static void step_lookup(demo_lookup_res *res, clnt_stat err)
{
    check(err == RPC_SUCCESS && res->stat == DEMO_OK && *res->value == 0x123456789abcdefULL,
          "DEMO_LOOKUP(big)");
    delete res;
    demo_name n = "nothing";
    demo_lookup_res *r2 = New demo_lookup_res;
    g_c->call(DEMO_LOOKUP, &n, r2, wrap(step_lookup2, r2));
}

static void step_reverse(demo_name *res, clnt_stat err)
{
    check(err == RPC_SUCCESS && *res == "olleh", "DEMO_REVERSE(hello)");
    delete res;
    demo_name n = "big";
    demo_lookup_res *r = New demo_lookup_res;
    g_c->call(DEMO_LOOKUP, &n, r, wrap(step_lookup, r));
}

static void step_add(int32_t *res, clnt_stat err)
{
    check(err == RPC_SUCCESS && *res == -5, "DEMO_ADD(2, -7) = -5");
    delete res;
    demo_name n = "hello";
    demo_name *r = New demo_name;
    g_c->call(DEMO_REVERSE, &n, r, wrap(step_reverse, r));
}

static struct timespec g_t0;
static int g_done;

static void null_done(clnt_stat err)
{
    check(err == RPC_SUCCESS, "DEMO_NULL");
    if (++g_done < g_nulls)
        return;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - g_t0.tv_sec) + (t1.tv_nsec - g_t0.tv_nsec) / 1e9;
    warnx("demo_client: %d null calls (10 at a time) in %.3f s\n", g_nulls, s);
    demo_pair p;
    p.a = 2;
    p.b = -7;
    int32_t *res = New int32_t(0);
    g_c->call(DEMO_ADD, &p, res, wrap(step_add, res));
}

static void null_next(clnt_stat err)
{
    null_done(err);
    static int sent = 10;
    if (sent < g_nulls) {
        sent++;
        g_c->call(DEMO_NULL, NULL, NULL, wrap(null_next));
    }
}

static void connected(int fd)
{
    if (fd < 0)
        fatal("connect to port %d: %m\n", g_port);
    ref<axprt_stream> x = axprt_stream::alloc(fd);
    g_c = aclnt::alloc(x, demo_prog_1);
    check(g_c != NULL, "aclnt::alloc");
    clock_gettime(CLOCK_MONOTONIC, &g_t0);
    for (int i = 0; i < 10 && i < g_nulls; i++)
        g_c->call(DEMO_NULL, NULL, NULL, wrap(null_next));
}

int main(int argc, char **argv)
{
    setprogname(argv[0]);
    if (argc < 2)
        fatal("usage: demo_client port [null-calls]\n");
    g_port = atoi(argv[1]);
    if (argc > 2)
        g_nulls = atoi(argv[2]);
    if (g_nulls < 10)
        g_nulls = 10;
    in_addr a;
    a.s_addr = htonl(INADDR_LOOPBACK);
    tcpconnect(a, (u_int16_t)g_port, wrap(connected));
    amain();
}
