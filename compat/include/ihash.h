/* SPDX-License-Identifier: MIT */
/*
 * ihash.h (mely-compat): libasync's intrusive hash tables. The object holds
 * its own link (an ihash_entry<T> member) and its key; the table allocates
 * nothing per object and never frees an object (except deleteall()).
 *
 *   struct user {
 *       str name;
 *       ihash_entry<user> hlink;
 *   };
 *   ihash<str, user, &user::name, &user::hlink> users;
 *   users.insert(u);            u->name is the key; several objects may have
 *                               equal keys (insert never replaces)
 *   user *u = users[key];       an object with that key, or NULL
 *   u = users.nextkeq(u);       the next object with the same key, or NULL
 *   users.remove(u);            u must be in the table
 *   for (user *p = users.first(); p; p = users.next(p)) ...
 *   users.traverse(wrap(f));    f(user *) for every object; f may remove the
 *                               object it was given
 *   users.size(), users.clear() (forgets every object), users.deleteall()
 *                               (deletes every object, then forgets them)
 *
 * ihash2<K1, K2, V, &V::k1, &V::k2, &V::link> is keyed on two members
 * (lookup: table(k1, k2)); shash<V, &V::link> on the whole object (lookup:
 * table[v], with hashfn<V> and equals<V>). Hash and equality come from
 * hashfn<K> and equals<K> (keyfunc.h) unless given as further arguments.
 *
 * The key must not change while the object is in the table. An object is in
 * at most one table per ihash_entry member. As libasync's, a table starts
 * with 3 buckets, grows to the next of 7, 13, 31, 61, 127, 251, ... (the
 * largest prime below each power of two) when an insertion brings it to as
 * many objects as buckets, and never shrinks (clear() starts it again at 3);
 * an object goes to bucket hash % buckets, at the head of its chain. So
 * traversal and first()/next() visit the objects in libasync's order. A
 * table is not thread-safe: one color (or a lock) per table.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_IHASH_H
#define MELY_COMPAT_IHASH_H

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include <sys/types.h>

#include "callback.h"
#include "keyfunc.h"
#include "vec.h"

template <class T> class ihash_entry;
template <class T, ihash_entry<T> T::*field> class ihash_core;

template <class T> class ihash_entry {
    template <class U, ihash_entry<U> U::*> friend class ihash_core;
    T *next_ = nullptr;
    T **pprev_ = nullptr; /* the bucket slot or the previous object's next_ */
    hash_t val_;
};

namespace mely_compat_detail {

/* The bucket count a table takes when it grows from `cur` buckets, as in
 * libasync: the largest prime not above 2^(ceil(log2(cur)) + 1), and at
 * least 3 (3, 7, 13, 31, 61, 127, 251, 509, ...). With the same hash values
 * and the same insertions and removals, a table then holds its objects in
 * the same buckets, in the same order, as libasync's: traversal and
 * first()/next() visit them in the same order. */
inline size_t ihash_grown(size_t cur)
{
    /* largest_prime_upto_pow2[k]: the largest prime <= 2^k (1 for k = 0). */
    static const u_int largest_prime_upto_pow2[33] = {
        1u,          2u,          3u,          7u,          13u,         31u,
        61u,         127u,        251u,        509u,        1021u,       2039u,
        4093u,       8191u,       16381u,      32749u,      65521u,      131071u,
        262139u,     524287u,     1048573u,    2097143u,    4194301u,    8388593u,
        16777213u,   33554393u,   67108859u,   134217689u,  268435399u,  536870909u,
        1073741789u, 2147483647u, 4294967291u};
    /* k = ceil(log2(cur)) + 1, taking ceil(log2(0)) as -1; ceil(log2(cur))
     * is the bit length of cur - 1. */
    unsigned k;
    if (cur == 0)
        k = 0;
    else if (cur == 1)
        k = 1;
    else
        k = (unsigned)(64 - __builtin_clzll((unsigned long long)(cur - 1))) + 1;
    if (k > 32)
        k = 32;
    size_t n = largest_prime_upto_pow2[k];
    return n < 3 ? 3 : n;
}

} // namespace mely_compat_detail

template <class T, ihash_entry<T> T::*field> class ihash_core {
    T **tab_ = nullptr;   /* nbuckets_ slots once something was inserted */
    size_t nbuckets_ = 3; /* as libasync's fresh table */
    size_t entries_ = 0;

    static ihash_entry<T> &link(const T *e) { return const_cast<T *>(e)->*field; }
    size_t bucket_of(hash_t h) const { return (size_t)(u_int)h % nbuckets_; }

    /* Puts e at the head of its bucket's chain. */
    void link_in(T *e)
    {
        T **slot = &tab_[bucket_of(link(e).val_)];
        link(e).next_ = *slot;
        if (*slot)
            link(*slot).pprev_ = &link(e).next_;
        link(e).pprev_ = slot;
        *slot = e;
    }
    static T **new_table(size_t n)
    {
        T **t = static_cast<T **>(calloc(n, sizeof(T *)));
        if (!t)
            abort();
        return t;
    }
    /* libasync's _grow(n): n buckets if n is at least the current count,
     * else (and for 0) the next size. Objects move bucket by bucket, each
     * chain from its head, to the heads of the new chains. */
    void rehash(size_t n)
    {
        if (n == 0 || n < nbuckets_)
            n = mely_compat_detail::ihash_grown(nbuckets_);
        T **old = tab_;
        size_t oldn = nbuckets_;
        nbuckets_ = n;
        if (!old)
            return; /* nothing inserted yet: the table is made on first use */
        tab_ = new_table(n);
        for (size_t b = 0; b < oldn; b++) {
            for (T *e = old[b], *nx; e; e = nx) {
                nx = link(e).next_;
                link_in(e);
            }
        }
        free(old);
    }

protected:
    ihash_core() {}

    bool insert_val(T *e, hash_t h)
    {
        if (!tab_)
            tab_ = new_table(nbuckets_);
        if (++entries_ >= nbuckets_)
            rehash(0);
        link(e).val_ = h;
        link_in(e);
        return true;
    }
    /* The first object whose hash is h, or NULL. */
    T *lookup_val(hash_t h) const
    {
        if (!tab_)
            return nullptr;
        T *e = tab_[bucket_of(h)];
        while (e && (u_int)link(e).val_ != (u_int)h)
            e = link(e).next_;
        return e;
    }
    /* The next object after e with e's hash, or NULL. */
    static T *next_val(T *e)
    {
        u_int h = link(e).val_;
        do
            e = link(e).next_;
        while (e && (u_int)link(e).val_ != h);
        return e;
    }
    /* The first object of hash h for which same(object) holds, or NULL. */
    template <class P> T *find_val(hash_t h, P same) const
    {
        T *e = lookup_val(h);
        while (e && !same(e))
            e = next_val(e);
        return e;
    }
    /* The next object after e, of e's hash, for which same(object) holds. */
    template <class P> static T *next_same(T *e, P same)
    {
        do
            e = next_val(e);
        while (e && !same(e));
        return e;
    }

public:
    ~ihash_core() { free(tab_); }
    ihash_core(const ihash_core &) = delete;
    ihash_core &operator=(const ihash_core &) = delete;

    /* Forgets every object (their links are left as they are); the table is
     * as new (3 buckets). */
    void clear()
    {
        free(tab_);
        tab_ = nullptr;
        nbuckets_ = 3;
        entries_ = 0;
    }
    void deleteall()
    {
        if (tab_) {
            for (size_t b = 0; b < nbuckets_; b++) {
                for (T *e = tab_[b], *nx; e; e = nx) {
                    nx = link(e).next_;
                    delete e;
                }
            }
        }
        clear();
    }
    size_t size() const { return entries_; }
    size_t buckets() const { return nbuckets_; }
    bool constructed() const { return true; }
    bool has_room() const { return entries_ < nbuckets_; }
    ssize_t room() const { return (ssize_t)nbuckets_ - (ssize_t)entries_; }
    /* As libasync: n buckets when n is at least the current count, else
     * one step of growth. */
    void reserve(size_t n) { rehash(n); }
    void grow() { rehash(0); }

    void remove(T *e)
    {
        ihash_entry<T> &l = link(e);
        if (l.next_)
            link(l.next_).pprev_ = l.pprev_;
        *l.pprev_ = l.next_;
        l.next_ = nullptr;
        l.pprev_ = nullptr;
        entries_--;
    }

    /* Bucket by bucket, each chain from its head (the object inserted last
     * into it, or moved last by a growth). */
    T *first() const
    {
        if (entries_)
            for (size_t b = 0; b < nbuckets_; b++)
                if (tab_[b])
                    return tab_[b];
        return nullptr;
    }
    T *next(const T *e) const
    {
        if (T *n = link(e).next_)
            return n;
        for (size_t b = bucket_of(link(e).val_) + 1; b < nbuckets_; b++)
            if (tab_[b])
                return tab_[b];
        return nullptr;
    }
    T *first_in_bucket(size_t b) const { return tab_ && b < nbuckets_ ? tab_[b] : nullptr; }
    T *next_in_bucket(const T *e) const { return link(e).next_; }

    /* cb may remove the object it is given (not others). */
    void traverse(typename callback<void, T *>::ref cb)
    {
        for (size_t b = 0; tab_ && b < nbuckets_; b++)
            for (T *e = tab_[b], *nx; e; e = nx) {
                nx = link(e).next_;
                (*cb)(e);
            }
    }
    void traverse(typename callback<void, const T &>::ref cb) const
    {
        for (size_t b = 0; tab_ && b < nbuckets_; b++)
            for (T *e = tab_[b], *nx; e; e = nx) {
                nx = link(e).next_;
                (*cb)(*e);
            }
    }
    void traverse(void (T::*fn)())
    {
        for (size_t b = 0; tab_ && b < nbuckets_; b++)
            for (T *e = tab_[b], *nx; e; e = nx) {
                nx = link(e).next_;
                (e->*fn)();
            }
    }
};

template <class K, class V, K V::*key, ihash_entry<V> V::*field, class H = hashfn<K>,
          class E = equals<K>>
class ihash : public ihash_core<V, field> {
    const E eq_;
    const H hash_;

public:
    ihash() : eq_(), hash_() {}
    ihash(const E &e, const H &h) : eq_(e), hash_(h) {}

    bool insert(V *e) { return this->insert_val(e, hash_(e->*key)); }
    V *operator[](const K &k) const
    {
        return this->find_val(hash_(k), [&](const V *v) { return eq_(k, v->*key); });
    }
    V *nextkeq(V *v)
    {
        const K &k = v->*key;
        return this->next_same(v, [&](const V *w) { return eq_(k, w->*key); });
    }
};

template <class K1, class K2, class V, K1 V::*key1, K2 V::*key2, ihash_entry<V> V::*field,
          class H = hash2fn<K1, K2>, class E1 = equals<K1>, class E2 = equals<K2>>
class ihash2 : public ihash_core<V, field> {
    const E1 eq1_;
    const E2 eq2_;
    const H hash_;

    auto same(const K1 &a, const K2 &b) const
    {
        return [this, &a, &b](const V *v) { return eq1_(a, v->*key1) && eq2_(b, v->*key2); };
    }

public:
    ihash2() : eq1_(), eq2_(), hash_() {}
    ihash2(const E1 &e1, const E2 &e2, const H &h) : eq1_(e1), eq2_(e2), hash_(h) {}

    bool insert(V *e) { return this->insert_val(e, hash_(e->*key1, e->*key2)); }
    V *operator()(const K1 &a, const K2 &b) const { return this->find_val(hash_(a, b), same(a, b)); }
    V *nextkeq(V *v) { return this->next_same(v, same(v->*key1, v->*key2)); }
};

template <class V, ihash_entry<V> V::*field, class H = hashfn<V>, class E = equals<V>>
class shash : public ihash_core<V, field> {
    const E eq_;
    const H hash_;

public:
    shash() : eq_(), hash_() {}
    shash(const E &e, const H &h) : eq_(e), hash_(h) {}

    bool insert(V *e) { return this->insert_val(e, hash_(*e)); }
    V *operator[](const V &k) const
    {
        return this->find_val(hash_(k), [&](const V *v) { return eq_(k, *v); });
    }
    V *nextkeq(V *v)
    {
        const V &k = *v;
        return this->next_same(v, [&](const V *w) { return eq_(k, *w); });
    }
};

/* it.next() gives each object once, then NULL. The table must not change
 * meanwhile, except by removing the object last returned. */
template <class V, class H> class ihash_iterator_t {
    V *cur_;
    H &h_;

public:
    ihash_iterator_t(H &h) : cur_(h.first()), h_(h) {}
    V *next()
    {
        V *r = cur_;
        if (r)
            cur_ = h_.next(r);
        return r;
    }
};

#endif /* MELY_COMPAT_IHASH_H */
