/* SPDX-License-Identifier: MIT */
/*
 * aiod.h (mely-compat): libasync's asynchronous file operations. Blocking
 * file system calls run on helper threads, never on a worker; each result
 * comes back as an event (see "Completions" below).
 *
 *   aiod *a = New aiod(nproc = 1, shmsize = 0x200000, maxbuf = 0x10000,
 *                      shmpin = false, path = NULL, tmpdir = NULL);
 *                       nproc helper threads (libasync: helper processes);
 *                       at most shmsize bytes of buffers (rounded up to a
 *                       multiple of maxbuf), none larger than maxbuf;
 *                       shmpin: mlock the buffers; path, tmpdir: the helper
 *                       program and its shared-memory file, unused here
 *   a->finalize()       the program is done with a: it goes away once the
 *                       last buffer, open file and request is gone
 *   a->bufalloc(len)    a ptr<aiobuf> of len bytes (1..maxbuf), or NULL while
 *                       shmsize bytes are in use; then a->bufwait(cb): cb runs
 *                       once a buffer has been freed (try bufalloc again)
 *   aiobuf: base(), size(), lim()
 *
 * Requests, with their callbacks (err: 0 or an errno value):
 *   a->unlink(path, cbi), link(from, to, cbi), symlink(target, path, cbi),
 *   rename(from, to, cbi), mkdir(path, mode, cbi)      (*cb)(err)
 *   a->stat(path, cb), lstat(path, cb)                 (*cb)(struct stat *, err)
 *   a->statvfs(path, cb)                               (*cb)(struct statvfs *, err)
 *   a->readlink(path, cb), getcwd(dir, cb)             (*cb)(str, err)
 *   a->open(path, flags, mode, cb), opendir(path, cb)  (*cb)(ptr<aiofh>, err)
 * and on an open file (aiofh):
 *   fh->read(pos, buf, cb), write(pos, buf, cb)        (*cb)(ptr<aiobuf>, ssize_t n, err)
 *   fh->sread(pos, buf, start, n, cb), swrite(...)     ... on n bytes at base() + start
 *   fh->readdir(buf, cb), sreaddir(pos, buf, start, n, cb)
 *                                                      one struct dirent per call; n = 0 at the end
 *   fh->fstat(cb)                                      (*cb)(struct stat *, err)
 *   fh->fsync(cbi), ftrunc(length, cbi), close(cbi), closedir(cbi)
 * A pointer or buffer handed to a callback is valid during the call only
 * (the aiobuf while a ptr holds it). pos -1 reads or writes at the file's
 * own position. A file whose last ptr<aiofh> goes is closed.
 * Errors are the errno values libasync gave, including its own: EBADF
 * (read, write, close of a closed file), EIO (fsync, ftrunc, fstat of a
 * closed file), ESTALE (read, write, fsync, ftrunc, fstat of a directory
 * opened with opendir), EIO (readdir into fewer bytes than a struct dirent);
 * EINVAL for a NULL buffer, another aiod's buffer or a range outside it
 * (libasync stopped on an assertion).
 *
 * Completions: a callback runs as an event, never inside the call that
 * made the request: with its own color when it has one (cwrap, cpwrap: not
 * 0), else with the color of the event that made the request (0 outside
 * events), so a plain wrap() continues the caller's work in order with it;
 * with its priority and annotations. bufwait's callback likewise.
 *
 * Thread-safety: a, its buffers and files may be used from any color.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_AIOD_H
#define MELY_COMPAT_AIOD_H

#include "async.h"
#include "ihash.h"
#include "aiod_prot.h"

class aiod;
class aiofh;
struct mely_compat_aiod;

class aiobuf {
    friend class aiod;
    friend class aiofh;
    friend struct mely_compat_aiod;

    char *const buf_;
    const size_t len_;
    aiod *const iod_;
    const size_t charge_; /* what it counts against shmsize */

    aiobuf(const aiobuf &) = delete;
    aiobuf &operator=(const aiobuf &) = delete;

protected:
    aiobuf(aiod *iod, char *buf, size_t len, size_t charge);
    ~aiobuf();

public:
    char *base() { return buf_; }
    const char *base() const { return buf_; }
    size_t size() const { return len_; }
    char *lim() { return buf_ + len_; }
    const char *lim() const { return buf_ + len_; }
};

class aiod {
    friend class aiobuf;
    friend class aiofh;
    friend struct mely_compat_aiod;

    typedef callback<void, str, int>::ref cbsi;
    typedef callback<void, struct stat *, int>::ref cbstat;
    typedef callback<void, struct statvfs *, int>::ref cbstatvfs;
    typedef callback<void, ptr<aiofh>, int>::ref cbopen;

    struct state; /* threads, queue, buffers, count (aiod.cpp) */
    state *const st_;

    aiod(const aiod &) = delete;
    aiod &operator=(const aiod &) = delete;
    ~aiod();
    void addref();
    void delref();

public:
    enum { minbuf = 0x40 };
    const size_t maxbuf;

    aiod(u_int nproc = 1, ssize_t shmsize = 0x200000, size_t maxbuf = 0x10000,
         bool shmpin = false, str path = NULL, str tmpdir = NULL);
    void finalize();

    ptr<aiobuf> bufalloc(size_t len);
    void bufwait(cbv cb);

    void unlink(str path, cbi cb);
    void link(str from, str to, cbi cb);
    void symlink(str from, str to, cbi cb);
    void rename(str from, str to, cbi cb);
    void statvfs(str file, cbstatvfs cb);
    void mkdir(str dir, int mode, cbi cb);
    void readlink(str path, cbsi cb);
    void getcwd(str path, cbsi cb);
    void stat(str path, cbstat cb);
    void lstat(str path, cbstat cb);
    void open(str path, int flags, int mode, cbopen cb);
    void opendir(str path, cbopen cb);
};

class aiofh : public virtual refcount {
    friend class aiod;
    friend struct mely_compat_aiod;

    typedef callback<void, ptr<aiobuf>, ssize_t, int>::ref cbrw;

    struct file; /* the descriptor (aiod.cpp) */
    aiod *const iod_;
    file *f_;

    void rw(int op, off_t pos, const ptr<aiobuf> &buf, u_int iostart, u_int iosize, cbrw cb);
    void simpleop(int op, off_t length, cbi *icb, aiod::cbstat *scb);

protected:
    aiofh(aiod *iod, file *f);
    ~aiofh();

public:
    void close(cbi cb);
    void closedir(cbi cb);
    void fsync(cbi cb);
    void ftrunc(off_t length, cbi cb);
    void read(off_t pos, ptr<aiobuf> buf, cbrw cb);
    void readdir(ptr<aiobuf> buf, cbrw cb);
    void sread(off_t pos, ptr<aiobuf> buf, u_int iostart, u_int iosize, cbrw cb);
    void sreaddir(off_t pos, ptr<aiobuf> buf, u_int iostart, u_int iosize, cbrw cb);
    void write(off_t pos, ptr<aiobuf> buf, cbrw cb);
    void swrite(off_t pos, ptr<aiobuf> buf, u_int iostart, u_int iosize, cbrw cb);
    void fstat(aiod::cbstat cb);
};

#endif /* MELY_COMPAT_AIOD_H */
