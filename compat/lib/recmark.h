/* SPDX-License-Identifier: MIT */
/*
 * recmark.h: the receiving side of RFC 5531's record marking (section 11),
 * with no I/O, so that axprt_pipe (arpc.cpp) and the fuzzer
 * (compat/fuzz/fuzz_recmark.cpp) run the same code.
 *
 *   rm_next(rec, reclen, ps, buf, n, &used, &out, &outlen, &overlen)
 *     looks at the n bytes buf holds (what was read and not yet taken).
 *     Whole fragments are taken (*used bytes: the caller drops them from its
 *     buffer); those of a record not complete yet are copied to rec (a
 *     malloc'd buffer, reclen bytes so far, kept by the caller between
 *     calls, freed by it at the end).
 *     RM_RECORD: a whole record is at *out (*outlen bytes), in buf or in
 *                rec, valid until the next call or the buffer changes;
 *     RM_MORE:   the rest of the record is not here yet;
 *     RM_OVER:   the record is over ps bytes (*overlen: its size so far,
 *                the fragment's header counted): the stream is to be closed.
 *   A fragment's length is never trusted: the bound is checked on the
 *   header, before anything is waited for or allocated.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_RECMARK_H
#define MELY_COMPAT_RECMARK_H

#include <cstdint>
#include <cstdlib>
#include <cstring>

enum rm_result { RM_RECORD, RM_MORE, RM_OVER };

inline rm_result rm_next(char *&rec, size_t &reclen, size_t ps, const char *buf, size_t n,
                         size_t *used, const char **out, size_t *outlen, size_t *overlen)
{
    size_t off = 0;
    *used = 0;
    while (n - off >= 4) {
        const unsigned char *h = reinterpret_cast<const unsigned char *>(buf + off);
        uint32_t hdr = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
        size_t flen = hdr & 0x7fffffffu;
        bool last = (hdr & 0x80000000u) != 0;
        if (flen > ps || reclen > ps - flen) {
            *overlen = reclen + flen;
            return RM_OVER;
        }
        if (n - off - 4 < flen)
            break; /* the fragment is not all here */
        const char *frag = buf + off + 4;
        off += 4 + flen;
        *used = off;
        if (last && !reclen) {
            *out = frag;
            *outlen = flen;
            return RM_RECORD;
        }
        char *nr = static_cast<char *>(realloc(rec, reclen + flen + 1));
        if (!nr)
            abort(); /* out of memory (reclen + flen <= ps) */
        rec = nr;
        if (flen)
            memcpy(rec + reclen, frag, flen);
        reclen += flen;
        if (last) {
            *out = rec;
            *outlen = reclen;
            reclen = 0;
            return RM_RECORD;
        }
    }
    return RM_MORE;
}

#endif /* MELY_COMPAT_RECMARK_H */
