/* SPDX-License-Identifier: MIT */
/*
 * rawrpc.h: RPC messages (RFC 5531) built and checked byte by byte, for the
 * compat tests' raw peers (arpc_dgram, arpc_unix).
 */
#ifndef MELY_COMPAT_RAWRPC_H
#define MELY_COMPAT_RAWRPC_H

#include <cstring>
#include <string>

#include <arpa/inet.h>

#include "check.h"

static inline void rr_put32(std::string &s, u_int32_t v)
{
    v = htonl(v);
    s.append((const char *)&v, 4);
}

static inline u_int32_t rr_get32(const std::string &s, size_t off)
{
    CHECK(s.size() >= off + 4);
    u_int32_t v;
    memcpy(&v, s.data() + off, 4);
    return ntohl(v);
}

/* A call header with AUTH_NONE credential and verifier. */
static inline std::string rr_call(u_int32_t xid, u_int32_t prog, u_int32_t vers, u_int32_t proc)
{
    std::string s;
    rr_put32(s, xid);
    rr_put32(s, 0); /* CALL */
    rr_put32(s, 2);
    rr_put32(s, prog);
    rr_put32(s, vers);
    rr_put32(s, proc);
    rr_put32(s, 0);
    rr_put32(s, 0);
    rr_put32(s, 0);
    rr_put32(s, 0);
    return s;
}

/* An accepted reply's header with stat; the result is appended by the caller. */
static inline std::string rr_reply(u_int32_t xid, u_int32_t stat)
{
    std::string s;
    rr_put32(s, xid);
    rr_put32(s, 1); /* REPLY */
    rr_put32(s, 0); /* MSG_ACCEPTED */
    rr_put32(s, 0);
    rr_put32(s, 0);
    rr_put32(s, stat);
    return s;
}

/* Checks an accepted reply's header; returns the offset of its result. */
static inline size_t rr_check_accepted(const std::string &r, u_int32_t xid, u_int32_t stat)
{
    CHECK(rr_get32(r, 0) == xid);
    CHECK(rr_get32(r, 4) == 1);
    CHECK(rr_get32(r, 8) == 0);
    CHECK(rr_get32(r, 12) == 0 && rr_get32(r, 16) == 0);
    CHECK(rr_get32(r, 20) == stat);
    return 24;
}

#endif
