/* SPDX-License-Identifier: MIT */
/*
 * refcnt.h (mely-compat): libasync-style reference counting.
 *
 *   refcount       a base class holding a count; finalize() runs when the count
 *                  drops to 0 (default: delete this). Derive from it
 *                  (virtually, as libasync programs do) to use mkref().
 *   refcounted<T>  T with a count attached: allocate with New refcounted<T>(args).
 *   ref<T>         a counted handle that is never NULL.
 *   ptr<T>         a counted handle that may be NULL.
 *   mkref(p)       a ref<T> to an object whose class derives from refcount.
 *
 * Counts are atomic: a handle may be copied and dropped on any thread (a
 * callback created on one core can run and die on another). The objects
 * themselves are not made thread-safe: see doc/porting.md for the rule.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_REFCNT_H
#define MELY_COMPAT_REFCNT_H

#include <atomic>
#include <cstddef>
#include <type_traits>
#include <utility>

/* Every libasync header began with sysconf.h (through opnew.h); the original
 * Mely's mely.h, which includes this one, did not. */
#ifndef MELY_COMPAT_LEGACY_MELY_H
#include "sysconf.h"
#endif

#include "opnew.h" /* New, vNew: refcnt.h brought them in libasync too */

/* Called when a ref<T> would become NULL: prints a message and aborts. */
[[noreturn]] void mely_compat_ref_null(void);

class refcount {
    mutable std::atomic<int> refcount_cnt_{0};
    static constexpr int tryinc_flag = 0x40000000;

public:
    refcount() noexcept {}
    refcount(const refcount &) noexcept {}
    refcount &operator=(const refcount &) noexcept { return *this; }
    virtual ~refcount() {}

    /* Runs once the last counted handle is gone. */
    virtual void finalize() { delete this; }

    void refcount_inc() const noexcept { refcount_cnt_.fetch_add(1, std::memory_order_relaxed); }
    void refcount_dec() const
    {
        /* The sole holder may skip the atomic read-modify-write: nobody else
         * holds a handle that could copy it meanwhile (an object open to
         * refcount_tryinc never reads 1 here: its flag bit is set). */
        if (refcount_cnt_.load(std::memory_order_acquire) == 1) {
            refcount_cnt_.store(0, std::memory_order_relaxed);
        } else if ((refcount_cnt_.fetch_sub(1, std::memory_order_acq_rel) & ~tryinc_flag) != 1) {
            return;
        }
        const_cast<refcount *>(this)->finalize();
    }
    /* Drops a count; true if it was the last (the caller then finalizes).
     * The sole holder skips the atomic read-modify-write. */
    bool refcount_dec_nofin() const noexcept
    {
        return refcount_cnt_.load(std::memory_order_acquire) == 1 ||
               (refcount_cnt_.fetch_sub(1, std::memory_order_acq_rel) & ~tryinc_flag) == 1;
    }
    int refcount_getcnt() const noexcept
    {
        return refcount_cnt_.load(std::memory_order_relaxed) & ~tryinc_flag;
    }
    /* For an object that is found through a raw pointer (in a table its
     * destructor removes it from, under the table's lock): set once, before
     * the object is shared, refcount_open_tryinc() makes every release an
     * atomic read-modify-write, so that refcount_tryinc() can take a count
     * on it safely as long as its memory is there: it fails once the count
     * reached 0 (the object is being finalized) and never revives it. */
    void refcount_open_tryinc() const noexcept
    {
        refcount_cnt_.fetch_or(tryinc_flag, std::memory_order_relaxed);
    }
    bool refcount_tryinc() const noexcept
    {
        int v = refcount_cnt_.load(std::memory_order_relaxed);
        while (v & ~tryinc_flag)
            if (refcount_cnt_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel,
                                                    std::memory_order_relaxed))
                return true;
        return false;
    }
    /* Takes a count on an object that may be fresh (count 0, held by no
     * handle, so by no other thread either: a plain store will do). */
    void refcount_inc_maybe_fresh() const noexcept
    {
        if (refcount_cnt_.load(std::memory_order_relaxed) == 0)
            refcount_cnt_.store(1, std::memory_order_relaxed);
        else
            refcount_cnt_.fetch_add(1, std::memory_order_relaxed);
    }
};

template <class T> class refcounted : public T, public virtual refcount {
public:
    template <class... A> refcounted(A &&...a) : T(std::forward<A>(a)...) {}
};

template <class T> class ptr;

namespace mely_compat_detail {
template <class X, class T>
using counted_ptr_ok = std::enable_if_t<std::is_convertible<X *, T *>::value &&
                                        std::is_convertible<X *, const refcount *>::value>;
inline refcount *count_of(const refcount *c) { return const_cast<refcount *>(c); }
} // namespace mely_compat_detail

template <class T> class ref {
    T *p_;
    refcount *c_;
    template <class> friend class ref;
    template <class> friend class ::ptr;

public:
    typedef T element_type;

    template <class X, class = mely_compat_detail::counted_ptr_ok<X, T>>
    ref(X *p) : p_(p), c_(mely_compat_detail::count_of(p))
    {
        if (!p)
            mely_compat_ref_null();
        c_->refcount_inc();
    }
    ref(const ref &r) noexcept : p_(r.p_), c_(r.c_) { c_->refcount_inc(); }
    template <class U, class = std::enable_if_t<std::is_convertible<U *, T *>::value>>
    ref(const ref<U> &r) noexcept : p_(r.p_), c_(r.c_)
    {
        c_->refcount_inc();
    }
    template <class U, class = std::enable_if_t<std::is_convertible<U *, T *>::value>>
    ref(const ::ptr<U> &r) : p_(r.p_), c_(r.c_)
    {
        if (!p_)
            mely_compat_ref_null();
        c_->refcount_inc();
    }
    ~ref() { c_->refcount_dec(); }

    ref &operator=(const ref &r)
    {
        r.c_->refcount_inc();
        refcount *old = c_;
        p_ = r.p_;
        c_ = r.c_;
        old->refcount_dec();
        return *this;
    }
    template <class U> ref &operator=(const ref<U> &r) { return *this = ref(r); }
    template <class U> ref &operator=(const ::ptr<U> &r) { return *this = ref(r); }
    template <class X, class = mely_compat_detail::counted_ptr_ok<X, T>> ref &operator=(X *p)
    {
        return *this = ref(p);
    }

    T *operator->() const noexcept { return p_; }
    T &operator*() const noexcept { return *p_; }
    operator T *() const noexcept { return p_; }
    T *get() const noexcept { return p_; }

    /* cbv::ptr and the like: the nullable handle of the same type. */
    typedef ::ptr<T> ptr;
};

template <class T> class ptr {
    T *p_;
    refcount *c_;
    template <class> friend class ref;
    template <class> friend class ptr;

    void drop() noexcept
    {
        if (c_)
            c_->refcount_dec();
    }

public:
    typedef T element_type;

    ptr() noexcept : p_(nullptr), c_(nullptr) {}
    /* A handle that takes over a count already taken on c, p's count
     * (refcount_tryinc): made without reading p's virtual table, which a
     * constructor or destructor on another thread may be writing. */
    static ptr adopt_count(T *p, const refcount *c) noexcept
    {
        ptr r;
        r.p_ = p;
        r.c_ = mely_compat_detail::count_of(c);
        return r;
    }
    ptr(std::nullptr_t) noexcept : p_(nullptr), c_(nullptr) {}
    template <class X, class = mely_compat_detail::counted_ptr_ok<X, T>>
    ptr(X *p) : p_(p), c_(p ? mely_compat_detail::count_of(p) : nullptr)
    {
        if (c_)
            c_->refcount_inc();
    }
    ptr(const ptr &r) noexcept : p_(r.p_), c_(r.c_)
    {
        if (c_)
            c_->refcount_inc();
    }
    ptr(ptr &&r) noexcept : p_(r.p_), c_(r.c_)
    {
        r.p_ = nullptr;
        r.c_ = nullptr;
    }
    template <class U, class = std::enable_if_t<std::is_convertible<U *, T *>::value>>
    ptr(const ptr<U> &r) noexcept : p_(r.p_), c_(r.c_)
    {
        if (c_)
            c_->refcount_inc();
    }
    template <class U, class = std::enable_if_t<std::is_convertible<U *, T *>::value>>
    ptr(const ref<U> &r) noexcept : p_(r.p_), c_(r.c_)
    {
        c_->refcount_inc();
    }
    ~ptr() { drop(); }

    ptr &operator=(const ptr &r) noexcept
    {
        if (r.c_)
            r.c_->refcount_inc();
        drop();
        p_ = r.p_;
        c_ = r.c_;
        return *this;
    }
    ptr &operator=(ptr &&r) noexcept
    {
        if (this != &r) {
            drop();
            p_ = r.p_;
            c_ = r.c_;
            r.p_ = nullptr;
            r.c_ = nullptr;
        }
        return *this;
    }
    ptr &operator=(std::nullptr_t) noexcept
    {
        drop();
        p_ = nullptr;
        c_ = nullptr;
        return *this;
    }
    template <class U> ptr &operator=(const ptr<U> &r) { return *this = ptr(r); }
    template <class U> ptr &operator=(const ref<U> &r) { return *this = ptr(r); }
    template <class X, class = mely_compat_detail::counted_ptr_ok<X, T>> ptr &operator=(X *p)
    {
        return *this = ptr(p);
    }

    T *operator->() const noexcept { return p_; }
    T &operator*() const noexcept { return *p_; }
    operator T *() const noexcept { return p_; }
    T *get() const noexcept { return p_; }
};

/* A ref to an object whose class derives from refcount. */
template <class T> inline ref<T> mkref(T *p) { return ref<T>(p); }

#endif /* MELY_COMPAT_REFCNT_H */
