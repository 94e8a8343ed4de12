/* SPDX-License-Identifier: MIT */
/*
 * stllike.h (mely-compat): the small global templates libasync programs call
 * unqualified: min(a, b), max(a, b) (references to the smaller / larger of
 * two values of one type) and implicit_cast<T>(x) (a conversion that only
 * compiles where an implicit one would).
 *
 * As with libasync, a program that also says `using namespace std;` gets an
 * ambiguous call from an unqualified min(a, b); write ::min or std::min.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_STLLIKE_H
#define MELY_COMPAT_STLLIKE_H

#undef min
#undef max

template <class T> inline const T &min(const T &a, const T &b)
{
    return b < a ? b : a;
}

template <class T> inline const T &max(const T &a, const T &b)
{
    return b < a ? a : b;
}

template <class R> inline R implicit_cast(R r)
{
    return r;
}

#endif /* MELY_COMPAT_STLLIKE_H */
