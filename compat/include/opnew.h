/* SPDX-License-Identifier: MIT */
/*
 * opnew.h (mely-compat): libasync's allocation macros (vec.h includes it, as
 * libasync's did).
 *
 *   New, vNew               `new` and `(void) new` (as refcnt.h defines them)
 *   ntNew                   `new (nothrow)`: NULL rather than an exception
 *   opnew(n)                `operator new(n)`: n raw bytes
 *   nothrow                 std::nothrow, in the global namespace
 *   destroy_return(t)       a copy of t, after which t is destroyed (its
 *                           storage is left for the caller to reuse or free);
 *                           for a pointer T *&, the pointer itself
 *
 * libasync's DMALLOC and SIMPLE_LEAK_CHECKER forms (New recording file and
 * line) are absent: use the sanitizers.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_OPNEW_H
#define MELY_COMPAT_OPNEW_H

#include <new>

using std::nothrow;

#ifndef New
#define New new
#endif
#ifndef vNew
#define vNew (void) new
#endif
#define ntNew new (nothrow)
#define opnew(size) operator new(size)

template <class T> inline T destroy_return(T &t)
{
    T ret(t);
    t.~T();
    return ret;
}

template <class T> inline T *destroy_return(T *&tp)
{
    return tp;
}

#endif /* MELY_COMPAT_OPNEW_H */
