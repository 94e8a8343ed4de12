/* SPDX-License-Identifier: MIT */
/*
 * async.h (mely-compat): what libasync and libasync-smp programs include.
 * The standard and system headers and portability macros (sysconf.h),
 * callbacks and wrap (callback.h), reference counts (refcnt.h), diagnostics
 * (err.h), socket helpers (amisc.h), the event loop, and the small helpers
 * libasync's amisc.h, err.h, init.h and litetime.h gave with them (below).
 * Build with: g++ prog.C $(pkg-config --cflags --libs mely-compat)
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_ASYNC_H
#define MELY_COMPAT_ASYNC_H

#ifdef MELY_COMPAT_LEGACY_MELY_H
#error "mely-compat: async.h and the original Mely's mely.h give cbv different types; include one of them"
#endif
#define MELY_COMPAT_ASYNC_FLAVOR 1

#include "sysconf.h"

/* The C++ headers libasync's own headers pulled in. */
#include <algorithm>
#include <initializer_list>
#include <new>
#include <typeinfo>
#include <utility>

#include "refcnt.h"
#include "callback.h"
#include "err.h"
#include "str.h"
#include "amisc.h"
#include "melycompat_loop.h"

typedef callback<void>::ref cbv;
typedef callback<void, int>::ref cbi;
typedef callback<void, bool>::ref cbb;

/* Callbacks that do nothing. */
extern const cbv &cbv_null;
extern const cbi &cbi_null;
extern const cbb &cbb_null;

/* `New` for callbacks, as libasync's callback.h named it. */
#define wNew New

#include "init.h"     /* INITFN, EXITFN, INIT */
#include "litetime.h" /* TIMESPEC_*, sfs_get_tsnow... */

/* assert (never compiled out) and myabort: err.h, as in libasync. */

#endif /* MELY_COMPAT_ASYNC_H */
