/* SPDX-License-Identifier: MIT */
/*
 * union.h (mely-compat): libasync's tagged union members, as rpcc's output and
 * its own symbol table use them.
 *
 *   struct shape {
 *       union {
 *           union_entry_base _base;      every member starts with the same
 *           union_entry<circle> c;       word: which type is selected (if any)
 *           union_entry<str> name;
 *       };
 *       shape() { _base.init(); }                 nothing selected
 *       shape(const shape &s) { _base.init(s._base); }
 *       ~shape() { _base.destroy(); }
 *   };
 *   s.c.select();          destroys what was selected (if another type) and
 *                          value-initializes a circle; nothing if circle is
 *                          selected already
 *   s.c->radius, *s.c, (circle *) s.c, s.c.addr()   the selected object
 *   s._base.destroy()      destroys the selected object; nothing selected
 *   s._base.assign(t._base)  selects t's type and copy-assigns t's object
 *   s._base.type()         &typeid of the selected type, NULL if none
 *   s.c.Xstompcast()       says "circle" is selected without constructing
 *                          one (the bytes are taken as they are)
 *   union_entry<void>      a member that holds nothing (an XDR void arm)
 *
 * Every union_entry is trivially constructible, copyable and destructible, so
 * that it may sit in a C++ union: the class holding the union calls init()
 * and destroy() itself, as above. When TUNION_DEBUG is defined (CHECK_BOUNDS
 * defines it, as in libasync), reaching a member other than the selected one
 * panics. Not here: union_entry<T[n]> (libasync's array.h form).
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_UNION_H
#define MELY_COMPAT_UNION_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <typeinfo>

#if !defined(TUNION_DEBUG) && defined(CHECK_BOUNDS)
#define TUNION_DEBUG 1
#endif

namespace mely_compat_detail {
/* "union_entry<T>::what when U is selected" on stderr, then abort (panic). */
[[noreturn]] inline void union_entry_misuse(const char *what, const std::type_info &want,
                                            const std::type_info *have)
{
    fprintf(stderr, "union_entry<%s>::%s when %s is selected\n", want.name(), what,
            have ? have->name() : "nothing");
    abort();
}
} // namespace mely_compat_detail

class union_entry_base {
protected:
    /* What a member knows of its type; one static table per type. */
    struct vtbl {
        const std::type_info *type;
        void (*destructor)(union_entry_base *);
        void (*assignop)(union_entry_base *, const union_entry_base *);
        std::size_t size;
    };
    const vtbl *vptr;

public:
    void init() { vptr = nullptr; }
    void init(const union_entry_base &b)
    {
        init();
        assign(b);
    }
    void destroy()
    {
        if (vptr)
            vptr->destructor(this);
        vptr = nullptr;
    }
    void assign(const union_entry_base &b)
    {
        if (&b == this)
            return;
        if (b.vptr)
            b.vptr->assignop(this, &b);
        else
            destroy();
    }
    const std::type_info *type() const { return vptr ? vptr->type : nullptr; }
};

template <class T> class union_entry : public union_entry_base {
    alignas(T) unsigned char m_[sizeof(T)];

    static const vtbl *table()
    {
        static const vtbl t = {&typeid(T), &destructor, &assignop, sizeof(T)};
        return &t;
    }
    static void destructor(union_entry_base *b)
    {
        static_cast<union_entry *>(b)->_addr()->~T();
    }
    static void assignop(union_entry_base *dst, const union_entry_base *src)
    {
        union_entry *d = static_cast<union_entry *>(dst);
        d->select();
        *d->_addr() = *static_cast<const union_entry *>(src)->_addr();
    }
    bool selected() const { return vptr && *vptr->type == typeid(T); }
    void verify() const
    {
#ifdef TUNION_DEBUG
        if (!selected())
            mely_compat_detail::union_entry_misuse("verify: accessed", typeid(T),
                                                   vptr ? vptr->type : nullptr);
#endif
    }
    T *_addr() { return std::launder(reinterpret_cast<T *>(m_)); }
    const T *_addr() const { return std::launder(reinterpret_cast<const T *>(m_)); }

public:
    T *addr()
    {
        verify();
        return _addr();
    }
    const T *addr() const
    {
        verify();
        return _addr();
    }
    T *operator->() { return addr(); }
    const T *operator->() const { return addr(); }
    T &operator*() { return *addr(); }
    const T &operator*() const { return *addr(); }
    operator T *() { return addr(); }
    operator const T *() const { return addr(); }

    void select()
    {
        if (selected())
            return;
        destroy();
        ::new (static_cast<void *>(m_)) T();
        vptr = table();
    }
    void Xstompcast()
    {
#ifdef TUNION_DEBUG
        if (!vptr || vptr->size != sizeof(T))
            mely_compat_detail::union_entry_misuse("Xstompcast: a cast that changes the size",
                                                   typeid(T), vptr ? vptr->type : nullptr);
#endif
        vptr = table();
    }
};

template <> class union_entry<void> : public union_entry_base {
    static const vtbl *table()
    {
        static const vtbl t = {&typeid(void), &destructor, &assignop, 0};
        return &t;
    }
    static void destructor(union_entry_base *) {}
    static void assignop(union_entry_base *dst, const union_entry_base *)
    {
        static_cast<union_entry *>(dst)->select();
    }

public:
    void select()
    {
        if (vptr && *vptr->type == typeid(void))
            return;
        destroy();
        vptr = table();
    }
    /* Anything may be taken as void. */
    void Xstompcast() { select(); }
};

#endif /* MELY_COMPAT_UNION_H */
