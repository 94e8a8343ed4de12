/* SPDX-License-Identifier: MIT */
/*
 * rctailq.h (mely-compat): libasync's tailq of reference-counted objects:
 * rclist.h's list with a tail.
 *
 *   struct dat {
 *       int d;
 *       rctailq_entry_t<dat> lnk;
 *   };
 *   rctailq_t<dat, &dat::lnk> q;
 *   q.insert_head(p), q.insert_tail(p)   p: a ptr<dat>; the queue holds it
 *   q.first(), q.last()                   the ends, or NULL
 *   rctailq_t<...>::next(p)               the object after p, or NULL
 *   q.remove(p), q.delete_all(), q.traverse(wrap(f))   as in rclist.h
 *
 * libasync's last() returned NULL whatever the queue held (it read its
 * tailq's tail link, which is the last object's empty `next`); here it is
 * the last object. Also includes rclist.h. Not copyable and not
 * thread-safe: one color (or a lock) per queue.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_RCTAILQ_H
#define MELY_COMPAT_RCTAILQ_H

#include "rclist.h"

template <class T> struct rctailq_entry_t : mely_compat_detail::rc_entry {};

template <class T, rctailq_entry_t<T> T::*field>
class rctailq_t : private mely_compat_detail::rc_nodes<T, rctailq_entry_t<T>, field> {
    typedef mely_compat_detail::rc_nodes<T, rctailq_entry_t<T>, field> base;

public:
    typedef typename base::node_t mynode_t;
    rctailq_t() {}
    using base::delete_all;
    using base::first;
    using base::insert_head;
    using base::insert_tail;
    using base::last;
    using base::next;
    using base::remove;
    using base::traverse;
};

#endif /* MELY_COMPAT_RCTAILQ_H */
