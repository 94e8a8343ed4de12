/* SPDX-License-Identifier: MIT */
/*
 * msb.h (mely-compat): libasync's bit-position helpers (vec.h includes it, as
 * libasync's did). Bits are numbered from 1; 0 means "no bit set".
 *
 *   fls32(v), fls64(v)      the position of the most significant set bit
 *                           (fls32(1) == 1, fls32(0x80000000) == 32, 0 for 0)
 *   ffs32(v), ffs64(v)      the position of the least significant set bit
 *                           (ffs32(12) == 3, 0 for 0)
 *   log2c32(v), log2c64(v)  the ceiling of log2(v): the smallest k with
 *                           2^k >= v (log2c32(1) == 0, log2c32(5) == 3);
 *                           -1 for 0
 *   fls(v), ffs(v), log2c(v)   the 64-bit form for an argument wider than
 *                           4 bytes, else the 32-bit one (a negative int is
 *                           taken as its 32-bit pattern: fls(-1) == 32)
 *
 * libasync made fls, ffs and log2c macros; here they are function templates
 * (an identifier named fls elsewhere is left alone). ffs(int) is glibc's
 * function, with the same result. libasync's ffs64 returned the MOST
 * significant bit of the lowest non-zero 32-bit half; this one returns what
 * its name says (see doc/porting.md). libasync's lookup tables (bytemsb,
 * bytelsb) are not provided. Pure functions: any thread.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_MSB_H
#define MELY_COMPAT_MSB_H

#include <stdint.h>
#include <sys/types.h>

inline u_int fls32(uint32_t v)
{
    return v ? 32u - (u_int)__builtin_clz(v) : 0u;
}

inline u_int fls64(uint64_t v)
{
    return v ? 64u - (u_int)__builtin_clzll(v) : 0u;
}

inline u_int ffs32(uint32_t v)
{
    return v ? (u_int)__builtin_ctz(v) + 1u : 0u;
}

inline u_int ffs64(uint64_t v)
{
    return v ? (u_int)__builtin_ctzll(v) + 1u : 0u;
}

inline int log2c32(uint32_t v)
{
    return v ? (int)fls32(v - 1) : -1;
}

inline int log2c64(uint64_t v)
{
    return v ? (int)fls64(v - 1) : -1;
}

template <class T> inline u_int fls(T v)
{
    return sizeof(T) > 4 ? fls64((uint64_t)v) : fls32((uint32_t)v);
}

template <class T> inline u_int ffs(T v)
{
    return sizeof(T) > 4 ? ffs64((uint64_t)v) : ffs32((uint32_t)v);
}

template <class T> inline int log2c(T v)
{
    return sizeof(T) > 4 ? log2c64((uint64_t)v) : log2c32((uint32_t)v);
}

#endif /* MELY_COMPAT_MSB_H */
