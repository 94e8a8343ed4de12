/*
 * amisc.h (mely-compat): libasync-style socket and descriptor helpers.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_AMISC_H
#define MELY_COMPAT_AMISC_H

#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>

/* libasync's amisc.h began with sysconf.h and err.h (and so str.h): a
 * program that includes only amisc.h has str, strbuf, warn, fatal, errno,
 * xmalloc... The original Mely's mely.h, which includes this header too,
 * gave none of them (its programs may use those names). */
#ifndef MELY_COMPAT_LEGACY_MELY_H
#include "sysconf.h"
#include "err.h"
#endif
#include "callback.h"

/* A socket of `type` bound to addr:port (host byte order); SO_REUSEADDR for a
 * TCP socket with a non-zero port; not listening. -1 with errno on failure. */
int inetsocket(int type, u_int16_t port = 0, u_int32_t addr = INADDR_ANY);
/* A Unix stream socket bound to path (not listening); -1 with errno. */
int unixsocket(const char *path);
/* A Unix stream socket connected to path; -1 with errno. */
int unixsocket_connect(const char *path);
void make_async(int fd);
void make_sync(int fd);
void close_on_exec(int fd, bool on = true);
void tcp_nodelay(int fd);

struct tcpconnect_t; /* a handle, as timecb_t (melycompat_loop.h) */
/* Connects to addr:port (port in host byte order) without blocking; cb gets
 * the connected, non-blocking fd, or -1 (errno set). Runs with cb's color. */
tcpconnect_t *tcpconnect(in_addr addr, u_int16_t port, callback<void, int> *cb);
/* Before cb's event started: cb never runs and the socket is closed. After,
 * or a second time: nothing. Any thread. */
void tcpconnect_cancel(tcpconnect_t *tc);

#endif /* MELY_COMPAT_AMISC_H */
