/* SPDX-License-Identifier: MIT */
/*
 * dynenum.h (mely-compat): libasync's enum looked up by name at run time.
 *
 *   class color_enum_t : public dynamic_enum_t {
 *   public:
 *       color_enum_t() : dynamic_enum_t(-1, false, "color")
 *       {
 *           static const pair_t p[] = {{"red", 1}, {"green", 2}, {NULL, 0}};
 *           init(p, true);
 *       }
 *   };
 *   e["red"]              the value, or the default (the constructor's first
 *                         argument) with a warning unless quiet
 *   e.lookup(s, &v)       true and v = the value, or false and v = the default
 *   e.lookup(s, dowarn)   the value, or the default (warning if dowarn)
 * init(pairs, check): the pairs up to the one with a NULL name; a name given
 * twice keeps its last value; check: panics unless every pair then looks up
 * to its own value. The warning, warn_not_found(s) (virtual), is libasync's:
 * "XX dynamic enum (NAME): no value for key=S". A NULL s is never found.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_DYNENUM_H
#define MELY_COMPAT_DYNENUM_H

#include "async.h"
#include "qhash.h"

class dynamic_enum_t {
public:
    struct pair_t {
        const char *n;
        int v;
    };

    explicit dynamic_enum_t(int def, bool quiet = false, str n = str())
        : _def_val(def), _quiet(quiet), _enum_name(n)
    {
    }
    virtual ~dynamic_enum_t() {}

    int operator[](const str &s) const { return lookup(s, !_quiet); }

    bool lookup(const str &s, int *v) const
    {
        const int *p = s ? _tab[s] : nullptr;
        if (v)
            *v = p ? *p : _def_val;
        return p != nullptr;
    }
    int lookup(const str &s, bool dowarn = true) const
    {
        int v;
        if (!lookup(s, &v) && dowarn)
            warn_not_found(s);
        return v;
    }

protected:
    void init(const pair_t pairs[], bool chk = false)
    {
        for (const pair_t *p = pairs; p->n; p++)
            _tab.insert(p->n, p->v);
        if (chk)
            for (const pair_t *p = pairs; p->n; p++)
                assert(lookup(p->n, false) == p->v);
    }
    virtual void warn_not_found(str s) const
    {
        warn << "XX dynamic enum (" << (_enum_name ? _enum_name : str("anonymous"))
             << "): no value for key=" << (s ? s : str("(null)")) << "\n";
    }

private:
    const int _def_val;
    bool _quiet;
    const str _enum_name;
    qhash<str, int> _tab;
};

#endif /* MELY_COMPAT_DYNENUM_H */
