/* SPDX-License-Identifier: MIT */
/*
 * sfs_assert.h (mely-compat): libasync's debug-only assertion.
 *   DASSERT(cond)   nothing, as in libasync (its _SFS_DEBUG is always 0):
 *                   cond is neither compiled nor evaluated. Here, defining
 *                   SFS_DEBUG to 1 before including this header makes it
 *                   assert(cond).
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_SFS_ASSERT_H
#define MELY_COMPAT_SFS_ASSERT_H

#include <cassert>

#if defined(SFS_DEBUG) && SFS_DEBUG
#define DASSERT(x) assert(x)
#else
#define DASSERT(x) ((void)0)
#endif

#endif /* MELY_COMPAT_SFS_ASSERT_H */
