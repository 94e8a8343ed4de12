/* SPDX-License-Identifier: MIT */
/*
 * qhash.h (mely-compat): libasync's hash maps, which own copies of their keys
 * and values (an ihash of allocated slots underneath).
 *
 * qhash<K, V>: a map from K to V, one value per key.
 *   q.insert(k, v)          add, or replace the value of an existing key
 *   q.insert(k)             the same with V()
 *   V *p = q[k]             a pointer to k's value, or NULL (the pointer stays
 *                           valid until k is removed or the table cleared);
 *                           for V = ref<T>, q[k] is a ptr<T> (NULL if absent)
 *   q.lookup(k, &v)         copies k's value into v; false if k is absent
 *   q.remove(k)             (nothing if absent); q.remove(k, &v) also copies
 *                           the value out and says whether k was there
 *   q.size(), q.clear(), copies (q2 = q copies every pair)
 *   q.traverse(wrap(f))     f(const K &, V *) for every pair (f(const K &,
 *                           ptr<T>) for V = ref<T>)
 *   iteration:              qhash_iterator_t<K, V> it(q);
 *                           while (const K *k = it.next(&v)) ...
 *                           or for (const K &k : q) (keys), or
 *                           for (auto *s = q.first(); s; s = q.next(s))
 *                           with s->key and s->value
 * bhash<K>: a set of K.
 *   b.insert(k)             true if k was not there
 *   b[k]                    true if k is there
 *   b.remove(k), b.size(), b.clear(), b.traverse(wrap(f)) (f(const K &)),
 *   bhash_const_iterator_t<K> it(b); while (const K *k = it.next()) ...;
 *   for (const K &k : b)
 *
 * Keys hash and compare with hashfn<K> and equals<K> (keyfunc.h): integers,
 * str, C strings (by contents), classes with operator hash_t and ==; other
 * functions may be given as template arguments 3 and 4. While iterating,
 * only the pair last returned may be removed. Tables are not thread-safe:
 * one color (or a lock) per table.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_QHASH_H
#define MELY_COMPAT_QHASH_H

#include "ihash.h"

/* What q[k] returns: V * (ptr<T> when V is ref<T>). */
template <class V> struct qhash_lookup_return {
    typedef V *type;
    typedef const V *const_type;
    static type ret(V *v) { return v; }
    static const_type const_ret(V *v) { return v; }
};
template <class T> struct qhash_lookup_return<ref<T>> {
    typedef ptr<T> type;
    typedef ptr<const T> const_type;
    static type ret(ref<T> *v) { return v ? type(*v) : type(); }
    static const_type const_ret(ref<T> *v) { return v ? const_type(*v) : const_type(); }
};
template <class V> struct qhash_lookup_return<V &> {
    typedef V *type;
    typedef const V *const_type;
    static type ret(V *v) { return v; }
    static const_type const_ret(V *v) { return v; }
};

template <class K, class V> struct qhash_slot {
    ihash_entry<qhash_slot> link;
    const K key;
    V value;
    qhash_slot(const K &k, const V &v) : key(k), value(v) {}
};
template <class K> struct qhash_slot<K, void> {
    ihash_entry<qhash_slot> link;
    const K key;
    explicit qhash_slot(const K &k) : key(k) {}
};

template <class K, class V, class H, class E> class qhash_iterator_t;
template <class K, class V, class H, class E> class qhash_const_iterator_t;
template <class K, class H, class E> class bhash_const_iterator_t;

namespace mely_compat_detail {

/* The slot table shared by qhash and bhash: find a key, drop a slot. */
template <class K, class S, class H, class E> class slot_table : public ihash_core<S, &S::link> {
protected:
    typedef ihash_core<S, &S::link> core;
    const E eq_;
    const H hash_;

    slot_table() : eq_(), hash_() {}
    /* Copies hold copies of every slot. */
    slot_table(const slot_table &t) : core(), eq_(t.eq_), hash_(t.hash_) { copy_from(t); }
    slot_table &operator=(const slot_table &t)
    {
        if (this != &t) {
            drop_all();
            copy_from(t);
        }
        return *this;
    }
    ~slot_table() { drop_all(); }

    void copy_from(const slot_table &t)
    {
        for (const S *s = t.first(); s; s = t.next(s))
            add(new S(*s));
    }

    S *getslot(const K &k) const
    {
        return this->find_val(hash_(k), [&](const S *s) { return eq_(s->key, k); });
    }
    void add(S *s) { this->insert_val(s, hash_(s->key)); }
    void delslot(S *s)
    {
        core::remove(s);
        delete s;
    }
    void drop_all() { core::deleteall(); }

public:
    void clear() { drop_all(); }
};

} // namespace mely_compat_detail

template <class K, class V, class H = hashfn<K>, class E = equals<K>,
          class R = qhash_lookup_return<V>>
class qhash : public mely_compat_detail::slot_table<K, qhash_slot<K, V>, H, E> {

public:
    typedef qhash_slot<K, V> slot;
    typedef ihash_core<slot, &slot::link> core;
    typedef qhash_iterator_t<K, V, H, E> iterator;
    typedef qhash_const_iterator_t<K, V, H, E> const_iterator;

    qhash() {}

    void insert(const K &k) { insert(k, V()); }
    void insert(const K &k, const V &v)
    {
        if (slot *s = this->getslot(k))
            s->value = v;
        else
            this->add(new slot(k, v));
    }
    void remove(const K &k)
    {
        if (slot *s = this->getslot(k))
            this->delslot(s);
    }
    bool remove(const K &k, V *out)
    {
        slot *s = this->getslot(k);
        if (!s)
            return false;
        *out = s->value;
        this->delslot(s);
        return true;
    }
    bool lookup(const K &k, V *out) const
    {
        slot *s = this->getslot(k);
        if (s)
            *out = s->value;
        return s != nullptr;
    }
    typename R::type operator[](const K &k)
    {
        slot *s = this->getslot(k);
        return R::ret(s ? &s->value : nullptr);
    }
    typename R::const_type operator[](const K &k) const
    {
        slot *s = this->getslot(k);
        return R::const_ret(s ? &s->value : nullptr);
    }

    void traverse(typename callback<void, const K &, typename R::type>::ref cb)
    {
        for (slot *s = this->first(), *nx; s; s = nx) {
            nx = this->next(s);
            (*cb)(s->key, R::ret(&s->value));
        }
    }

    iterator begin() { return iterator(*this); }
    iterator end() { return iterator(*this, nullptr); }
    const_iterator begin() const { return const_iterator(*this); }
    const_iterator end() const { return const_iterator(*this, nullptr); }
};

template <class K, class H = hashfn<K>, class E = equals<K>>
class bhash : public mely_compat_detail::slot_table<K, qhash_slot<K, void>, H, E> {

public:
    typedef qhash_slot<K, void> slot;
    typedef ihash_core<slot, &slot::link> core;
    typedef bhash_const_iterator_t<K, H, E> const_iterator;

    bhash() {}

    bool insert(const K &k)
    {
        if (this->getslot(k))
            return false;
        this->add(new slot(k));
        return true;
    }
    void remove(const K &k)
    {
        if (slot *s = this->getslot(k))
            this->delslot(s);
    }
    bool operator[](const K &k) const { return this->getslot(k) != nullptr; }

    void traverse(typename callback<void, const K &>::ref cb)
    {
        for (slot *s = this->first(), *nx; s; s = nx) {
            nx = this->next(s);
            (*cb)(s->key);
        }
    }

    const_iterator begin() const { return const_iterator(*this); }
    const_iterator end() const { return const_iterator(*this, nullptr); }
};

/* Iterators: next() returns a pointer to the next key (and copies its value
 * into *val when val is given), NULL at the end; reset() starts again.
 * *it and ++it make range-for over the keys work. */
namespace mely_compat_detail {

/* A position in a slot table (Table may be const, Slot then too). */
template <class Table, class Slot, class Self> class slot_cursor {
protected:
    Slot *cur_;
    Table *t_;

    /* The slot at the position, before moving past it; NULL at the end. */
    Slot *advance()
    {
        Slot *s = cur_;
        if (s)
            cur_ = t_->next(s);
        return s;
    }

public:
    slot_cursor(Table &t, Slot *at) : cur_(at), t_(&t) {}
    void reset() { cur_ = t_->first(); }
    Slot *getslot() { return cur_; }
    const auto &operator*() const { return cur_->key; }
    Self &operator++()
    {
        static_cast<Self *>(this)->next();
        return *static_cast<Self *>(this);
    }
    bool operator==(const slot_cursor &o) const { return cur_ == o.cur_; }
    bool operator!=(const slot_cursor &o) const { return cur_ != o.cur_; }
};

/* next(&val) of the qhash iterators. */
template <class Table, class Slot, class K, class V, class Self>
class pair_cursor : public slot_cursor<Table, Slot, Self> {
public:
    using slot_cursor<Table, Slot, Self>::slot_cursor;
    const K *next(V *val = nullptr)
    {
        Slot *s = this->advance();
        if (!s)
            return nullptr;
        if (val)
            *val = s->value;
        return &s->key;
    }
};

} // namespace mely_compat_detail

template <class K, class V, class H = hashfn<K>, class E = equals<K>>
class qhash_iterator_t
    : public mely_compat_detail::pair_cursor<qhash<K, V, H, E>, qhash_slot<K, V>, K, V,
                                             qhash_iterator_t<K, V, H, E>> {
    typedef mely_compat_detail::pair_cursor<qhash<K, V, H, E>, qhash_slot<K, V>, K, V,
                                            qhash_iterator_t>
        base;

public:
    qhash_iterator_t(qhash<K, V, H, E> &q) : base(q, q.first()) {}
    qhash_iterator_t(qhash<K, V, H, E> &q, qhash_slot<K, V> *at) : base(q, at) {}
};

template <class K, class V, class H = hashfn<K>, class E = equals<K>>
class qhash_const_iterator_t
    : public mely_compat_detail::pair_cursor<const qhash<K, V, H, E>, const qhash_slot<K, V>, K,
                                             V, qhash_const_iterator_t<K, V, H, E>> {
    typedef mely_compat_detail::pair_cursor<const qhash<K, V, H, E>, const qhash_slot<K, V>, K,
                                            V, qhash_const_iterator_t>
        base;

public:
    qhash_const_iterator_t(const qhash<K, V, H, E> &q) : base(q, q.first()) {}
    qhash_const_iterator_t(const qhash<K, V, H, E> &q, const qhash_slot<K, V> *at) : base(q, at)
    {
    }
};

template <class K, class H = hashfn<K>, class E = equals<K>>
class bhash_const_iterator_t
    : public mely_compat_detail::slot_cursor<const bhash<K, H, E>, const qhash_slot<K, void>,
                                             bhash_const_iterator_t<K, H, E>> {
    typedef mely_compat_detail::slot_cursor<const bhash<K, H, E>, const qhash_slot<K, void>,
                                            bhash_const_iterator_t>
        base;

public:
    bhash_const_iterator_t(const bhash<K, H, E> &b) : base(b, b.first()) {}
    bhash_const_iterator_t(const bhash<K, H, E> &b, const qhash_slot<K, void> *at) : base(b, at) {}
    const K *next()
    {
        const qhash_slot<K, void> *s = this->advance();
        return s ? &s->key : nullptr;
    }
};

#define HAVE_QHASH_ITERATOR_RESET 1

#endif /* MELY_COMPAT_QHASH_H */
