/* SPDX-License-Identifier: MIT */
/*
 * aiod_prot.h (mely-compat): the request formats of libasync's aiod
 * protocol, under the names and with the layout libasync's helper program
 * (sfslite's async/aiod.C) and its client used: a request lives in the
 * memory the client shares with its helpers, at an offset (an aiomsg_t) that
 * goes down a pipe to a helper and back when the request is done.
 *
 *   aiomsg_t                an offset in the shared memory
 *   aiod_op                 AIOD_NOP, AIOD_UNLINK .. AIOD_STATVFS (a path or
 *                           two), AIOD_OPEN .. AIOD_WRITE (a file handle),
 *                           AIOD_FSTAT, AIOD_OPENDIR .. AIOD_CLOSEDIR,
 *                           AIOD_MKDIR; the numbers are the protocol's
 *   aiod_reqhdr             what every request starts with: op, err (an errno
 *                           value the helper sets, 0 for success)
 *   aiod_nop                op, err, nopsize
 *   aiod_pathop             op, err, bufsize, pathbuf: path1(), path2(),
 *                           statbuf(), statvfsbuf(), setpath(p1[, p2]),
 *                           totsize(bufsize)
 *   aiod_mkdirop            op, err, bufsize, mode, pathbuf: path(),
 *                           setpath(p), totsize(bufsize)
 *   aiod_file               handle, oflags, dev, ino, path: an open file
 *   aiod_iobuf              pos, buf (an aiomsg_t), len
 *   aiod_fhop               op, err, fh (an aiomsg_t of an aiod_file), and
 *                           mode (open) or length (ftrunc) or iobuf (read,
 *                           write, readdir)
 *   aiod_fstat              op, err, fh, statbuf
 *
 * In libasync this header belonged to the helper program and the client of
 * aio.C. compat's aiod (aiod.h) runs requests on threads and does not use
 * shared memory (doc/porting.md says why); the header is here so that code
 * written against the protocol, the helper program first of all, builds
 * unchanged, and it keeps the byte layout: a helper built against compat
 * serves libasync's client (checked by hand, see doc/porting.md).
 * Written for mely from the protocol's names and layout; no line comes from
 * libasync.
 */
#ifndef MELY_COMPAT_AIOD_PROT_H
#define MELY_COMPAT_AIOD_PROT_H

#include "sysconf.h"

#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

typedef size_t aiomsg_t;

/* An open file, as the client describes it to the helpers: `handle`
 * numbers it, `path` and `oflags` let a helper open it, `dev` and `ino`
 * (filled in by the helper that opened it first) let the others check that
 * the path still names the same file. `path` runs past the structure. */
struct aiod_file {
    int handle;
    int oflags;
    dev_t dev;
    ino_t ino;
    char path[1];
};

/* The data of a read or write: `len` bytes at offset `buf` of the shared
 * memory, at file position `pos` (-1: the file's own position). The helper
 * puts the byte count (or -1) in `len`. */
struct aiod_iobuf {
    off_t pos;
    aiomsg_t buf;
    ssize_t len;
};

enum aiod_op {
    AIOD_NOP = 0,

    /* aiod_pathop */
    AIOD_UNLINK = 1,
    AIOD_LINK = 2,
    AIOD_SYMLINK = 3,
    AIOD_RENAME = 4,
    AIOD_READLINK = 5,
    AIOD_STAT = 6,
    AIOD_LSTAT = 7,
    AIOD_GETCWD = 8,
    AIOD_STATVFS = 9,

    /* aiod_fhop */
    AIOD_OPEN = 10,
    AIOD_CLOSE = 11,
    AIOD_FSYNC = 12,
    AIOD_FTRUNC = 13,
    AIOD_READ = 14,
    AIOD_WRITE = 15,

    /* aiod_fstat */
    AIOD_FSTAT = 16,

    /* aiod_fhop, on directories */
    AIOD_OPENDIR = 17,
    AIOD_READDIR = 18,
    AIOD_CLOSEDIR = 19,

    /* aiod_mkdirop */
    AIOD_MKDIR = 20
};

struct aiod_reqhdr {
    aiod_op op;
    int err;
};

/* Touches `nopsize` bytes of the shared memory (growing a sparse file). */
struct aiod_nop {
    aiod_op op;
    int err;
    size_t nopsize;
};

/* A request on one path (path1) or two (path2 follows path1's NUL). The same
 * `bufsize` bytes then carry the answer: a struct stat, a struct statvfs, or
 * the bytes of a readlink or getcwd (their number back in bufsize). */
struct aiod_pathop {
    aiod_op op;
    int err;
    size_t bufsize;
    alignas(off_t) char pathbuf[2];

    char *path1() { return pathbuf; }
    char *path2() { return pathbuf + strlen(pathbuf) + 1; }
    struct stat *statbuf() { return reinterpret_cast<struct stat *>(pathbuf); }
    struct statvfs *statvfsbuf() { return reinterpret_cast<struct statvfs *>(pathbuf); }
    /* Both paths, each with its NUL (the caller sized bufsize for them). */
    void setpath(const char *p1, const char *p2 = "")
    {
        size_t n1 = strlen(p1);
        memcpy(pathbuf, p1, n1 + 1);
        memcpy(pathbuf + n1 + 1, p2, strlen(p2) + 1);
    }
    /* The bytes a request with a bufsize-byte pathbuf occupies. */
    static size_t totsize(size_t bufsize) { return offsetof(aiod_pathop, pathbuf) + bufsize; }
};

struct aiod_mkdirop {
    aiod_op op;
    int err;
    size_t bufsize;
    int mode;
    alignas(off_t) char pathbuf[1];

    char *path() { return pathbuf; }
    void setpath(const char *p) { memcpy(pathbuf, p, strlen(p) + 1); }
    static size_t totsize(size_t bufsize)
    {
        size_t n = offsetof(aiod_mkdirop, pathbuf) + bufsize;
        return n < sizeof(aiod_mkdirop) ? sizeof(aiod_mkdirop) : n;
    }
};

/* A request on an open file: `fh` is the offset of its aiod_file. */
struct aiod_fhop {
    aiod_op op;
    int err;
    aiomsg_t fh;
    union {
        mode_t mode;       /* AIOD_OPEN */
        off_t length;      /* AIOD_FTRUNC */
        aiod_iobuf iobuf;  /* AIOD_READ, AIOD_WRITE, AIOD_READDIR */
    };
};

struct aiod_fstat {
    aiod_op op;
    int err;
    aiomsg_t fh;
    struct stat statbuf;
};

#endif /* MELY_COMPAT_AIOD_PROT_H */
