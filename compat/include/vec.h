/* SPDX-License-Identifier: MIT */
/*
 * vec.h (mely-compat): libasync's growable array, vec<T>.
 *
 *   vec<T> v;                    empty; copies copy the elements
 *   v.push_back(x), v.push_back()   append a copy (or a default T); returns a
 *                                reference to the new element
 *   v.emplace_back(args...)      append T(args...)
 *   v.pop_back(), v.pop_front()  remove the last / first element and return it;
 *                                both O(1) (pop_front only moves a start index)
 *   v.popn_back(n), v.popn_front(n)   remove n elements, returning nothing
 *   v.size(), v.empty(), v[i], v.front(), v.back()
 *   v.base(), v.lim()            pointers to the first element and one past the
 *                                last: `for (T *p = v.base(); p < v.lim(); p++)`;
 *                                begin()/end() are the same (range-for works)
 *   v.setsize(n)                 shrink (destroying) or grow (default T's) to n
 *   v.reserve(n)                 room for n MORE elements without reallocation
 *   v.clear(), v.reverse(), v.swap(w), v += w
 *   vec<T[n]>                    elements are array<T, n> (array.h): elm_t
 *
 * Growth: when an element does not fit, a vector holding room for nalloc
 * elements that needs nwanted either slides its elements back to the start
 * of its storage (a queue: push_back + pop_front; if nwanted <= nalloc / 2)
 * or moves them to new storage for vec_resize_fn(nalloc, nwanted, objid)
 * elements: by default the smallest power of two above both (2, 4, 8, ...),
 * so both stay O(1) amortized; libasync's rule, call for call. Pushing,
 * reserving or setsize may move the elements: pointers and references into
 * the vector are then stale (as in libasync).
 *   set_vec_resizer(new my_resizer)   a class derived from vec_resizer_t
 *                                decides instead (resize(nalloc, nwanted,
 *                                objid) returns the capacity; a smaller one
 *                                than nwanted counts as nwanted). Install it
 *                                before other threads use vectors: the old
 *                                one is deleted at once.
 *   vec_obj_id_t<T>              the objid of vec<T>'s calls: 0, unless the
 *                                program specializes it (before any use of
 *                                vec<T>)
 * vec.h also gives msb.h, array.h and opnew.h, as libasync's did.
 *
 * The second template argument of libasync's vec<T, N> (N elements stored in
 * the object itself) is accepted and ignored: storage is always on the heap.
 * An empty vector holds no memory. Index and empty-vector checks are asserts
 * when the program defines CHECK_BOUNDS (libasync's switch), none otherwise.
 * A vec is not thread-safe: one color (or a lock) per vector.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_VEC_H
#define MELY_COMPAT_VEC_H

#include <atomic>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <new>
#include <utility>

#include <sys/types.h>

#include "array.h"
#include "msb.h"
#include "opnew.h"
#include "sysconf.h" /* as libasync's (through opnew.h) */
#include "stllike.h"

#ifndef assert /* keep async.h's assert, which NDEBUG does not remove */
#include <assert.h>
#endif

#ifdef CHECK_BOUNDS
#define MELY_COMPAT_VEC_CHECK(cond) assert(cond)
#else
#define MELY_COMPAT_VEC_CHECK(cond) ((void)0)
#endif

/* The growth policy: a program may install its own (libasync's hook). */
class vec_resizer_t {
public:
    virtual ~vec_resizer_t() {}
    /* The new capacity (in elements) of a vector holding room for nalloc
     * that needs nwanted; objid is vec_obj_id_t<T>()() of its T. */
    virtual size_t resize(u_int nalloc, u_int nwanted, int objid) = 0;
};

/* The objid a vec<T> passes to the resizer: 0 unless the program
 * specializes this template for its T (before any vec<T> grows). */
template <class T> struct vec_obj_id_t {
    vec_obj_id_t() {}
    int operator()() const { return 0; }
};

namespace mely_compat_detail {
inline std::atomic<vec_resizer_t *> vec_resizer{nullptr};

inline size_t vec_new_capacity(size_t nalloc, size_t nwanted, int objid)
{
    if (vec_resizer_t *r = vec_resizer.load(std::memory_order_acquire))
        return r->resize((u_int)nalloc, (u_int)nwanted, objid);
    return (size_t)1 << fls(nalloc > nwanted ? nalloc : nwanted);
}
} // namespace mely_compat_detail

/* Installs v (allocated with new; NULL: back to the default policy) and
 * deletes the previous resizer. */
inline void set_vec_resizer(vec_resizer_t *v)
{
    delete mely_compat_detail::vec_resizer.exchange(v, std::memory_order_acq_rel);
}

/* The capacity the current policy gives: the resizer's answer, by default
 * the smallest power of two above both nalloc and nwanted. */
inline size_t vec_resize_fn(u_int nalloc, u_int nwanted, int objid)
{
    return mely_compat_detail::vec_new_capacity(nalloc, nwanted, objid);
}

template <class T, size_t N = 0> class vec {
    template <class, size_t> friend class vec;

public:
    typedef T value_type;
    typedef typename toarray(T) elm_t;

private:
    typedef elm_t E;

    /* Storage [base_, lim_), elements [first_, last_). */
    E *base_ = nullptr;
    E *first_ = nullptr;
    E *last_ = nullptr;
    E *lim_ = nullptr;

    static E *allocate(size_t n) { return std::allocator<E>().allocate(n); }
    void release_storage()
    {
        if (base_)
            std::allocator<E>().deallocate(base_, (size_t)(lim_ - base_));
        base_ = first_ = last_ = lim_ = nullptr;
    }

    /* Moves the elements to dst: fresh storage, or the start of this one
     * (front to back, so a slot is written only once its element left). */
    void relocate(E *dst)
    {
        E *d = dst;
        for (E *s = first_; s < last_; ++s, ++d) {
            ::new ((void *)d) E(std::move(*s));
            s->~E();
        }
        first_ = dst;
        last_ = d;
    }

    /* Room for n more elements at the end. */
    void make_room(size_t n)
    {
        size_t want = size() + n, cap = (size_t)(lim_ - base_);
        if (first_ != base_ && want <= cap / 2) {
            relocate(base_);
            return;
        }
        size_t ncap = mely_compat_detail::vec_new_capacity(cap, want, vec_obj_id_t<T>()());
        if (ncap < want)
            ncap = want;
        E *nb = allocate(ncap);
        E *ob = base_;
        relocate(nb);
        if (ob)
            std::allocator<E>().deallocate(ob, cap);
        base_ = nb;
        lim_ = nb + ncap;
    }

    template <class U> void append(const U *from, size_t n)
    {
        reserve(n);
        for (size_t i = 0; i < n; i++)
            ::new ((void *)last_++) E(from[i]);
    }

    void destroy_all()
    {
        while (last_ > first_)
            (--last_)->~E();
    }

public:
    typedef E *iterator;
    typedef const E *const_iterator;

    vec() noexcept {}
    vec(const vec &v) { append(v.first_, v.size()); }
    template <size_t M> vec(const vec<T, M> &v) { append(v.first_, v.size()); }
    vec(vec &&v) noexcept { swap(v); }
    explicit vec(std::initializer_list<E> l) { append(l.begin(), l.size()); }
    ~vec()
    {
        destroy_all();
        release_storage();
    }

    vec &operator=(const vec &v)
    {
        if (this != &v) {
            clear();
            append(v.first_, v.size());
        }
        return *this;
    }
    template <size_t M> vec &operator=(const vec<T, M> &v)
    {
        clear();
        append(v.first_, v.size());
        return *this;
    }
    vec &operator=(vec &&v) noexcept
    {
        if (this != &v) {
            clear();
            swap(v);
        }
        return *this;
    }
    template <size_t M> vec &operator+=(const vec<T, M> &v)
    {
        size_t n = v.size();
        reserve(n); /* v may be *this: copy by index after the move */
        for (size_t i = 0; i < n; i++)
            ::new ((void *)last_++) E(v.first_[i]);
        return *this;
    }

    /* Destroys the elements and frees the storage. */
    void clear()
    {
        destroy_all();
        release_storage();
    }
    void reserve(size_t n)
    {
        if ((size_t)(lim_ - last_) < n)
            make_room(n);
    }
    void setsize(size_t n)
    {
        size_t s = size();
        if (n < s) {
            popn_back(s - n);
        } else if (n > s) {
            reserve(n - s);
            while (size() < n)
                ::new ((void *)last_++) E();
        }
    }

    E *base() { return first_; }
    const E *base() const { return first_; }
    E *lim() { return last_; }
    const E *lim() const { return last_; }
    E *begin() { return first_; }
    const E *begin() const { return first_; }
    E *end() { return last_; }
    const E *end() const { return last_; }

    size_t size() const { return (size_t)(last_ - first_); }
    bool empty() const { return last_ == first_; }

    E &front()
    {
        MELY_COMPAT_VEC_CHECK(!empty());
        return *first_;
    }
    const E &front() const
    {
        MELY_COMPAT_VEC_CHECK(!empty());
        return *first_;
    }
    E &back()
    {
        MELY_COMPAT_VEC_CHECK(!empty());
        return last_[-1];
    }
    const E &back() const
    {
        MELY_COMPAT_VEC_CHECK(!empty());
        return last_[-1];
    }
    E &operator[](ptrdiff_t i)
    {
        MELY_COMPAT_VEC_CHECK(i >= 0 && (size_t)i < size());
        return first_[i];
    }
    const E &operator[](ptrdiff_t i) const
    {
        MELY_COMPAT_VEC_CHECK(i >= 0 && (size_t)i < size());
        return first_[i];
    }

    E &push_back()
    {
        reserve(1);
        return *::new ((void *)last_++) E();
    }
    E &push_back(const E &e)
    {
        if (last_ == lim_) {
            E copy(e); /* e may live in this vector */
            reserve(1);
            return *::new ((void *)last_++) E(std::move(copy));
        }
        return *::new ((void *)last_++) E(e);
    }
    E &push_back(E &&e)
    {
        if (last_ == lim_) {
            E moved(std::move(e));
            reserve(1);
            return *::new ((void *)last_++) E(std::move(moved));
        }
        return *::new ((void *)last_++) E(std::move(e));
    }
    template <class... A> E &emplace_back(A &&...a)
    {
        if (last_ == lim_) {
            E made(std::forward<A>(a)...);
            reserve(1);
            return *::new ((void *)last_++) E(std::move(made));
        }
        return *::new ((void *)last_++) E(std::forward<A>(a)...);
    }

    E pop_back()
    {
        MELY_COMPAT_VEC_CHECK(!empty());
        --last_;
        E v(std::move(*last_));
        last_->~E();
        return v;
    }
    void popn_back(size_t n)
    {
        MELY_COMPAT_VEC_CHECK(n <= size());
        for (; n; n--)
            (--last_)->~E();
    }
    E pop_front()
    {
        MELY_COMPAT_VEC_CHECK(!empty());
        E v(std::move(*first_));
        first_->~E();
        ++first_;
        return v;
    }
    void popn_front(size_t n)
    {
        MELY_COMPAT_VEC_CHECK(n <= size());
        for (; n; n--)
            (first_++)->~E();
    }

    void reverse()
    {
        for (E *a = first_, *b = last_; a < b && a < --b; ++a) {
            using std::swap;
            swap(*a, *b);
        }
    }
    void swap(vec &v) noexcept
    {
        std::swap(base_, v.base_);
        std::swap(first_, v.first_);
        std::swap(last_, v.last_);
        std::swap(lim_, v.lim_);
    }
};

template <class T, size_t N> inline void swap(vec<T, N> &a, vec<T, N> &b) noexcept
{
    a.swap(b);
}

#endif /* MELY_COMPAT_VEC_H */
