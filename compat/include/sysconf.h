/* SPDX-License-Identifier: MIT */
/*
 * sysconf.h (mely-compat): what libasync's sysconf.h gave every program that
 * includes async.h: the standard and system headers, and the portability
 * macros, typedefs and helpers real libasync code uses (U64F, INT64,
 * htonq, xmalloc, stringify, __FL__ ...). Included, as libasync's was, by
 * async.h, amisc.h, str.h, suio++.h, vec.h and refcnt.h (so callback.h and
 * the containers); not under the original Mely's mely.h (its programs got
 * less, see doc/porting.md).
 * What libasync's sysconf.h had and this one does not (autoconf HAVE_*
 * results, NULL as 0, setuid helpers, dmalloc hooks, ...) is listed in
 * doc/porting.md with the reason.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_SYSCONF_H
#define MELY_COMPAT_SYSCONF_H

/* PRId64 and INT64_MAX in C++ code, as libasync asked for them. */
#ifndef __STDC_LIMIT_MACROS
#define __STDC_LIMIT_MACROS 1
#endif
#ifndef __STDC_FORMAT_MACROS
#define __STDC_FORMAT_MACROS 1
#endif

#include <sys/time.h>
#include <time.h>
#include <sys/times.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stddef.h>
#include <ctype.h>
#include <stdint.h>
#include <inttypes.h>
#include <limits.h>
#include <unistd.h>
#include <string.h>

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/uio.h>
#include <sys/param.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <sys/resource.h>

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pwd.h>
#include <grp.h>
#include <signal.h>
#include <netinet/in.h>
#include <arpa/inet.h>

/* ---- Macros -------------------------------------------------------------------- */

#define __concatenate(t1, t2) t1##t2
#define concatenate(t1, t2) __concatenate(t1, t2)
#define __stringify(s) #s
#define stringify(s) __stringify(s)
/* "file.C:123": where a diagnostic comes from. */
#define __FL__ __FILE__ ":" stringify(__LINE__)

/* A 64-bit integer constant, and the printf length modifiers of u_int64_t
 * and off_t ("%" U64F "u", "%" OTF "d"). */
#if ULONG_MAX == 0xffffffffffffffffUL
#define INT64(n) n##L
#define U64F "l"
#else
#define INT64(n) n##LL
#define U64F "ll"
#endif
#if defined(__LP64__) || !(defined(_FILE_OFFSET_BITS) && _FILE_OFFSET_BITS == 64)
#define OTF "l"
#else
#define OTF "ll"
#endif

#define xoffsetof(type, member) ((size_t)(&((type *)0)->member))
/* Allocate 2^n - MALLOCRESV bytes to fill malloc's blocks. */
#define MALLOCRESV 16
/* Old compilers' workarounds, empty with any g++ that builds this. */
#define PRIVDEST
#define Xtmpl

#ifndef UIO_MAXIOV
#define UIO_MAXIOV 16
#endif
#ifndef PATH_MAX
#define PATH_MAX 1024
#endif

/* The BSD name of the modification time, as libasync gave it on Linux. */
#ifndef HAVE_ST_MTIMESPEC
#define st_mtimespec st_mtim
#define HAVE_ST_MTIMESPEC 1
#endif

typedef char *iovbase_t;

/* libasync's sysconf.h turned on the programs' MAINTAINER code (debugging
 * aids: sfslite's aiod.C traces requests under it and does not compile
 * without it) unless the program defined MAINTAINER as 0. */
#ifndef MAINTAINER
#define MAINTAINER 1
#elif !MAINTAINER
#undef MAINTAINER
#endif

/* Two results of libasync's configure that programs test to choose a system
 * call (aiod.C: pread/pwrite, else lseek then read/write, which moves the
 * file's position); glibc has both. The other HAVE_* are absent (see
 * doc/porting.md). */
#define HAVE_PREAD 1
#define HAVE_PWRITE 1

/* ---- 64-bit byte order ---------------------------------------------------------- */

#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
static inline u_int64_t htonq(u_int64_t v) { return v; }
static inline u_int64_t ntohq(u_int64_t v) { return v; }
#else
static inline u_int64_t htonq(u_int64_t v) { return __builtin_bswap64(v); }
static inline u_int64_t ntohq(u_int64_t v) { return __builtin_bswap64(v); }
#endif

/* ---- Allocation that never returns NULL ------------------------------------------- */

/* malloc, realloc and strdup that print "out of memory" and abort instead of
 * returning NULL; xfree is free. Thread-safe (as malloc is). */
void *xmalloc(size_t size);
void *xrealloc(void *p, size_t size);
char *xstrdup(const char *s);
#define txmalloc(size) xmalloc(size)
#define xfree free

#endif /* MELY_COMPAT_SYSCONF_H */
