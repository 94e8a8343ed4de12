/* SPDX-License-Identifier: MIT */
/*
 * keyfunc.h (mely-compat): hashing and comparison of keys, libasync-style.
 *
 *   hash_t                 a 32-bit hash value; a class with `operator hash_t()`
 *                          is hashable (str is).
 *   hash_bytes(p, n, seed) hash of n bytes; hash_string(p, seed) hash of a C
 *                          string, equal to hash_bytes(p, strlen(p), seed).
 *   hashfn<K>, equals<K>, compare<K>
 *                          the default function objects of the hash tables
 *                          (qhash.h, ihash.h): hashfn converts the key to
 *                          hash_t (integers, classes with operator hash_t),
 *                          equals uses ==, compare < (returns -1, 0 or 1).
 *                          C strings (char *, const char *...) hash and
 *                          compare by contents. Other pointers have no
 *                          hashfn or compare (as in libasync: hashing an
 *                          address by accident does not compile).
 *   keyfunc_1<R, V, K, &V::key, F>, keyfunc_2<R, V, K, &V::key, F>
 *                          R f(const V &) / R f(const V &, const V &):
 *                          F applied to the key member of the object(s)
 *   CREF(T), NCREF(T), UNREF(T), UNCREF(T)
 *                          const reference, non-const reference, T without
 *                          its reference, T without reference or const.
 *
 * The hash functions are libasync's (same values: programs print them, and
 * tables iterate in an order that follows from them). hash2fn is h1 ^ h2,
 * as libasync's. Pure functions: any thread.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_KEYFUNC_H
#define MELY_COMPAT_KEYFUNC_H

#include <cstring>
#include <sys/types.h>

template <class T> struct unref_t {
    typedef T base_type;
    typedef T unref_type;
    typedef const T &ref_type;
    typedef T &ncref_type;
};
template <class T> struct unref_t<const T> : unref_t<T> {
    typedef const T unref_type;
};
template <class T> struct unref_t<T &> : unref_t<T> {};
template <class T> struct unref_t<const T &> : unref_t<const T> {};

#define CREF(T) unref_t<T>::ref_type
#define NCREF(T) unref_t<T>::ncref_type
#define UNREF(T) unref_t<T>::unref_type
#define UNCREF(T) unref_t<T>::base_type

/* libasync's hash (Bernstein's, with xor): h = 33 * h ^ byte from 5381, so
 * that the same keys give the same values, and tables the same order, as
 * in libasync. */
#define HASHSEED 5381

inline u_int hash_bytes(const void *key, int len, u_int seed = HASHSEED)
{
    const unsigned char *p = static_cast<const unsigned char *>(key);
    for (int i = 0; i < len; i++)
        seed = (seed * 33u) ^ p[i];
    return seed;
}

inline u_int hash_string(const void *s, u_int seed = HASHSEED)
{
    for (const unsigned char *p = static_cast<const unsigned char *>(s); *p; p++)
        seed = (seed * 33u) ^ *p;
    return seed;
}

inline u_int hash_rotate(u_int val, u_int rot)
{
    rot %= 32;
    return rot ? (val << rot) | (val >> (32 - rot)) : val;
}

class hash_t {
    u_int val_;

public:
    hash_t() : val_(0) {}
    hash_t(u_int v) : val_(v) {}
    operator u_int() const { return val_; }
};

template <class T> struct compare {
    int operator()(typename CREF(T) a, typename CREF(T) b) const
    {
        if (a < b)
            return -1;
        return b < a ? 1 : 0;
    }
};
template <class T> struct compare<const T> : compare<T> {};

template <class T> struct equals {
    bool operator()(typename CREF(T) a, typename CREF(T) b) const { return a == b; }
};
template <class T> struct equals<const T> : equals<T> {};

template <class T> struct hashfn {
    hash_t operator()(typename CREF(T) a) const { return a; }
};
template <class T> struct hashfn<const T> : hashfn<T> {};

/* Pointers other than C strings: deliberately incomplete. */
template <class T> struct compare<T *>;
template <class T> struct hashfn<T *>;

namespace mely_compat_detail {
template <class C> struct cstring_compare {
    int operator()(const C *a, const C *b) const
    {
        return strcmp(reinterpret_cast<const char *>(a), reinterpret_cast<const char *>(b));
    }
};
template <class C> struct cstring_equals {
    bool operator()(const C *a, const C *b) const
    {
        return !strcmp(reinterpret_cast<const char *>(a), reinterpret_cast<const char *>(b));
    }
};
template <class C> struct cstring_hash {
    hash_t operator()(const C *a) const { return hash_string(a); }
};
} // namespace mely_compat_detail

#define MELY_COMPAT_CSTRING_KEY(P, C)                                                        \
    template <> struct compare<P> : mely_compat_detail::cstring_compare<C> {};               \
    template <> struct equals<P> : mely_compat_detail::cstring_equals<C> {};                 \
    template <> struct hashfn<P> : mely_compat_detail::cstring_hash<C> {};                   \
    template <> struct compare<P const> : mely_compat_detail::cstring_compare<C> {};         \
    template <> struct equals<P const> : mely_compat_detail::cstring_equals<C> {};           \
    template <> struct hashfn<P const> : mely_compat_detail::cstring_hash<C> {};
MELY_COMPAT_CSTRING_KEY(char *, char)
MELY_COMPAT_CSTRING_KEY(const char *, char)
MELY_COMPAT_CSTRING_KEY(signed char *, signed char)
MELY_COMPAT_CSTRING_KEY(const signed char *, signed char)
MELY_COMPAT_CSTRING_KEY(unsigned char *, unsigned char)
MELY_COMPAT_CSTRING_KEY(const unsigned char *, unsigned char)
#undef MELY_COMPAT_CSTRING_KEY

/* Hash of a pair of keys (ihash2). */
template <class T1, class T2> struct hash2fn {
    hashfn<T1> h1;
    hashfn<T2> h2;
    hash_t operator()(typename CREF(T1) a, typename CREF(T2) b) const
    {
        return (u_int)h1(a) ^ (u_int)h2(b);
    }
};

/* A function object over objects of class V that applies F to their key
 * member (itree.h orders objects with keyfunc_2<int, V, K, &V::key,
 * compare<K>>). kf is the F it uses. */
template <class R, class V, class K, K V::*key, class F> class keyfunc_1 {
public:
    const F kf;
    keyfunc_1() : kf() {}
    keyfunc_1(const F &f) : kf(f) {}
    R operator()(typename CREF(V) a) const { return kf(a.*key); }
};

template <class R, class V, class K, K V::*key, class F> class keyfunc_2 {
public:
    const F kf;
    keyfunc_2() : kf() {}
    keyfunc_2(const F &f) : kf(f) {}
    R operator()(typename CREF(V) a, typename CREF(V) b) const { return kf(a.*key, b.*key); }
};

#endif /* MELY_COMPAT_KEYFUNC_H */
