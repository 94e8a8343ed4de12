/* SPDX-License-Identifier: MIT */
/*
 * rpc_load.C: bench/e2e/run-rpc.sh's client, written as SFS code is
 * (aclnt::call with wrap); it builds on mely-compat and on sfslite's
 * libasync. CLIENTS connections, each a closed loop of one call at a time:
 * RPCBENCH_NULL (null), or RPCBENCH_SINK with a 64 KB argument (64k).
 * After a warm-up, it counts the calls answered in a window and prints
 *   rpc_load: calls=N seconds=S rps=R mbps=M errors=E
 * (mbps: argument megabytes, 10^6 bytes, per second).
 *   rpc_load PORT CLIENTS null|64k SECONDS [WARMUP_MS]
 * Written for mely; no line comes from libasync.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <atomic>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "async.h"
#include "arpc.h"
#include "rpcbench_prot.h"

static bool big;
static int nclients;
static std::atomic<int> connected_n{0};
static std::atomic<unsigned long> calls{0}, errors{0};
static unsigned long calls0;
static double t0;
static rpcbench_data arg64k;

struct lconn {
    ptr<aclnt> c;
    u_int32_t res;
};

static double now()
{
    timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec / 1e6;
}

static void issue(ref<lconn> l);

static void done(ref<lconn> l, clnt_stat err)
{
    if (err) {
        errors++;
        return;
    }
    calls++;
    issue(l);
}

static void issue(ref<lconn> l)
{
    if (big)
        l->c->call(RPCBENCH_SINK, &arg64k, &l->res, wrap(done, l));
    else
        l->c->call(RPCBENCH_NULL, NULL, NULL, wrap(done, l));
}

static void window_end()
{
    double secs = now() - t0;
    unsigned long n = calls.load() - calls0;
    printf("rpc_load: calls=%lu seconds=%.3f rps=%.0f mbps=%.1f errors=%lu\n", n, secs, n / secs,
           big ? n * 65536.0 / secs / 1e6 : 0.0, errors.load());
    fflush(stdout);
    exit(errors.load() ? 1 : 0);
}

static void window_start(int secs)
{
    t0 = now();
    calls0 = calls.load();
    delaycb(secs, 0, wrap(window_end));
}

static void connected(int secs, int warmup_ms, int fd)
{
    if (fd < 0)
        fatal << "cannot connect\n";
    tcp_nodelay(fd);
    ref<lconn> l = New refcounted<lconn>;
    l->c = aclnt::alloc(axprt_stream::alloc(fd), rpcbench_prog_1);
    issue(l);
    if (++connected_n == nclients)
        delaycb(warmup_ms / 1000, (warmup_ms % 1000) * 1000000, wrap(window_start, secs));
}

int main(int argc, char **argv)
{
    setprogname(argv[0]);
    if (argc < 5)
        fatal << "usage: rpc_load PORT CLIENTS null|64k SECONDS [WARMUP_MS]\n";
    int port = atoi(argv[1]);
    nclients = atoi(argv[2]);
    big = strcmp(argv[3], "64k") == 0;
    int secs = atoi(argv[4]);
    int warmup_ms = argc > 5 ? atoi(argv[5]) : 500;
    arg64k.setsize(65536);
    for (size_t i = 0; i < 65536; i++)
        arg64k[i] = (char)i;
    in_addr a;
    a.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < nclients; i++)
        tcpconnect(a, (u_int16_t)port, wrap(connected, secs, warmup_ms));
    amain();
}
