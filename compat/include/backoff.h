/* SPDX-License-Identifier: MIT */
/*
 * backoff.h (mely-compat): libasync's retransmission queue with exponential
 * backoff, on timecb.
 *
 *   struct req {
 *       tmoq_entry<req> tlink;
 *       void xmit(int n);       send (again): n is 0 for the first send,
 *                               then 1, 2, ...
 *       void timeout();         the last wait ran out
 *   };
 *   tmoq<req, &req::tlink, minto, maxsend> q;   minto: 2 s, maxsend: 5 by
 *                               default
 *   q.start(r)                  r->xmit(0) now; while r stays in the queue,
 *                               r->xmit(n) again once minto << (n - 1)
 *                               seconds passed since send n - 1, up to send
 *                               maxsend - 1; minto << (maxsend - 1) seconds
 *                               after that, r leaves the queue and
 *                               r->timeout() runs (which may delete r)
 *   q.remove(r)                 r leaves the queue (an answer came): no more
 *                               xmit or timeout; nothing if r is in no queue
 *   q.keeptrying(r)             after timeout(): r goes back in for one
 *                               more send, xmit(maxsend - 1), and wait
 *
 * Deadlines are whole seconds of the wall clock (CLOCK_REALTIME), as
 * libasync's (time(NULL)): a wait of minto << n seconds may be up to a second
 * shorter. xmit is called after r is queued, so it may remove r. start() on an
 * object in the queue starts it over (libasync's list would break).
 * keeptrying() on one in the queue panics.
 *
 * The timers run with the color that was current when they were set (the
 * color of the callback that called start, remove or keeptrying, or that
 * of an earlier timer of the queue): a queue used by callbacks of one color
 * stays on that color, and xmit and timeout run there. Destroying the queue
 * cancels its timers. Not thread-safe: one color per queue.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_BACKOFF_H
#define MELY_COMPAT_BACKOFF_H

#include <time.h>

#include "async.h"

template <class T> class tmoq_entry {
    template <class U, tmoq_entry<U> U::*, u_int, u_int> friend class tmoq;

    u_int qno;  /* the queue (the sends so far - 1), >= maxsend when in none */
    time_t tm;  /* the deadline */
    T *next;
    T **pprev;  /* what points at this object */

public:
    tmoq_entry() : qno((u_int)-1), tm(0), next(nullptr), pprev(nullptr) {}
};

template <class T, tmoq_entry<T> T::*field, u_int minto = 2, u_int maxsend = 5> class tmoq {
    static_assert(maxsend > 0, "tmoq: maxsend must be at least 1");

    /* One FIFO per send count: all of its members wait the same time, so
     * their deadlines are in order and one timer (for the first) will do. */
    struct queue {
        T *first = nullptr;
        T **plast = &first;
        timecb_t *timer = nullptr;
    };
    queue q_[maxsend];

    static time_t now()
    {
        timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return ts.tv_sec;
    }
    static tmoq_entry<T> &E(T *p) { return p->*field; }

    void arm(u_int qn)
    {
        queue &q = q_[qn];
        if (q.timer || !q.first)
            return;
        timespec when;
        when.tv_sec = E(q.first).tm;
        when.tv_nsec = 0;
        q.timer = timecb(when, cwrap(&tmoq::fire, this, qn, get_current_color()));
    }
    static void fire(tmoq *t, u_int qn)
    {
        t->q_[qn].timer = nullptr;
        t->expire(qn);
        t->arm(qn);
    }
    void expire(u_int qn)
    {
        time_t n = now();
        T *p;
        while ((p = q_[qn].first) && E(p).tm <= n) {
            unlink(p);
            if (qn + 1 < maxsend) {
                enqueue(p, qn + 1, n);
            } else {
                E(p).qno = maxsend;
                p->timeout(); /* may delete p */
            }
        }
    }
    void enqueue(T *p, u_int qn, time_t base)
    {
        tmoq_entry<T> &e = E(p);
        queue &q = q_[qn];
        e.qno = qn;
        e.tm = base + ((time_t)minto << qn);
        e.next = nullptr;
        e.pprev = q.plast;
        *q.plast = p;
        q.plast = &e.next;
        arm(qn);
        p->xmit(qn);
    }
    void unlink(T *p)
    {
        tmoq_entry<T> &e = E(p);
        if (e.qno >= maxsend)
            return;
        if (e.next)
            E(e.next).pprev = e.pprev;
        else
            q_[e.qno].plast = e.pprev;
        *e.pprev = e.next;
        e.next = nullptr;
        e.pprev = nullptr;
        e.qno = (u_int)-1;
    }

public:
    tmoq() {}
    tmoq(const tmoq &) = delete;
    tmoq &operator=(const tmoq &) = delete;
    ~tmoq()
    {
        for (queue &q : q_)
            if (q.timer)
                timecb_remove(q.timer);
    }

    void start(T *p)
    {
        unlink(p);
        enqueue(p, 0, now());
    }
    void keeptrying(T *p)
    {
        if (E(p).qno < maxsend)
            panic("tmoq::keeptrying: the object is still in the queue\n");
        enqueue(p, maxsend - 1, now());
    }
    void remove(T *p) { unlink(p); }
};

#endif /* MELY_COMPAT_BACKOFF_H */
