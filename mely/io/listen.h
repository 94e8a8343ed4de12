/* SPDX-License-Identifier: MIT */
/*
 * io/listen.h: listeners (internal; the design is in io/listen.c, which
 * works only through the public API).
 */
#ifndef MELY_IO_LISTEN_H
#define MELY_IO_LISTEN_H

#include <sys/socket.h>

struct mely__rt;

/* A numeric IPv4 or IPv6 host (NULL: 127.0.0.1) and port as a socket
 * address: 0, or MELY_EINVAL for anything else (no name is resolved).
 * Also mely_stream_connect's. */
int mely__parse_addr(const char *host, unsigned port, struct sockaddr_storage *ss, socklen_t *len);

/* Closes the listeners left at shutdown (no worker running). */
void mely__listeners_free(struct mely__rt *rt);

/* Pauses every listener of rt (mely_drain). Any thread. */
void mely__listeners_pause(struct mely__rt *rt);

#endif
