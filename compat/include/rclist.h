/* SPDX-License-Identifier: MIT */
/*
 * rclist.h (mely-compat): libasync's list of reference-counted objects. The
 * list holds a ptr<T> to each object (a node of its own per object), so an
 * object stays alive while it is in the list; T holds an rclist_entry_t<T>
 * member that knows the object's node.
 *
 *   struct dat {
 *       int d;
 *       rclist_entry_t<dat> lnk;
 *   };
 *   rclist_t<dat, &dat::lnk> l;
 *   l.insert_head(p);           p: a ptr<dat> (New refcounted<dat>(...))
 *   l.first()                   the first object, or NULL
 *   rclist_t<...>::next(p)      the object after p, or NULL (also when p
 *                               is in no list, where libasync crashed)
 *   l.remove(p);                p must be in l; the list's ptr is dropped
 *   l.delete_all();             removes every object (also done by ~rclist_t)
 *   l.traverse(wrap(f));        f(ptr<dat>) for each; f may remove its own
 *
 * An object is in one list per entry member at a time: inserting it again,
 * or removing it when it is in none, panics (as libasync's assert did).
 * libasync's list left its nodes (and the objects' counts) behind when it
 * was destroyed non-empty; this one empties itself. Not copyable and not
 * thread-safe: one color (or a lock) per list.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_RCLIST_H
#define MELY_COMPAT_RCLIST_H

#include "callback.h"
#include "err.h"
#include "list.h"
#include "refcnt.h"

namespace mely_compat_detail {

/* The link member an object holds: the node that holds it, if any. */
struct rc_entry {
    rc_entry() {}
    rc_entry(const rc_entry &) = delete;
    rc_entry &operator=(const rc_entry &) = delete;
    ~rc_entry() { assert(!_node); }
    void put_in_list(void *v)
    {
        assert(!_node); /* in one list at a time per link member */
        _node = v;
    }
    void *v_node() { return _node; }
    void remove_from_list()
    {
        assert(_node);
        _node = nullptr;
    }

private:
    void *_node = nullptr;
};

/* The node that holds a reference to an object while it is in a list. */
template <class T, class Entry, Entry T::*field> struct rc_node {
    explicit rc_node(const ptr<T> &e) : _elm(e) { ((*e).*field).put_in_list(this); }
    ptr<T> elem() const { return _elm; }
    rc_node *_next = nullptr;
    rc_node *_prev = nullptr;

private:
    ptr<T> _elm;
};

/* A doubly linked list of rc_nodes: rclist_t and rctailq_t. */
template <class T, class Entry, Entry T::*field> class rc_nodes {
public:
    typedef rc_node<T, Entry, field> node_t;

    rc_nodes() {}
    rc_nodes(const rc_nodes &) = delete;
    rc_nodes &operator=(const rc_nodes &) = delete;
    ~rc_nodes() { delete_all(); }

    ptr<T> first() const { return _first ? _first->elem() : ptr<T>(); }
    ptr<T> last() const { return _last ? _last->elem() : ptr<T>(); }
    void insert_head(const ptr<T> &p)
    {
        node_t *n = new node_t(p);
        n->_next = _first;
        if (_first)
            _first->_prev = n;
        else
            _last = n;
        _first = n;
    }
    void insert_tail(const ptr<T> &p)
    {
        node_t *n = new node_t(p);
        n->_prev = _last;
        if (_last)
            _last->_next = n;
        else
            _first = n;
        _last = n;
    }
    /* p must be in this list; the list's reference is dropped. */
    void remove(const ptr<T> &p)
    {
        ptr<T> keep = p; /* p may be the node's own reference */
        node_t *n = static_cast<node_t *>(((*keep).*field).v_node());
        assert(n);
        (n->_prev ? n->_prev->_next : _first) = n->_next;
        (n->_next ? n->_next->_prev : _last) = n->_prev;
        ((*keep).*field).remove_from_list();
        delete n;
    }
    void delete_all()
    {
        while (_first)
            remove(_first->elem());
    }
    static ptr<T> next(const ptr<T> &p)
    {
        node_t *n = static_cast<node_t *>(((*p).*field).v_node());
        return n && n->_next ? n->_next->elem() : ptr<T>();
    }
    /* cb(p) for each object; cb may remove the object it was given. */
    void traverse(typename callback<void, ptr<T>>::ref cb) const
    {
        for (node_t *n = _first, *nx; n; n = nx) {
            nx = n->_next;
            (*cb)(n->elem());
        }
    }

private:
    node_t *_first = nullptr;
    node_t *_last = nullptr;
};

} // namespace mely_compat_detail

template <class T> struct rclist_entry_t : mely_compat_detail::rc_entry {};

template <class T, rclist_entry_t<T> T::*field>
class rclist_t : private mely_compat_detail::rc_nodes<T, rclist_entry_t<T>, field> {
    typedef mely_compat_detail::rc_nodes<T, rclist_entry_t<T>, field> base;

public:
    typedef typename base::node_t mynode_t;
    rclist_t() {}
    using base::delete_all;
    using base::first;
    using base::insert_head;
    using base::next;
    using base::remove;
    using base::traverse;
};

#endif /* MELY_COMPAT_RCLIST_H */
