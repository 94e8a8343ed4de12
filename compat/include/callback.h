/* SPDX-License-Identifier: MIT */
/*
 * callback.h (mely-compat): libasync-style callbacks and the wrap() family.
 *
 *   callback<R, B1, B2, B3>   a reference-counted function object taking 0 to 3
 *                             call-time arguments (B1..B3, void when unused);
 *                             ::ref and ::ptr are its handles.
 *   wrap(f, a1, ..., aN)      binds 0 to 5 leading arguments of f: a function, a
 *                             member function (object first: C *, ref<C>, ptr<C>
 *                             or refcounted<C> *; the counted forms keep the
 *                             object alive), or another callback.
 *   cwrap / cpwrap            ... with a color (and a priority) as the last
 *                             argument(s), libasync-smp style;
 *   wrap_timeleft, cwrap_timeleft, cpwrap_timeleft
 *                             ... with a time-left annotation (expected cycles);
 *   wrap_penalty, cwrap_penalty, cpwrap_penalty
 *                             ... with a time-left and a work-stealing penalty
 *                             (new here; see doc/porting.md).
 *
 * wrap() returns a freshly allocated callback whose count is 0, as
 * `New refcounted<T>` does: the first handle made from it takes it to 1. Posting
 * a callback (cpucb, delaycb, fdcb...) holds a count until it has run.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_CALLBACK_H
#define MELY_COMPAT_CALLBACK_H

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "mely-compat needs C++17 (g++ 11 and later default to it; older: add -std=gnu++17)"
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "refcnt.h"

/* Colors 0 .. MAX_COLORS-1; negative colors -(i+1) are pinned to worker i. */
#ifndef MAX_COLORS
#define MAX_COLORS 65536
#endif

/* An out-of-range color: a message on stderr, exit(EXIT_FAILURE). */
[[noreturn]] void mely_compat_bad_color(int color);
/* The shared handler descriptor for (timeleft, penalty): interned, never freed. */
const void *mely_compat_handler(uint64_t timeleft, uint32_t penalty);

/* Callback memory (compat/lib/alloc.cpp): each thread keeps, per size class
 * of 64, 128, 192 and 256 bytes, a stack of free blocks' addresses. Its fast
 * paths are here, inline, so that a callback's allocation and free are a few
 * instructions where its size is known (a constant: the class is folded);
 * the rest is the library's. */
struct mely_compat_cb_stack {
    void **top;   /* the next free slot */
    void **base;  /* empty when top == base */
    void **limit; /* full when top == limit */
};
enum { MELY_COMPAT_CB_LINE = 64, MELY_COMPAT_CB_CLASSES = 4, MELY_COMPAT_CB_AHEAD = 4 };
/* This thread's stacks, one per class; NULL until the library made them (and
 * always NULL in AddressSanitizer builds of the library, which use malloc). */
extern __thread mely_compat_cb_stack *mely_compat_cb_stacks __attribute__((tls_model("initial-exec")));
/* The bytes of callback memory the library got from malloc for its classes
 * (chunks), in use or free: it grows only when the callbacks in use (or
 * cached free) pass their most so far. New here, for benchmarks and tests. */
std::size_t mely_compat_cb_bytes() noexcept;
void *mely_compat_cb_alloc_slow(std::size_t size);
void mely_compat_cb_free_slow(void *p, std::size_t size) noexcept;

inline void *mely_compat_cb_alloc(std::size_t size)
{
    if (size - 1 < (std::size_t)MELY_COMPAT_CB_CLASSES * MELY_COMPAT_CB_LINE) {
        if (mely_compat_cb_stack *s = mely_compat_cb_stacks) {
            s += (size - 1) / MELY_COMPAT_CB_LINE;
            if (__builtin_expect(s->top != s->base, 1)) {
                /* The block that the MELY_COMPAT_CB_AHEAD-th allocation
                 * after this one takes is fetched for writing now: a block
                 * that another worker freed (it ran the callback) is in that
                 * worker's cache, and a constructor's stores would wait for
                 * it (a producer posting to other workers: 1.36 -> 1.15x
                 * native in cross-core wall time, one worker unchanged). */
                if (s->top - s->base > MELY_COMPAT_CB_AHEAD)
                    __builtin_prefetch(s->top[-1 - MELY_COMPAT_CB_AHEAD], 1);
                return *--s->top;
            }
        }
    }
    return mely_compat_cb_alloc_slow(size);
}

inline void mely_compat_cb_free(void *p, std::size_t size) noexcept
{
    if (size - 1 < (std::size_t)MELY_COMPAT_CB_CLASSES * MELY_COMPAT_CB_LINE) {
        if (mely_compat_cb_stack *s = mely_compat_cb_stacks) {
            s += (size - 1) / MELY_COMPAT_CB_LINE;
            if (__builtin_expect(s->top != s->limit, 1)) {
                *s->top++ = p;
                return;
            }
        }
    }
    mely_compat_cb_free_slow(p, size);
}

/* The time-left and penalty of a descriptor from mely_compat_handler(). */
uint32_t mely_compat_handler_timeleft(const void *h) noexcept;
uint32_t mely_compat_handler_penalty(const void *h) noexcept;

/* What every callback carries: color, priority, annotations, auto-free flag.
 * 32 bytes with the count and the virtual table pointer, so that a callback
 * binding a function and two words of arguments fits a 64-byte line (the
 * allocator's smallest block: alloc.cpp). */
class callback_base : public refcount {
public:
    static void *operator new(std::size_t size) { return mely_compat_cb_alloc(size); }
    static void operator delete(void *p, std::size_t size) noexcept { mely_compat_cb_free(p, size); }

    int color_ = 0;
    int prio_ = 0;
    std::atomic<bool> keep_{false}; /* setFlagAutoFree(false) holds a count */
    /* The interned descriptor of the annotations (time-left, penalty), a
     * mely_handler_t; NULL without annotation. */
    const void *handler_ = nullptr;

    /* Callbacks are freed when their count drops to 0 (not overridable, so
     * that release() needs no virtual call to finalize). */
    void finalize() final { delete this; }
    /* refcount_dec() for a callback. */
    void release() const
    {
        if (refcount_dec_nofin())
            delete this;
    }

    int getcolor() const noexcept { return color_; }
    int getprio() const noexcept { return prio_; }
    int get_timeleft() const noexcept
    {
        return handler_ ? (int)mely_compat_handler_timeleft(handler_) : 0;
    }
    int get_penalty() const noexcept
    {
        return handler_ ? (int)mely_compat_handler_penalty(handler_) : 0;
    }

    void setcolor(int c)
    {
        if (c >= MAX_COLORS)
            mely_compat_bad_color(c);
        color_ = c;
    }
    /* Any int, as in the original Mely (whose programs post with 65535 to
     * jump ahead and -400 to lag behind): kept as given, and clamped to the
     * runtime's 0..7 when posted. */
    void setprio(int p) noexcept { prio_ = p; }
    void set_timeleft(int tl)
    {
        set_annotations(tl < 0 ? 0 : (uint32_t)tl, (uint32_t)get_penalty());
    }
    void set_penalty(int pen)
    {
        set_annotations((uint32_t)get_timeleft(), pen < 0 ? 0 : (uint32_t)pen);
    }
    void set_annotations(uint32_t tl, uint32_t pen)
    {
        handler_ = (tl || pen) ? mely_compat_handler(tl, pen) : nullptr;
    }

    /* The original Mely's auto-free flag: true (the default) lets the runtime
     * drop the callback after it ran; false keeps a count, so that a raw
     * pointer to it may be posted again and again. */
    void setFlagAutoFree(bool autofree)
    {
        if (!autofree) {
            if (!keep_.exchange(true, std::memory_order_acq_rel))
                refcount_inc();
        } else if (keep_.exchange(false, std::memory_order_acq_rel)) {
            refcount_dec();
        }
    }
    bool getFlagAutoFree() const noexcept { return !keep_.load(std::memory_order_acquire); }

    /* What compat's trampoline does with a posted callback<void>: call it,
     * then drop the post's count. A virtual of its own, so that a wrap()'s
     * callback does both in one call (its call and free inline); for
     * callbacks that take arguments it is never called. */
    virtual void mely_compat_run_posted() = 0;

    /* What the callback calls, for the message compat prints when an
     * exception escapes it (doc/porting.md): the function's address (NULL
     * when not known: a virtual member function, a callback class of the
     * program's own) and its type (NULL when not known). */
    virtual const void *target_fn() const noexcept { return nullptr; }
    virtual const std::type_info *target_type() const noexcept { return nullptr; }
};

template <class R, class B1 = void, class B2 = void, class B3 = void> class callback;

/* Defined in the library: a callback that takes arguments was posted (the
 * legacy API's types forbid it). */
[[noreturn]] void mely_compat_posted_with_arguments();

template <class R> class callback<R, void, void, void> : public callback_base {
public:
    typedef ::ref<callback> ref;
    typedef ::ptr<callback> ptr;
    virtual R operator()() = 0;
    void mely_compat_run_posted() override
    {
        (*this)();
        release();
    }
};
template <class R, class B1> class callback<R, B1, void, void> : public callback_base {
public:
    typedef ::ref<callback> ref;
    typedef ::ptr<callback> ptr;
    virtual R operator()(B1) = 0;
    void mely_compat_run_posted() override { mely_compat_posted_with_arguments(); }
};
template <class R, class B1, class B2> class callback<R, B1, B2, void> : public callback_base {
public:
    typedef ::ref<callback> ref;
    typedef ::ptr<callback> ptr;
    virtual R operator()(B1, B2) = 0;
    void mely_compat_run_posted() override { mely_compat_posted_with_arguments(); }
};
template <class R, class B1, class B2, class B3> class callback : public callback_base {
public:
    typedef ::ref<callback> ref;
    typedef ::ptr<callback> ptr;
    virtual R operator()(B1, B2, B3) = 0;
    void mely_compat_run_posted() override { mely_compat_posted_with_arguments(); }
};

namespace mely_compat_detail {

template <class...> struct tl {};

/* Splits a parameter list after its first N types. */
template <std::size_t N, class Front, class Back, bool = (N == 0)> struct split;
template <std::size_t N, class... F, class... B> struct split<N, tl<F...>, tl<B...>, true> {
    typedef tl<F...> front;
    typedef tl<B...> back;
};
template <std::size_t N, class... F, class B0, class... B>
struct split<N, tl<F...>, tl<B0, B...>, false> : split<N - 1, tl<F..., B0>, tl<B...>> {};

/* The non-void types of B1, B2, B3. */
template <class L, class... X> struct nonvoid;
template <class... K> struct nonvoid<tl<K...>> {
    typedef tl<K...> type;
};
template <class... K, class X0, class... X> struct nonvoid<tl<K...>, X0, X...> {
    typedef typename std::conditional_t<std::is_void<X0>::value, nonvoid<tl<K...>, X...>,
                                        nonvoid<tl<K..., X0>, X...>>::type type;
};

/* How a member-function callback holds its object: counted objects are kept
 * alive (ref<C>, ptr<C>, refcounted<C> *), plain pointers are not. */
template <class O> struct holder {
    typedef O type;
};
template <class X> struct holder<refcounted<X> *> {
    typedef ref<refcounted<X>> type;
};
template <class X> inline X *raw(X *p) { return p; }
template <class X> inline X *raw(const ref<X> &p) { return p.get(); }
template <class X> inline X *raw(const ptr<X> &p) { return p.get(); }

/* What a wrap() calls, as target_fn() and target_type() tell it: a function,
 * a member function on an object (mem_call) or another callback (cb_call). */
template <class R, class... P> inline const void *target_addr(R (*f)(P...)) noexcept
{
    return reinterpret_cast<const void *>(f);
}
template <class R, class... P> inline const std::type_info *target_typeid(R (*f)(P...)) noexcept
{
    return &typeid(f);
}

/* A non-virtual member function's address, read from its pointer-to-member
 * in the Itanium C++ ABI (a code address and an adjustment; the "virtual"
 * bit is the address's low bit, or the adjustment's on ARM and MIPS). NULL
 * for a virtual one (its address depends on the object) or another ABI. */
template <class M> inline const void *pmf_address(M m) noexcept
{
#if defined(__GXX_ABI_VERSION)
    struct rep {
        std::uintptr_t ptr;
        std::ptrdiff_t adj;
    } r;
    static_assert(sizeof(M) == sizeof(rep), "an Itanium pointer to member function");
    std::memcpy(&r, &m, sizeof r);
#if defined(__arm__) || defined(__aarch64__) || defined(__mips__)
    bool is_virtual = r.adj & 1;
#else
    bool is_virtual = r.ptr & 1;
#endif
    return is_virtual ? nullptr : reinterpret_cast<const void *>(r.ptr);
#else
    (void)m;
    return nullptr;
#endif
}

template <class R, class H, class M> struct mem_call {
    H h;
    M m;
    template <class... X> R operator()(X &&...x) const
    {
        return (raw(h)->*m)(std::forward<X>(x)...);
    }
};
template <class R, class H, class M>
inline const void *target_addr(const mem_call<R, H, M> &c) noexcept
{
    return pmf_address(c.m);
}
template <class R, class H, class M>
inline const std::type_info *target_typeid(const mem_call<R, H, M> &) noexcept
{
    return &typeid(M);
}

template <class R, class H> struct cb_call {
    H h;
    template <class... X> R operator()(X &&...x) const { return (*h)(std::forward<X>(x)...); }
};
template <class R, class H> inline const void *target_addr(const cb_call<R, H> &c) noexcept
{
    return c.h->target_fn();
}
template <class R, class H>
inline const std::type_info *target_typeid(const cb_call<R, H> &c) noexcept
{
    return c.h->target_type();
}

/* The concrete callback: fn called with the bound arguments, then the
 * call-time ones. */
template <class R, class Fn, class Bound, class... B>
class callback_fn final : public callback<R, B...> {
    Fn fn_;
    Bound bound_;

public:
    template <class... A>
    explicit callback_fn(Fn fn, A &&...a) : fn_(std::move(fn)), bound_(std::forward<A>(a)...)
    {
    }
    R operator()(B... b) override
    {
        return std::apply([&](auto &...f) -> R { return fn_(f..., static_cast<B &&>(b)...); },
                          bound_);
    }
    void mely_compat_run_posted() override
    {
        if constexpr (sizeof...(B) == 0) {
            std::apply([&](auto &...f) { fn_(f...); }, bound_);
            if (this->refcount_dec_nofin())
                delete this; /* final: no virtual call, the free inline */
        } else {
            mely_compat_posted_with_arguments();
        }
    }
    const void *target_fn() const noexcept override { return target_addr(fn_); }
    const std::type_info *target_type() const noexcept override { return target_typeid(fn_); }
};

template <class R, class... F, class... B, class Fn, class... A>
callback<R, B...> *bind(tl<F...>, tl<B...>, Fn fn, A &&...a)
{
    static_assert(sizeof...(B) <= 3, "wrap: a callback takes at most 3 call-time arguments");
    typedef std::tuple<std::remove_cv_t<std::remove_reference_t<F>>...> bound;
    return new callback_fn<R, Fn, bound, B...>(std::move(fn), std::forward<A>(a)...);
}

template <class R, class... P, class Fn, class Tup, std::size_t... I>
auto bind_from(tl<P...>, Fn fn, Tup &t, std::index_sequence<I...>)
{
    static_assert(sizeof...(I) <= 5, "wrap: at most 5 bound arguments");
    static_assert(sizeof...(I) <= sizeof...(P), "wrap: more arguments than the function takes");
    typedef split<sizeof...(I), tl<>, tl<P...>> S;
    return bind<R>(typename S::front(), typename S::back(), std::move(fn),
                   std::get<I>(std::move(t))...);
}

/* The forms: how many trailing annotation arguments, and what they set. */
struct form_wrap {
    static constexpr std::size_t K = 0;
    template <std::size_t N, class Tup> static void apply(callback_base &, Tup &) {}
};
struct form_cwrap {
    static constexpr std::size_t K = 1;
    template <std::size_t N, class Tup> static void apply(callback_base &cb, Tup &t)
    {
        cb.setcolor((int)std::get<N>(t));
    }
};
struct form_cpwrap {
    static constexpr std::size_t K = 2;
    template <std::size_t N, class Tup> static void apply(callback_base &cb, Tup &t)
    {
        cb.setcolor((int)std::get<N>(t));
        cb.setprio((int)std::get<N + 1>(t));
    }
};
struct form_wrap_timeleft {
    static constexpr std::size_t K = 1;
    template <std::size_t N, class Tup> static void apply(callback_base &cb, Tup &t)
    {
        cb.set_timeleft((int)std::get<N>(t));
    }
};
struct form_cwrap_timeleft {
    static constexpr std::size_t K = 2;
    template <std::size_t N, class Tup> static void apply(callback_base &cb, Tup &t)
    {
        cb.setcolor((int)std::get<N>(t));
        cb.set_timeleft((int)std::get<N + 1>(t));
    }
};
struct form_cpwrap_timeleft {
    static constexpr std::size_t K = 3;
    template <std::size_t N, class Tup> static void apply(callback_base &cb, Tup &t)
    {
        cb.setcolor((int)std::get<N>(t));
        cb.setprio((int)std::get<N + 1>(t));
        cb.set_timeleft((int)std::get<N + 2>(t));
    }
};
struct form_wrap_penalty {
    static constexpr std::size_t K = 2;
    template <std::size_t N, class Tup> static void apply(callback_base &cb, Tup &t)
    {
        int tl = (int)std::get<N>(t), pen = (int)std::get<N + 1>(t);
        cb.set_annotations(tl < 0 ? 0 : (uint32_t)tl, pen < 0 ? 0 : (uint32_t)pen);
    }
};
struct form_cwrap_penalty {
    static constexpr std::size_t K = 3;
    template <std::size_t N, class Tup> static void apply(callback_base &cb, Tup &t)
    {
        cb.setcolor((int)std::get<N>(t));
        form_wrap_penalty::apply<N + 1>(cb, t);
    }
};
struct form_cpwrap_penalty {
    static constexpr std::size_t K = 4;
    template <std::size_t N, class Tup> static void apply(callback_base &cb, Tup &t)
    {
        cb.setcolor((int)std::get<N>(t));
        cb.setprio((int)std::get<N + 1>(t));
        form_wrap_penalty::apply<N + 2>(cb, t);
    }
};

template <class Form, class R, class... P, class Fn, class... A>
auto make(tl<P...> params, Fn fn, A &&...a)
{
    static_assert(sizeof...(A) >= Form::K, "wrap: missing color/priority/annotation arguments");
    constexpr std::size_t N = sizeof...(A) - Form::K;
    auto t = std::forward_as_tuple(std::forward<A>(a)...);
    auto *cb = bind_from<R>(params, std::move(fn), t, std::make_index_sequence<N>());
    Form::template apply<N>(*cb, t);
    return cb;
}

} // namespace mely_compat_detail

/* Each form F gets six overloads: a function, a member function (const or
 * not) on an object, and a callback (raw pointer, ref or ptr) whose leading
 * call-time arguments are bound. */
#define MELY_COMPAT_WRAP_FORM(NAME, FORM)                                                         \
    template <class R, class... P, class... A> inline auto NAME(R (*f)(P...), A &&...a)           \
    {                                                                                             \
        return mely_compat_detail::make<mely_compat_detail::FORM, R>(                             \
            mely_compat_detail::tl<P...>(), f, std::forward<A>(a)...);                            \
    }                                                                                             \
    template <class O, class R, class C, class... P, class... A>                                  \
    inline auto NAME(O &&obj, R (C::*m)(P...), A &&...a)                                         \
    {                                                                                             \
        typename mely_compat_detail::holder<std::decay_t<O>>::type h(std::forward<O>(obj));       \
        return mely_compat_detail::make<mely_compat_detail::FORM, R>(                             \
            mely_compat_detail::tl<P...>(),                                                       \
            mely_compat_detail::mem_call<R, decltype(h), decltype(m)>{h, m},                      \
            std::forward<A>(a)...);                                                               \
    }                                                                                             \
    template <class O, class R, class C, class... P, class... A>                                  \
    inline auto NAME(O &&obj, R (C::*m)(P...) const, A &&...a)                                   \
    {                                                                                             \
        typename mely_compat_detail::holder<std::decay_t<O>>::type h(std::forward<O>(obj));       \
        return mely_compat_detail::make<mely_compat_detail::FORM, R>(                             \
            mely_compat_detail::tl<P...>(),                                                       \
            mely_compat_detail::mem_call<R, decltype(h), decltype(m)>{h, m},                      \
            std::forward<A>(a)...);                                                               \
    }                                                                                             \
    template <class R, class B1, class B2, class B3, class... A>                                  \
    inline auto NAME(callback<R, B1, B2, B3> *cb, A &&...a)                                       \
    {                                                                                             \
        ::ref<callback<R, B1, B2, B3>> h(cb);                                                     \
        return mely_compat_detail::make<mely_compat_detail::FORM, R>(                             \
            typename mely_compat_detail::nonvoid<mely_compat_detail::tl<>, B1, B2, B3>::type(),   \
            mely_compat_detail::cb_call<R, decltype(h)>{h},                                       \
            std::forward<A>(a)...);                                                               \
    }                                                                                             \
    template <class R, class B1, class B2, class B3, class... A>                                  \
    inline auto NAME(const ::ref<callback<R, B1, B2, B3>> &cb, A &&...a)                          \
    {                                                                                             \
        return NAME(cb.get(), std::forward<A>(a)...);                                             \
    }                                                                                             \
    template <class R, class B1, class B2, class B3, class... A>                                  \
    inline auto NAME(const ::ptr<callback<R, B1, B2, B3>> &cb, A &&...a)                          \
    {                                                                                             \
        return NAME(cb.get(), std::forward<A>(a)...);                                             \
    }

MELY_COMPAT_WRAP_FORM(wrap, form_wrap)
MELY_COMPAT_WRAP_FORM(cwrap, form_cwrap)
MELY_COMPAT_WRAP_FORM(cpwrap, form_cpwrap)
MELY_COMPAT_WRAP_FORM(wrap_timeleft, form_wrap_timeleft)
MELY_COMPAT_WRAP_FORM(cwrap_timeleft, form_cwrap_timeleft)
MELY_COMPAT_WRAP_FORM(cpwrap_timeleft, form_cpwrap_timeleft)
MELY_COMPAT_WRAP_FORM(wrap_penalty, form_wrap_penalty)
MELY_COMPAT_WRAP_FORM(cwrap_penalty, form_cwrap_penalty)
MELY_COMPAT_WRAP_FORM(cpwrap_penalty, form_cpwrap_penalty)

#undef MELY_COMPAT_WRAP_FORM

#endif /* MELY_COMPAT_CALLBACK_H */
