/* SPDX-License-Identifier: MIT */
/*
 * crypt.h (mely-compat): of sfscrypt's crypt.h, only its random number
 * generator `rnd` (libasync programs and tests draw random numbers with
 * rnd.getword()). sfscrypt's keys, hashes and ciphers are not here.
 *
 * This header has the C library's name: it includes the system's <crypt.h>
 * first (crypt(3), when the system has it), so a program that included
 * <crypt.h> for crypt() keeps it. In a program written for the original
 * Mely (its mely.h included first), it adds nothing: that runtime had no
 * crypt.h, so the name was the C library's alone.
 *
 *   rnd.getword(), rnd.gethyper(), rnd.getbytes(p, n)
 *                        32 and 64 random bits, n random bytes, from the
 *                        kernel (getrandom): not reproducible from run to run
 *                        (sfscrypt's generator repeated itself until seeded
 *                        by random_init(), which is not here).
 *
 * Written for mely; no line comes from sfscrypt.
 */
#if defined(__has_include_next)
#if __has_include_next(<crypt.h>)
#include_next <crypt.h>
#endif
#endif

#ifndef MELY_COMPAT_CRYPT_H
#define MELY_COMPAT_CRYPT_H

#ifndef MELY_COMPAT_LEGACY_MELY_H

#include <cstddef>
#include <sys/types.h>

class prng {
public:
    /* Exits with a message if the kernel gives no random bytes. Any thread. */
    void getbytes(void *buf, std::size_t n);
    u_int32_t getword()
    {
        u_int32_t w;
        getbytes(&w, sizeof w);
        return w;
    }
    u_int64_t gethyper()
    {
        u_int64_t h;
        getbytes(&h, sizeof h);
        return h;
    }
};

extern prng rnd;

#endif /* !MELY_COMPAT_LEGACY_MELY_H */
#endif /* MELY_COMPAT_CRYPT_H */
