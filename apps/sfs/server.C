/* SPDX-License-Identifier: MIT */
/*
 * server.C: the listening socket and accept (color 0), reply buffers, and the
 * statistics line printed at exit.
 */
#include "apps/sfs/sfsd.h"

#include <sys/socket.h>

#include <mely/mely.h>

/* Connections get colors 1..CONN_COLORS in turn; color 0 is dispatch's. */
static const unsigned CONN_COLORS = 4096;
/* accept() calls per readiness of the listening socket: others' turn after. */
static const int ACCEPT_BATCH = 32;
/* Out of descriptors, accept pauses this long (ms) rather than spin on a
 * listening socket that stays readable. */
static const unsigned ACCEPT_BACKOFF_MS = 100;

sfs_out *sfs_out_new(size_t plain)
{
    sfs_out *o = static_cast<sfs_out *>(malloc(sizeof(sfs_out) + SFS_LENGTH + plain + SFS_TAG));
    if (o) {
        o->buf = reinterpret_cast<uint8_t *>(o + 1);
        o->plain = plain;
        o->frame = o->sent = 0;
    }
    return o;
}

void sfs_out_free(sfs_out *out)
{
    free(out);
}

static void on_accept(int lfd);

static void listen_again(int lfd)
{
    fdcb(lfd, selread, wrap(on_accept, lfd));
}

/* One new connection from addr: admitted by the table (table.C), which may
 * evict a connection in its handshake to make room, or refused; then its
 * own color, reading from now on. */
static void serve(int fd, uint32_t addr)
{
    static unsigned next_color;
    if (!sfs_table_admit(addr)) {
        g_stats.refused.fetch_add(1, std::memory_order_relaxed);
        ::close(fd);
        return;
    }
    tcp_nodelay(fd);
    g_stats.conns.fetch_add(1, std::memory_order_relaxed);
    ref<sfsconn> c = mkref(New sfsconn(fd, (int)(1 + next_color++ % CONN_COLORS), addr));
    sfs_table_add(c);
    c->start();
}

static void on_accept(int lfd)
{
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        sockaddr_in peer{};
        socklen_t plen = sizeof peer;
        int fd = accept4(lfd, reinterpret_cast<sockaddr *>(&peer), &plen,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            serve(fd, peer.sin_addr.s_addr);
            continue;
        }
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            /* main.C sizes max_conns to the descriptor limit, but handles
             * take descriptors too: a connection still in its handshake
             * gives its own back, so that the next accept finds one. */
            if (errno == EMFILE || errno == ENFILE)
                sfs_table_evict_oldest();
            warn << "accept: " << strerror(errno) << ": pausing " << ACCEPT_BACKOFF_MS << " ms\n";
            fdcb(lfd, selread, nullptr);
            delaycb(0, ACCEPT_BACKOFF_MS * 1000000u, wrap(listen_again, lfd));
        }
        return; /* EAGAIN, or a connection that died in the queue */
    }
}

unsigned sfsd_listen()
{
    in_addr a;
    if (inet_pton(AF_INET, g_opt.addr.c_str(), &a) != 1)
        fatal << "bad address " << g_opt.addr.c_str() << " (an IPv4 address is expected)\n";
    int lfd = inetsocket(SOCK_STREAM, (u_int16_t)g_opt.port, ntohl(a.s_addr));
    if (lfd < 0 || listen(lfd, 1024) != 0)
        fatal << "cannot listen on " << g_opt.addr.c_str() << ":" << g_opt.port << ": " << strerror(errno) << "\n";
    make_async(lfd);
    close_on_exec(lfd);
    sockaddr_in sin{};
    socklen_t len = sizeof sin;
    getsockname(lfd, reinterpret_cast<sockaddr *>(&sin), &len);
    listen_again(lfd);
    return ntohs(sin.sin_port);
}

static unsigned long get(const std::atomic<unsigned long> &c)
{
    return c.load(std::memory_order_relaxed);
}

void sfsd_print_stats()
{
    mely_t *m = mely_compat_runtime();
    unsigned long steals = 0, stolen = 0;
    for (unsigned w = 0; w < mely_workers(m); w++) {
        mely_stats_t st;
        if (mely_worker_stats(m, w, &st) == 0)
            steals += st.steals, stolen += st.stolen_events;
    }
    printf("sfsd: connections %lu (closed %lu, refused %lu), requests %lu, read %.1f MB, "
           "steals %lu (events %lu), paused %lu; evicted %lu, timeouts: handshake %lu, idle %lu; "
           "errors: hello %lu, frame %lu, request %lu, oversize %lu, io %lu\n",
           get(g_stats.conns), get(g_stats.closed), get(g_stats.refused), get(g_stats.requests),
           (double)get(g_stats.bytes_read) / 1e6, steals, stolen, get(g_stats.paused),
           get(g_stats.evicted), get(g_stats.handshake_timeouts), get(g_stats.idle_timeouts),
           get(g_stats.bad_hello), get(g_stats.bad_frame), get(g_stats.bad_request),
           get(g_stats.oversize), get(g_stats.io_errors));
    fflush(stdout);
}
