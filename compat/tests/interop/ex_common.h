/* SPDX-License-Identifier: MIT */
/*
 * ex_common.h: what ex_server.C and ex_client.C share. Both are written
 * against libasync's interface only, so that the same sources build on
 * sfslite's libasync+arpc and on mely-compat (sfslite-arpc-interop.sh).
 * Written for mely; no line comes from libasync.
 */
#ifndef EX_COMMON_H
#define EX_COMMON_H

#include <stdio.h>

#include "async.h"
#include "arpc.h"
#include "ex_prot.h"

/* A value, as xdr encodes it, in hex (the transcripts compare these). */
template <class P> static str ex_hex(P proc, const void *v)
{
    xdrsuio x(XDR_ENCODE);
    if (!proc(x.xdrp(), const_cast<void *>(v)))
        return "(does not encode)";
    static const char digits[] = "0123456789abcdef";
    strbuf sb;
    const iovec *iov = x.iov();
    for (u_int i = 0; i < x.iovcnt(); i++) {
        const unsigned char *p = static_cast<const unsigned char *>(iov[i].iov_base);
        for (size_t j = 0; j < iov[i].iov_len; j++) {
            char h[3] = {digits[p[j] >> 4], digits[p[j] & 15], 0};
            sb << h;
        }
    }
    return sb;
}

#endif
