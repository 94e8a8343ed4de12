/* SPDX-License-Identifier: MIT */
/*
 * qtailq.h (mely-compat): libasync's "quick" tailq, a FIFO/LIFO of values
 * (a T, copied in and out) that wraps each one in a slot of its own.
 *   qtailq_t<T> q;
 *   q.push_back(t), q.push_front(t)
 *   q.pop_front(&t)   the first value into t and out of the queue; false
 *                     (t untouched) when the queue is empty
 *   q.rmslot(s)       takes slot s out and frees it
 * qtailq_slot_t<T>: s.obj() the value, s._lnk the tailq link. The queue frees
 * the slots (and so the values) it still holds when destroyed. Not copyable
 * and not thread-safe: one color (or a lock) per queue.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_QTAILQ_H
#define MELY_COMPAT_QTAILQ_H

#include "list.h"

template <class T> class qtailq_slot_t {
public:
    explicit qtailq_slot_t(const T &t) : _obj(t) {}
    T obj() const { return _obj; }
    const T _obj;
    tailq_entry<qtailq_slot_t<T>> _lnk;
};

template <class T> class qtailq_t {
public:
    typedef qtailq_slot_t<T> slot_t;

    qtailq_t() {}
    qtailq_t(const qtailq_t &) = delete;
    qtailq_t &operator=(const qtailq_t &) = delete;
    ~qtailq_t()
    {
        while (_q.first)
            rmslot(_q.first);
    }

    bool pop_front(T *out)
    {
        slot_t *s = _q.first;
        if (!s)
            return false;
        *out = s->obj();
        rmslot(s);
        return true;
    }
    void push_front(const T &t) { _q.insert_head(new slot_t(t)); }
    void push_back(const T &t) { _q.insert_tail(new slot_t(t)); }
    void rmslot(slot_t *s)
    {
        _q.remove(s);
        delete s;
    }

private:
    tailq<slot_t, &slot_t::_lnk> _q;
};

#endif /* MELY_COMPAT_QTAILQ_H */
