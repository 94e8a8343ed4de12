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
 *
 * Growth doubles the storage; a vector used as a queue (push_back, pop_front)
 * slides its elements back to the start of the storage instead of growing
 * while it is at most half full, so both stay O(1) amortized. Pushing,
 * reserving or setsize may move the elements: pointers and references into
 * the vector are then stale (as in libasync).
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

#include <cassert>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <new>
#include <utility>

#include <sys/types.h>

#include "sysconf.h" /* as libasync's (through opnew.h) */
#include "stllike.h"

#ifdef CHECK_BOUNDS
#define MELY_COMPAT_VEC_CHECK(cond) assert(cond)
#else
#define MELY_COMPAT_VEC_CHECK(cond) ((void)0)
#endif

template <class T, size_t N = 0> class vec {
    template <class, size_t> friend class vec;

    /* Storage [base_, lim_), elements [first_, last_). */
    T *base_ = nullptr;
    T *first_ = nullptr;
    T *last_ = nullptr;
    T *lim_ = nullptr;

    static T *allocate(size_t n) { return std::allocator<T>().allocate(n); }
    void release_storage()
    {
        if (base_)
            std::allocator<T>().deallocate(base_, (size_t)(lim_ - base_));
        base_ = first_ = last_ = lim_ = nullptr;
    }

    /* Moves the elements to dst: fresh storage, or the start of this one
     * (front to back, so a slot is written only once its element left). */
    void relocate(T *dst)
    {
        T *d = dst;
        for (T *s = first_; s < last_; ++s, ++d) {
            ::new ((void *)d) T(std::move(*s));
            s->~T();
        }
        first_ = dst;
        last_ = d;
    }

    /* Room for n more elements at the end. */
    void make_room(size_t n)
    {
        size_t sz = size(), cap = (size_t)(lim_ - base_);
        if (first_ != base_ && sz + n <= cap / 2) {
            relocate(base_);
            return;
        }
        size_t ncap = cap ? 2 * cap : 4;
        if (ncap < sz + n)
            ncap = sz + n;
        T *nb = allocate(ncap);
        T *ob = base_;
        relocate(nb);
        if (ob)
            std::allocator<T>().deallocate(ob, cap);
        base_ = nb;
        lim_ = nb + ncap;
    }

    template <class U> void append(const U *from, size_t n)
    {
        reserve(n);
        for (size_t i = 0; i < n; i++)
            ::new ((void *)last_++) T(from[i]);
    }

    void destroy_all()
    {
        while (last_ > first_)
            (--last_)->~T();
    }

public:
    typedef T value_type;
    typedef T elm_t;
    typedef T *iterator;
    typedef const T *const_iterator;

    vec() noexcept {}
    vec(const vec &v) { append(v.first_, v.size()); }
    template <size_t M> vec(const vec<T, M> &v) { append(v.first_, v.size()); }
    vec(vec &&v) noexcept { swap(v); }
    explicit vec(std::initializer_list<T> l) { append(l.begin(), l.size()); }
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
            ::new ((void *)last_++) T(v.first_[i]);
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
                ::new ((void *)last_++) T();
        }
    }

    T *base() { return first_; }
    const T *base() const { return first_; }
    T *lim() { return last_; }
    const T *lim() const { return last_; }
    T *begin() { return first_; }
    const T *begin() const { return first_; }
    T *end() { return last_; }
    const T *end() const { return last_; }

    size_t size() const { return (size_t)(last_ - first_); }
    bool empty() const { return last_ == first_; }

    T &front()
    {
        MELY_COMPAT_VEC_CHECK(!empty());
        return *first_;
    }
    const T &front() const
    {
        MELY_COMPAT_VEC_CHECK(!empty());
        return *first_;
    }
    T &back()
    {
        MELY_COMPAT_VEC_CHECK(!empty());
        return last_[-1];
    }
    const T &back() const
    {
        MELY_COMPAT_VEC_CHECK(!empty());
        return last_[-1];
    }
    T &operator[](ptrdiff_t i)
    {
        MELY_COMPAT_VEC_CHECK(i >= 0 && (size_t)i < size());
        return first_[i];
    }
    const T &operator[](ptrdiff_t i) const
    {
        MELY_COMPAT_VEC_CHECK(i >= 0 && (size_t)i < size());
        return first_[i];
    }

    T &push_back()
    {
        reserve(1);
        return *::new ((void *)last_++) T();
    }
    T &push_back(const T &e)
    {
        if (last_ == lim_) {
            T copy(e); /* e may live in this vector */
            reserve(1);
            return *::new ((void *)last_++) T(std::move(copy));
        }
        return *::new ((void *)last_++) T(e);
    }
    T &push_back(T &&e)
    {
        if (last_ == lim_) {
            T moved(std::move(e));
            reserve(1);
            return *::new ((void *)last_++) T(std::move(moved));
        }
        return *::new ((void *)last_++) T(std::move(e));
    }
    template <class... A> T &emplace_back(A &&...a)
    {
        if (last_ == lim_) {
            T made(std::forward<A>(a)...);
            reserve(1);
            return *::new ((void *)last_++) T(std::move(made));
        }
        return *::new ((void *)last_++) T(std::forward<A>(a)...);
    }

    T pop_back()
    {
        MELY_COMPAT_VEC_CHECK(!empty());
        --last_;
        T v(std::move(*last_));
        last_->~T();
        return v;
    }
    void popn_back(size_t n)
    {
        MELY_COMPAT_VEC_CHECK(n <= size());
        for (; n; n--)
            (--last_)->~T();
    }
    T pop_front()
    {
        MELY_COMPAT_VEC_CHECK(!empty());
        T v(std::move(*first_));
        first_->~T();
        ++first_;
        return v;
    }
    void popn_front(size_t n)
    {
        MELY_COMPAT_VEC_CHECK(n <= size());
        for (; n; n--)
            (first_++)->~T();
    }

    void reverse()
    {
        for (T *a = first_, *b = last_; a < b && a < --b; ++a) {
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
