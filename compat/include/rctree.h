/* SPDX-License-Identifier: MIT */
/*
 * rctree.h (mely-compat): libasync's ordered tree of reference-counted
 * objects (itree.h underneath). The tree holds a ptr<V> to each object, so an
 * object stays alive while it is in the tree; V holds an rctree_entry_t<V>
 * member that knows the object's place.
 *
 *   struct dat {
 *       int d;
 *       rctree_entry_t<dat> lnk;
 *   };
 *   rctree_t<int, dat, &dat::lnk> t;
 *   t.insert(key, p);          p: a ptr<dat> (New refcounted<dat>(...)); keys
 *                              may repeat (a new one goes after its equals);
 *                              an object is in one rctree_t at a time
 *   ptr<dat> p = t[key];       the first object with that key, or NULL
 *   t.remove(p);               p must be in the tree; the tree's ptr is dropped
 *   t.clear()                  removes every object (also done by ~rctree_t)
 *   t.root(), rctree_t::up(p), left(p), right(p)   the tree's shape (NULL
 *                              at the edges); ptr<const dat> forms too
 *   t.first(), rctree_t::next(p)   in key order (not in libasync's rctree)
 *   rctree_t::min_postorder(t.root()), next_postorder(p)   children first
 *   t.search(wrap(f))          int f(ptr<dat>): <0, 0, >0 as the object sought
 *                              is before, at or after the one given; the
 *                              first at which it says 0, or NULL
 * The order is compare<K>, or C (a fifth argument) as in itree.h. The key
 * given to insert is copied into the tree's node; the object's members are
 * not looked at.
 *
 * An object destroyed while in a tree (which takes a delete of a counted
 * object by hand) panics; so does inserting an object that is in a tree.
 * Not copyable, not thread-safe: one color (or a lock) per tree.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_RCTREE_H
#define MELY_COMPAT_RCTREE_H

#include "err.h"
#include "itree.h"
#include "refcnt.h"

template <class V> class rctree_entry_t {
    void *_node;

public:
    rctree_entry_t() : _node(nullptr) {}
    rctree_entry_t(const rctree_entry_t &) : _node(nullptr) {} /* a copy is in no tree */
    rctree_entry_t &operator=(const rctree_entry_t &) { return *this; }
    ~rctree_entry_t()
    {
        if (_node)
            panic("rctree: an object was destroyed while in a tree\n");
    }

    /* The tree's node of the object, set by the tree (libasync's names). */
    void put_in_list(void *n)
    {
        if (_node)
            panic("rctree: an object inserted twice (it is in a tree already)\n");
        _node = n;
    }
    void *v_node() const { return _node; }
    void remove_from_tree()
    {
        if (!_node)
            panic("rctree: an object removed that is in no tree\n");
        _node = nullptr;
    }
};

template <class K, class V, rctree_entry_t<V> V::*field> class rctree_node_t {
    ptr<V> _elm;

public:
    const K _key;
    itree_entry<rctree_node_t> _lnk;

    rctree_node_t(const K &k, const ptr<V> &v) : _elm(v), _key(k) { (v->*field).put_in_list(this); }
    rctree_node_t(const rctree_node_t &) = delete;
    rctree_node_t &operator=(const rctree_node_t &) = delete;

    ptr<V> elem() { return _elm; }
    ptr<const V> elem() const { return _elm; }
};

template <class K, class V, rctree_entry_t<V> V::*field, class C = compare<K>> class rctree_t {
public:
    typedef rctree_node_t<K, V, field> mynode_t;
    typedef itree<const K, mynode_t, &mynode_t::_key, &mynode_t::_lnk, C> mytree_t;

private:
    mytree_t _tree;

    static mynode_t *get_node(const ptr<V> &e)
    {
        return e ? static_cast<mynode_t *>((e->*field).v_node()) : nullptr;
    }
    static const mynode_t *get_node(const ptr<const V> &e)
    {
        return e ? static_cast<const mynode_t *>((e->*field).v_node()) : nullptr;
    }
    static ptr<V> elem_of(mynode_t *n) { return n ? n->elem() : ptr<V>(); }
    static ptr<const V> celem_of(const mynode_t *n) { return n ? n->elem() : ptr<const V>(); }

public:
    rctree_t() {}
    rctree_t(const C &c) : _tree(c) {}
    rctree_t(const rctree_t &) = delete;
    rctree_t &operator=(const rctree_t &) = delete;
    ~rctree_t() { clear(); }

    void insert(const K &k, ptr<V> n) { _tree.insert(New mynode_t(k, n)); }
    void remove(ptr<V> p)
    {
        mynode_t *n = get_node(p);
        if (!n)
            panic("rctree: an object removed that is in no tree\n");
        _tree.remove(n);
        (p->*field).remove_from_tree();
        delete n; /* drops the tree's reference; p keeps the object alive */
    }
    void clear()
    {
        mynode_t *n = mytree_t::min_postorder(_tree.root());
        _tree.clear(); /* the nodes are freed below, children first */
        while (n) {
            mynode_t *nx = mytree_t::next_postorder(n);
            ptr<V> e = n->elem();
            (e->*field).remove_from_tree();
            delete n;
            n = nx;
        }
    }

    ptr<V> root() { return elem_of(_tree.root()); }
    ptr<V> first() { return elem_of(_tree.first()); }

    static ptr<V> up(ptr<V> e) { return e ? elem_of(mytree_t::up(get_node(e))) : ptr<V>(); }
    static ptr<V> left(ptr<V> e) { return e ? elem_of(mytree_t::left(get_node(e))) : ptr<V>(); }
    static ptr<V> right(ptr<V> e) { return e ? elem_of(mytree_t::right(get_node(e))) : ptr<V>(); }
    static ptr<V> next(ptr<V> e) { return e ? elem_of(mytree_t::next(get_node(e))) : ptr<V>(); }
    static ptr<const V> up(ptr<const V> e)
    {
        return e ? celem_of(mytree_t::up(get_node(e))) : ptr<const V>();
    }
    static ptr<const V> left(ptr<const V> e)
    {
        return e ? celem_of(mytree_t::left(get_node(e))) : ptr<const V>();
    }
    static ptr<const V> right(ptr<const V> e)
    {
        return e ? celem_of(mytree_t::right(get_node(e))) : ptr<const V>();
    }

    static ptr<V> min_postorder(ptr<V> e)
    {
        return e ? elem_of(mytree_t::min_postorder(get_node(e))) : ptr<V>();
    }
    static ptr<V> next_postorder(ptr<V> e)
    {
        return e ? elem_of(mytree_t::next_postorder(get_node(e))) : ptr<V>();
    }
    static ptr<const V> next_postorder(ptr<const V> e)
    {
        return e ? celem_of(mytree_t::next_postorder(get_node(e))) : ptr<const V>();
    }

    ptr<V> operator[](const K &k) { return elem_of(_tree[k]); }
    ptr<const V> operator[](const K &k) const { return celem_of(_tree[k]); }

    ptr<V> search(typename callback<int, ptr<V>>::ref fn) const
    {
        return elem_of(_tree.search(&rctree_t::search_step, &fn, (const char *)nullptr));
    }

private:
    static int search_step(const typename callback<int, ptr<V>>::ref *fn, const char *,
                           const mynode_t *n)
    {
        return (**fn)(const_cast<mynode_t *>(n)->elem());
    }
};

#endif /* MELY_COMPAT_RCTREE_H */
