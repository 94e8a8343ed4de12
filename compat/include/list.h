/* SPDX-License-Identifier: MIT */
/*
 * list.h (mely-compat): libasync's intrusive lists. The object holds its
 * link as a member; the list allocates and frees nothing.
 *
 * list<T, &T::link>, with a list_entry<T> link member: a list with a head.
 *   l.first                     the first object, or NULL (a public member)
 *   l.insert_head(e)
 *   list<T, &T::link>::remove(e)   static: e's own link knows its list
 *   list<T, &T::link>::next(e)  the object after e, or NULL
 *   l.traverse(wrap(f))         f(T *) for each object; f may remove its own
 * tailq<T, &T::link>, with a tailq_entry<T> link member: a list with a head
 * and a tail.
 *   q.first, q.insert_head(e), q.insert_tail(e), q.remove(e) (returns e),
 *   tailq<T, &T::link>::next(e), q.traverse(wrap(f))
 *
 *   for (T *p = q.first; p; p = q.next(p)) ...
 *
 * An object is in at most one list per link member; removing an object that
 * is not in the list is undefined, as in libasync. Lists are not copyable
 * and not thread-safe: one color (or a lock) per list.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_LIST_H
#define MELY_COMPAT_LIST_H

#include "callback.h"

/* `pprev` points at whatever points at this object: the list's `first`, or
 * the previous object's `next`; so removal needs neither the list nor a
 * walk. */
template <class T> struct list_entry {
    T *next;
    T **pprev;
};

namespace mely_compat_detail {

/* The link operations list and tailq share (E: list_entry or tailq_entry). */
template <class T, class E, E T::*field> struct pprev_links {
    /* Puts e first in the list headed by *head; true if it was empty. */
    static bool link_head(T **head, T *e)
    {
        E &l = e->*field;
        l.next = *head;
        if (*head)
            ((*head)->*field).pprev = &l.next;
        l.pprev = head;
        *head = e;
        return !l.next;
    }
    /* Takes e out; returns what pointed at e if e was the last, else NULL. */
    static T **unlink(T *e)
    {
        E &l = e->*field;
        T **was_last = l.next ? nullptr : l.pprev;
        if (l.next)
            (l.next->*field).pprev = l.pprev;
        *l.pprev = l.next;
        return was_last;
    }
    /* cb(e) for each object; cb may unlink the object it was given. */
    static void traverse(T *first, typename callback<void, T *>::ref cb)
    {
        for (T *e = first, *nx; e; e = nx) {
            nx = (e->*field).next;
            (*cb)(e);
        }
    }
};

} // namespace mely_compat_detail

template <class T, list_entry<T> T::*field> class list {
    typedef mely_compat_detail::pprev_links<T, list_entry<T>, field> links;

public:
    T *first;

    list() : first(nullptr) {}
    list(const list &) = delete;
    list &operator=(const list &) = delete;

    void insert_head(T *e) { links::link_head(&first, e); }
    static T *remove(T *e)
    {
        links::unlink(e);
        return e;
    }
    static T *next(const T *e) { return (e->*field).next; }

    void traverse(typename callback<void, T *>::ref cb) const { links::traverse(first, cb); }
    void swap(list &o)
    {
        T *t = first;
        first = o.first;
        o.first = t;
        if (first)
            (first->*field).pprev = &first;
        if (o.first)
            (o.first->*field).pprev = &o.first;
    }
};

template <class T> struct tailq_entry {
    T *next;
    T **pprev;
};

template <class T, tailq_entry<T> T::*field> struct tailq {
private:
    typedef mely_compat_detail::pprev_links<T, tailq_entry<T>, field> links;

public:
    T *first;
    T **plast; /* the `next` of the last object, or &first when empty */

    tailq() : first(nullptr), plast(&first) {}
    tailq(const tailq &) = delete;
    tailq &operator=(const tailq &) = delete;

    void insert_head(T *e)
    {
        if (links::link_head(&first, e))
            plast = &(e->*field).next;
    }
    void insert_tail(T *e)
    {
        tailq_entry<T> &l = e->*field;
        l.next = nullptr;
        l.pprev = plast;
        *plast = e;
        plast = &l.next;
    }
    T *remove(T *e)
    {
        if (T **before = links::unlink(e))
            plast = before;
        return e;
    }
    static T *next(const T *e) { return (e->*field).next; }

    void traverse(typename callback<void, T *>::ref cb) const { links::traverse(first, cb); }
};

#endif /* MELY_COMPAT_LIST_H */
