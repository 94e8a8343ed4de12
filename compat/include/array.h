/* SPDX-License-Identifier: MIT */
/*
 * array.h (mely-compat): libasync's fixed-size array, a C array wrapped in a
 * class so that it can be copied, assigned, allocated with a scalar `new` and
 * placed in containers (vec.h uses it for vec<T[n]>).
 *
 *   array<T, n> a;          n elements of T (C arrays as T become arrays too:
 *                           array<int[4], 2> holds two array<int, 4>)
 *   array<T, n>::elm_t      the element type; array<T, n>::nelm is n
 *   a.size()                n (static)
 *   a[i], a.base(), a.lim() an element (checked by assert when the program
 *                           defines CHECK_BOUNDS), the first element, one past
 *                           the last; begin()/end() are the same (range-for)
 *   toarray(T)              T, with every C array level turned into array<>:
 *                           `typename toarray(T)` in a template
 *
 * Elements are default-initialized, as in a C array. As in libasync, a program
 * that says `using namespace std;` must write ::array or std::array.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_ARRAY_H
#define MELY_COMPAT_ARRAY_H

#include <stddef.h>
#ifndef assert /* keep async.h's assert, which NDEBUG does not remove */
#include <assert.h>
#endif

template <class T, size_t n> class array;

namespace mely_compat_detail {
template <class T> struct toarray_t {
    typedef T type;
};
template <class T, size_t n> struct toarray_t<T[n]> {
    typedef array<typename toarray_t<T>::type, n> type;
};
} // namespace mely_compat_detail

#define toarray(T) mely_compat_detail::toarray_t<T>::type

template <class T, size_t n> class array {
public:
    typedef typename toarray(T) elm_t;
    enum { nelm = n };

private:
    elm_t a_[n];

public:
    static size_t size() { return n; }

    elm_t *base() { return a_; }
    const elm_t *base() const { return a_; }
    elm_t *lim() { return a_ + n; }
    const elm_t *lim() const { return a_ + n; }
    elm_t *begin() { return a_; }
    const elm_t *begin() const { return a_; }
    elm_t *end() { return a_ + n; }
    const elm_t *end() const { return a_ + n; }

    elm_t &operator[](ptrdiff_t i)
    {
#ifdef CHECK_BOUNDS
        assert(i >= 0 && (size_t)i < n);
#endif
        return a_[i];
    }
    const elm_t &operator[](ptrdiff_t i) const
    {
#ifdef CHECK_BOUNDS
        assert(i >= 0 && (size_t)i < n);
#endif
        return a_[i];
    }
};

#endif /* MELY_COMPAT_ARRAY_H */
