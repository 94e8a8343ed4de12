/* SPDX-License-Identifier: MIT */
/*
 * itree.h (mely-compat): libasync's intrusive ordered tree, a red-black tree
 * whose nodes are the objects themselves. The object holds its link (an
 * itree_entry<V> member) and its key; the tree allocates and frees nothing
 * (except deleteall()).
 *
 *   struct timer {
 *       time_t when;
 *       itree_entry<timer> link;
 *   };
 *   itree<time_t, timer, &timer::when, &timer::link> q;
 *   q.insert(t);                 several objects may have equal keys: a new
 *                                one goes after those already there
 *   timer *t = q[key];           the first object with that key, or NULL
 *   q.lower_bound(k)             the first object whose key is >= k, or NULL
 *   q.upper_bound(k)             the LAST object whose key is <= k, or NULL
 *                                (libasync's meaning, not std::upper_bound's)
 *   q.remove(t);                 t must be in the tree
 *   for (timer *p = q.first(); p; p = q.next(p)) ...   in key order
 *   q.prev(t), q.root(), q.up(t), q.left(t), q.right(t)   (NULL at the ends)
 *   q.search(wrap(f))            f(const timer *) returns <0, 0 or >0 as the
 *                                sought object is before, at or after the
 *                                one given: the first one at which it says 0
 *   q.search(f, &a1, &a2)        the same with int f(const A1 *, const A2 *,
 *                                const timer *)
 *   q.traverse(wrap(f)), q.traverse(&timer::method)   each object in order;
 *                                it may remove the object it was given
 *   q.clear()                    forgets every object (links left as they are)
 *   q.deleteall()                deletes every object (deleteall_correct()
 *                                is the same), then forgets them
 *   min_postorder(root()), next_postorder(n)   children before parents:
 *                                the order in which to free a whole tree
 *   t->link.up(), left(), right()   the same links, from the entry
 * The key order is compare<K> (keyfunc.h: <), or a class C given as the
 * fifth argument, whose int operator()(const K &, const K &) returns <0, 0
 * or >0; itree(c) takes an instance.
 *
 * itree_core<V, &V::link, C> is the tree with a comparator of whole objects
 * (C: int operator()(const V &, const V &)), and no operator[].
 *
 * Insertion and removal are O(log n), next/prev O(1) amortized. The key must
 * not change while the object is in the tree. An object is in at most one
 * tree per itree_entry member. A tree is not copyable and not thread-safe:
 * one color (or a lock) per tree. _check() verifies the tree's invariants
 * (for tests; O(n)).
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_ITREE_H
#define MELY_COMPAT_ITREE_H

#include <cstddef>

#include "callback.h"
#include "keyfunc.h"

template <class T> class itree_entry;

namespace mely_compat_detail {
template <class T, itree_entry<T> T::*field> struct rb_ops;
}

template <class T> class itree_entry {
    template <class U, itree_entry<U> U::*> friend struct mely_compat_detail::rb_ops;

    T *up_ = nullptr;
    T *kid_[2] = {nullptr, nullptr}; /* [0] left (smaller), [1] right */
    bool red_ = false;

public:
    T *up() const { return up_; }
    T *left() const { return kid_[0]; }
    T *right() const { return kid_[1]; }
};

namespace mely_compat_detail {

/* The red-black algorithms, written once for both directions: d is 0 or 1,
 * a child index, and 1 - d the other side. */
template <class T, itree_entry<T> T::*field> struct rb_ops {
    static itree_entry<T> &L(const T *n) { return const_cast<T *>(n)->*field; }
    static T *&up(const T *n) { return L(n).up_; }
    static T *&kid(const T *n, int d) { return L(n).kid_[d]; }
    static bool red(const T *n) { return n && L(n).red_; }
    static void paint(T *n, bool r) { L(n).red_ = r; }

    /* Puts v where u hangs (v may be NULL); u's own links are unchanged. */
    static void replace(T **root, T *u, T *v)
    {
        T *p = up(u);
        if (!p)
            *root = v;
        else
            kid(p, kid(p, 0) == u ? 0 : 1) = v;
        if (v)
            up(v) = p;
    }
    /* Lifts x's child 1 - d into x's place; x becomes its child d. */
    static void rotate(T **root, T *x, int d)
    {
        T *y = kid(x, 1 - d);
        T *inner = kid(y, d);
        kid(x, 1 - d) = inner;
        if (inner)
            up(inner) = x;
        replace(root, x, y);
        kid(y, d) = x;
        up(x) = y;
    }

    static T *extreme(T *n, int d)
    {
        if (n)
            while (kid(n, d))
                n = kid(n, d);
        return n;
    }
    /* The next object in direction d (1: successor, 0: predecessor). */
    static T *step(const T *n, int d)
    {
        if (T *c = kid(n, d))
            return extreme(c, 1 - d);
        T *p = up(n);
        while (p && kid(p, d) == n) {
            n = p;
            p = up(p);
        }
        return p;
    }

    static void link(T **root, T *n, T *parent, int side)
    {
        up(n) = parent;
        kid(n, 0) = kid(n, 1) = nullptr;
        paint(n, true);
        if (parent)
            kid(parent, side) = n;
        else
            *root = n;
        /* A red node under a red parent: recolor upwards while the uncle
         * is red, then at most two rotations. */
        T *p;
        while ((p = up(n)) && red(p)) {
            T *g = up(p); /* p is red, so not the root */
            int d = kid(g, 0) == p ? 0 : 1;
            T *u = kid(g, 1 - d);
            if (red(u)) {
                paint(p, false);
                paint(u, false);
                paint(g, true);
                n = g;
                continue;
            }
            if (n == kid(p, 1 - d)) { /* inner grandchild: make it outer */
                rotate(root, p, d);
                n = p;
                p = up(n);
            }
            paint(p, false);
            paint(g, true);
            rotate(root, g, 1 - d);
        }
        paint(*root, false);
    }

    static void erase(T **root, T *z)
    {
        T *x, *xp; /* the node that moved up (maybe NULL) and its parent */
        bool lost_black;
        if (!kid(z, 0) || !kid(z, 1)) {
            x = kid(z, kid(z, 0) ? 0 : 1);
            xp = up(z);
            lost_black = !red(z);
            replace(root, z, x);
        } else {
            T *y = extreme(kid(z, 1), 0); /* z's successor takes its place */
            lost_black = !red(y);
            x = kid(y, 1);
            if (up(y) == z) {
                xp = y;
            } else {
                xp = up(y);
                replace(root, y, x);
                kid(y, 1) = kid(z, 1);
                up(kid(y, 1)) = y;
            }
            replace(root, z, y);
            kid(y, 0) = kid(z, 0);
            up(kid(y, 0)) = y;
            paint(y, red(z));
        }
        up(z) = kid(z, 0) = kid(z, 1) = nullptr;
        if (lost_black)
            rebalance(root, x, xp);
    }

    /* The paths through x have one black node too few. */
    static void rebalance(T **root, T *x, T *xp)
    {
        while (x != *root && !red(x)) {
            int d = kid(xp, 0) == x ? 0 : 1;
            T *w = kid(xp, 1 - d); /* not NULL: its side has a black more */
            if (red(w)) {
                paint(w, false);
                paint(xp, true);
                rotate(root, xp, d);
                w = kid(xp, 1 - d);
            }
            if (!red(kid(w, 0)) && !red(kid(w, 1))) {
                paint(w, true);
                x = xp;
                xp = up(x);
                continue;
            }
            if (!red(kid(w, 1 - d))) {
                paint(kid(w, d), false);
                paint(w, true);
                rotate(root, w, 1 - d);
                w = kid(xp, 1 - d);
            }
            paint(w, red(xp));
            paint(xp, false);
            paint(kid(w, 1 - d), false);
            rotate(root, xp, d);
            x = *root;
        }
        if (x)
            paint(x, false);
    }

    /* Black height of n's subtree, or -1 if a rule is broken in it. */
    template <class C> static int check(const T *n, const T *parent, const C &cmp)
    {
        if (!n)
            return 1;
        if (up(n) != parent || (red(n) && (red(kid(n, 0)) || red(kid(n, 1)))))
            return -1;
        if (kid(n, 0) && cmp(*kid(n, 0), *n) > 0)
            return -1;
        if (kid(n, 1) && cmp(*n, *kid(n, 1)) > 0)
            return -1;
        int l = check(kid(n, 0), n, cmp), r = check(kid(n, 1), n, cmp);
        if (l < 0 || l != r)
            return -1;
        return l + (red(n) ? 0 : 1);
    }
};

} // namespace mely_compat_detail

template <class T, itree_entry<T> T::*field, class C = compare<T>> class itree_core {
    typedef mely_compat_detail::rb_ops<T, field> ops;

protected:
    T *rb_root;
    const C cmp;

    template <class F> T *descend(F sought) const
    {
        T *ret = nullptr;
        for (T *n = rb_root; n;) {
            int r = sought(n);
            if (r == 0)
                ret = n; /* equal keys: keep looking for the first */
            n = r <= 0 ? left(n) : right(n);
        }
        return ret;
    }

public:
    itree_core() : rb_root(nullptr), cmp() {}
    itree_core(const C &c) : rb_root(nullptr), cmp(c) {}
    itree_core(const itree_core &) = delete;
    itree_core &operator=(const itree_core &) = delete;

    void clear() { rb_root = nullptr; }
    void deleteall()
    {
        for (T *n = min_postorder(rb_root), *nx; n; n = nx) {
            nx = next_postorder(n);
            delete n;
        }
        clear();
    }
    void deleteall_correct() { deleteall(); }

    T *root() const { return rb_root; }
    static T *up(const T *n) { return ops::up(n); }
    static T *left(const T *n) { return ops::kid(n, 0); }
    static T *right(const T *n) { return ops::kid(n, 1); }

    T *first() const { return ops::extreme(rb_root, 0); }
    T *last() const { return ops::extreme(rb_root, 1); }
    static T *next(const T *n) { return ops::step(n, 1); }
    static T *prev(const T *n) { return ops::step(n, 0); }

    /* The first node of n's subtree in postorder, and the one after n. */
    static T *min_postorder(T *n)
    {
        if (n)
            while (T *c = left(n) ? left(n) : right(n))
                n = c;
        return n;
    }
    static T *next_postorder(const T *n)
    {
        T *p = up(n);
        if (p && left(p) == n && right(p))
            return min_postorder(right(p));
        return p;
    }

    void insert(T *n)
    {
        T *parent = nullptr;
        int side = 0;
        for (T *x = rb_root; x; x = ops::kid(x, side)) {
            parent = x;
            side = cmp(*n, *x) < 0 ? 0 : 1;
        }
        ops::link(&rb_root, n, parent, side);
    }
    void remove(T *n) { ops::erase(&rb_root, n); }

    T *search(typename callback<int, const T *>::ref cb) const
    {
        return descend([&](const T *n) { return (*cb)(n); });
    }
    template <class A1, class A2>
    T *search(int (*cb)(const A1 *, const A2 *, const T *), const A1 *a1, const A2 *a2) const
    {
        return descend([&](const T *n) { return cb(a1, a2, n); });
    }
    /* The first node at which cb says <= 0; the last at which it says >= 0. */
    template <class A1, class A2>
    T *lower_bound_impl(int (*cb)(const A1 *, const A2 *, const T *), const A1 *a1,
                        const A2 *a2) const
    {
        T *ret = nullptr;
        for (T *n = rb_root; n;) {
            if (cb(a1, a2, n) <= 0) {
                ret = n;
                n = left(n);
            } else {
                n = right(n);
            }
        }
        return ret;
    }
    template <class A1, class A2>
    T *upper_bound_impl(int (*cb)(const A1 *, const A2 *, const T *), const A1 *a1,
                        const A2 *a2) const
    {
        T *ret = nullptr;
        for (T *n = rb_root; n;) {
            if (cb(a1, a2, n) >= 0) {
                ret = n;
                n = right(n);
            } else {
                n = left(n);
            }
        }
        return ret;
    }

    void traverse(typename callback<void, T *>::ref cb)
    {
        for (T *n = first(), *nx; n; n = nx) {
            nx = next(n);
            (*cb)(n);
        }
    }
    void traverse(void (T::*fn)())
    {
        for (T *n = first(), *nx; n; n = nx) {
            nx = next(n);
            (n->*fn)();
        }
    }

    /* True if the links, the colors and the order are consistent. */
    bool _check() const
    {
        return !ops::red(rb_root) && ops::check(rb_root, nullptr, cmp) > 0;
    }
};

template <class K, class V, K V::*key, itree_entry<V> V::*field, class C = compare<K>>
class itree : public itree_core<V, field, keyfunc_2<int, V, K, key, C>> {
    typedef keyfunc_2<int, V, K, key, C> cmp_t;
    typedef itree_core<V, field, cmp_t> core_t;
    const C kcmp;

    static int skvcmp(const C *c, const K *k, const V *v) { return (*c)(*k, v->*key); }

public:
    itree() : kcmp() {}
    itree(const C &c) : core_t(cmp_t(c)), kcmp(c) {}

    V *operator[](const K &k) { return this->search(skvcmp, &kcmp, &k); }
    const V *operator[](const K &k) const { return this->search(skvcmp, &kcmp, &k); }
    V *lower_bound(const K &k) const { return this->lower_bound_impl(skvcmp, &kcmp, &k); }
    V *upper_bound(const K &k) const { return this->upper_bound_impl(skvcmp, &kcmp, &k); }
};

#endif /* MELY_COMPAT_ITREE_H */
