/* SPDX-License-Identifier: MIT */
/*
 * arc4.h (mely-compat): the RC4 ("arcfour") keystream generator of SFS's
 * crypto library (sfscrypt), with its interface and its output, for the
 * libasync programs and tests that use it as a seeded pseudo-random source
 * (sfslite's test_bitvec and test_bbuddy do).
 *
 *   arc4 a;                     the identity permutation, unkeyed
 *   a.setkey(key, len)          mixes len bytes of key into the state; calls
 *                               accumulate (setkey(k1); setkey(k2) is not
 *                               setkey(k2))
 *   a.getbyte()                 the next byte of the stream
 *   a.reset()                   back to the unkeyed state
 *
 * RC4 as published: a permutation S of the 256 byte values and two indexes;
 * a key pass runs the key-scheduling step 256 times (i advancing, j += S[i] +
 * the next key byte, cycling through the key, S[i] and S[j] swapped) and a
 * byte of the stream is one generation step (i advancing, j += S[i], swap,
 * out S[S[i] + S[j]]). SFS's variant, kept here for equal output: the
 * indexes carry over from one step to the next, through key passes as well
 * (a fresh generator has i = 255, j = 0, so the first pass starts at i = 0 as
 * RC4's does), and each setkey ends with j = i. A key longer than 128 bytes is
 * mixed in as successive passes over 128-byte pieces, every byte counting;
 * such keys give other output than sfscrypt's arc4, whose setkey skipped
 * their first 128 bytes (see doc/porting.md). For keys of up to 128 bytes
 * the output is sfscrypt's, byte for byte.
 *
 * RC4 is not a secure cipher or random generator today: use it for
 * reproducible test data, never for secrets. One generator per color (or a
 * lock). Written for mely from the published algorithm; no line comes from
 * SFS.
 */
#ifndef MELY_COMPAT_ARC4_H
#define MELY_COMPAT_ARC4_H

#include <stddef.h>
#include <string.h>
#include <sys/types.h>

class arc4 {
    u_char i;
    u_char j;
    u_char s[256];

    /* One key pass over n (1..128) key bytes. */
    void key_pass(const u_char *key, size_t n)
    {
        size_t k = 0;
        for (int step = 0; step < 256; step++) {
            i = (u_char)(i + 1);
            u_char si = s[i];
            j = (u_char)(j + si + key[k]);
            s[i] = s[j];
            s[j] = si;
            if (++k == n)
                k = 0;
        }
    }

public:
    arc4() { reset(); }
    ~arc4()
    {
        i = j = 0;
        explicit_bzero(s, sizeof s);
    }

    void reset()
    {
        i = 0xff;
        j = 0;
        for (int n = 0; n < 256; n++)
            s[n] = (u_char)n;
    }

    void setkey(const void *key, size_t len)
    {
        const u_char *k = static_cast<const u_char *>(key);
        while (len > 0) {
            size_t n = len > 128 ? 128 : len;
            key_pass(k, n);
            k += n;
            len -= n;
        }
        j = i;
    }

    u_char getbyte()
    {
        i = (u_char)(i + 1);
        u_char si = s[i];
        j = (u_char)(j + si);
        u_char sj = s[j];
        s[i] = sj;
        s[j] = si;
        return s[(u_char)(si + sj)];
    }
};

#endif /* MELY_COMPAT_ARC4_H */
