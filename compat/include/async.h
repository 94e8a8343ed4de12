/*
 * async.h (mely-compat): what libasync and libasync-smp programs include.
 * Callbacks and wrap (callback.h), reference counts (refcnt.h), diagnostics
 * (err.h), socket helpers (amisc.h) and the event loop, on the mely runtime.
 * Build with: g++ prog.C $(pkg-config --cflags --libs mely-compat)
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_ASYNC_H
#define MELY_COMPAT_ASYNC_H

#ifdef MELY_COMPAT_LEGACY_MELY_H
#error "mely-compat: async.h and the original Mely's mely.h give cbv different types; include one of them"
#endif
#define MELY_COMPAT_ASYNC_FLAVOR 1

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

#endif /* MELY_COMPAT_ASYNC_H */
