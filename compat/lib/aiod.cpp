/* SPDX-License-Identifier: MIT */
/*
 * aiod.cpp: libasync's aiod (aiod.h) on helper threads.
 *
 * libasync ran its blocking file calls in helper processes (the aiod
 * program), with the requests and buffers in a shared-memory file and their
 * offsets sent down a pipe. Here an aiod is a pool of `nproc` threads over
 * one queue of requests; buffers are ordinary memory, counted against
 * shmsize as libasync's shared memory limited them. A request is an object
 * (job) that a helper thread runs (run()) and then posts to the runtime, as
 * an event of the color the callback is to run on, where done() calls the
 * program's callback and the job is deleted. doc/porting.md says why threads.
 *
 * What the helper processes gave that threads do not, done by hand:
 * - the helper ran with umask 0, so open(O_CREAT) and mkdir gave exactly the
 *   mode asked for: a file or directory created here gets its mode set after
 *   (fchmod, chmod);
 * - the helper's getcwd(dir) was chdir(dir) then getcwd(): the process's
 *   current directory is shared by the threads, so it is realpath(dir) with
 *   chdir's checks (a directory, searchable);
 * - the helper's descriptors were not the program's: ours are close-on-exec.
 *
 * Counts: an aiod lives while the program has not called finalize(), or a
 * buffer, an open file (aiofh) or a request refers to it; it goes away on
 * the thread that drops the last reference (never a helper thread: jobs are
 * deleted on workers), joining its idle threads.
 */
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "aiod.h"
#include "internal.h"

using namespace mely_compat;

/* What aiod, aiofh and aiobuf let see of themselves (their friend). */
struct mely_compat_aiod {
    typedef aiod::state state;
    typedef aiofh::file file;

    /* A request: run() on a helper thread, done() on a worker, where it is
     * deleted. */
    struct job {
        aiod *const iod;          /* counted */
        mely_to_t to;             /* where done() runs */
        const callback_base *who; /* the program's callback (NULL: none), for messages */
        file *f = nullptr;        /* counted in f->users while queued or running */
        int err = 0;

        job(aiod *d, const callback_base *cb);
        virtual ~job();
        virtual void run() {}
        virtual void done() {}
    };

    static state *st(aiod *d) { return d->st_; }
    static void addref(aiod *d) { d->addref(); }
    static void delref(aiod *d) { d->delref(); }
    static aiod *owner(const aiobuf *b) { return b->iod_; }
    static aiofh *new_fh(aiod *d, file *f) { return New refcounted<aiofh>(d, f); }
};

struct aiofh::file {
    int fd = -1;          /* open()'s; -1 for opendir's */
    DIR *dir = nullptr;   /* opendir's, or a file's own for readdir (under dir_mu) */
    bool isdir = false;   /* made by opendir */
    /* Under the aiod's mu: */
    bool closing = false; /* closed, being closed, or never opened: no new request */
    int users = 0;        /* requests on it queued or running */
    std::mutex dir_mu;    /* one readdir at a time on `dir` */
};

struct aiod::state {
    std::mutex mu;
    std::condition_variable work; /* a job was queued, or stop */
    std::condition_variable idle; /* a file's users dropped to 0 */
    std::deque<mely_compat_aiod::job *> q;
    bool stop = false;
    std::vector<pthread_t> threads;

    /* 1 for the program until finalize(), 1 per buffer, aiofh and job. */
    std::atomic<long> refs{1};
    std::atomic<bool> finalized{false};

    /* Buffers (under mu). */
    size_t shmmax = 0;
    size_t used = 0;
    uint64_t frees = 0; /* buffers freed so far */
    struct waiter {
        callback<void>::ref cb;
        mely_to_t to;
    };
    std::vector<waiter> waiters; /* bufwait()'s */
    bool shmpin = false;
};

namespace {

typedef mely_compat_aiod acc;
typedef acc::job job;
typedef acc::state state_t;
typedef acc::file file_t;

/* Where a completion runs: the callback's own color if it has one, else
 * the color of the event making the request (0 outside events). */
mely_to_t where(const callback_base *cb)
{
    mely_to_t to;
    if (!cb) {
        to.prio = 0;
        to.handler = g_default_handler.load(std::memory_order_relaxed);
    } else {
        to = target(cb);
    }
    if (!cb || cb->getcolor() == 0)
        to.color = native_color(get_current_color());
    return to;
}

void job_done(void *arg) noexcept
{
    job *j = static_cast<job *>(arg);
    mely_compat_refresh_now();
    guard(j->who, "aiod", -1, [j] { j->done(); });
    delete j;
}

/* Queues j's done() on its color (any thread). */
void post_done(job *j)
{
    int err = mely_post_ex(runtime(), j->to.color, j->to.prio, j->to.handler, job_done, j, 0);
    if (err)
        die("aiod", err);
}

/* Completes j at once with err, without a helper thread. */
void fail_now(job *j, int err)
{
    j->err = err;
    post_done(j);
}

/* Queues j for a helper thread; on file f (counted as a user) if given.
 * false (j not queued) if f is closed or closing. */
bool submit(job *j, file_t *f = nullptr)
{
    state_t *st = acc::st(j->iod);
    {
        std::lock_guard<std::mutex> g(st->mu);
        if (f) {
            if (f->closing)
                return false;
            f->users++;
            j->f = f;
        }
        st->q.push_back(j);
    }
    st->work.notify_one();
    return true;
}

/* After run(): done() is posted, then the file has one user less, in that
 * order, so that a close waiting for it posts its own completion after
 * (the same color then runs the two in the order they were made). The file
 * outlives its users: whoever frees it (~aiofh, or the close job that took
 * it) waits for users == 0 first. */
void finish(state_t *st, job *j)
{
    file_t *f = j->f;
    post_done(j); /* j belongs to the worker from here */
    if (f) {
        std::lock_guard<std::mutex> g(st->mu);
        if (--f->users == 0)
            st->idle.notify_all();
    }
}

void *helper(void *arg)
{
    state_t *st = static_cast<state_t *>(arg);
    for (;;) {
        job *j;
        {
            std::unique_lock<std::mutex> l(st->mu);
            st->work.wait(l, [st] { return st->stop || !st->q.empty(); });
            if (st->q.empty())
                return nullptr; /* stop: the aiod is going (no job can be left) */
            j = st->q.front();
            st->q.pop_front();
        }
        j->run();
        finish(st, j);
    }
}

/* ---- The blocking calls, as libasync's helper made them ------------------------- */

/* open(), with the mode exactly as given for a file it creates (libasync's
 * helper ran with umask 0). To know whether it creates the file, an open
 * with O_CREAT and without O_EXCL first tries O_EXCL. */
int open_exact(const char *path, int flags, mode_t mode)
{
    flags |= O_CLOEXEC;
    if (!(flags & O_CREAT))
        return ::open(path, flags);
    int fd = -1;
    bool created = false;
    if (flags & O_EXCL) {
        fd = ::open(path, flags, mode);
        created = fd >= 0;
    } else {
        for (int tries = 0; tries < 2 && fd < 0; tries++) {
            fd = ::open(path, flags | O_EXCL, mode);
            if (fd >= 0) {
                created = true;
                break;
            }
            if (errno != EEXIST)
                return -1;
            fd = ::open(path, flags & ~O_CREAT);
            if (fd < 0 && errno != ENOENT)
                return -1;
            /* ENOENT: removed in between, or a dangling symlink (which
             * O_EXCL does not follow): try again, then open as asked. */
        }
        if (fd < 0)
            fd = ::open(path, flags, mode);
    }
    if (created)
        (void)!fchmod(fd, mode & 07777);
    return fd;
}

int mkdir_exact(const char *path, mode_t mode)
{
    if (::mkdir(path, mode) < 0)
        return -1;
    /* mkdir keeps the permission and sticky bits, and the set-group-ID bit
     * inherited from the parent; the umask took some away: put them back. */
    struct stat sb;
    if (::lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode) &&
        (sb.st_mode & 01777) != (mode & 01777))
        (void)!::chmod(path, (sb.st_mode & S_ISGID) | (mode & 01777));
    return 0;
}

/* chdir(dir) and getcwd(), without moving the process's directory. */
int getcwd_of(const char *dir, str *out)
{
    char *r = realpath(dir, nullptr);
    if (!r)
        return errno;
    int err = 0;
    struct stat sb;
    if (::stat(r, &sb) < 0)
        err = errno;
    else if (!S_ISDIR(sb.st_mode))
        err = ENOTDIR;
    else if (faccessat(AT_FDCWD, r, X_OK, AT_EACCESS) < 0)
        err = errno;
    else
        *out = str(r);
    free(r);
    return err;
}

/* ---- Requests on paths ------------------------------------------------------------- */

struct path_job : job {
    aiod_op op;
    str p1, p2;
    int mode = 0;
    callback<void, int>::ptr icb;
    callback<void, struct stat *, int>::ptr scb;
    callback<void, struct statvfs *, int>::ptr vcb;
    callback<void, str, int>::ptr tcb;
    struct stat sb;
    struct statvfs svfs;
    str text;

    path_job(aiod *d, const callback_base *cb, aiod_op o, const str &a, const str &b)
        : job(d, cb), op(o), p1(a), p2(b)
    {
    }

    void run() override
    {
        /* A null str is an empty path, as libasync's copy of it was. */
        const char *a = p1 ? p1.cstr() : "";
        const char *b = p2 ? p2.cstr() : "";
        int r = 0;
        switch (op) {
        case AIOD_UNLINK:
            r = ::unlink(a);
            break;
        case AIOD_LINK:
            r = ::link(a, b);
            break;
        case AIOD_SYMLINK:
            r = ::symlink(a, b);
            break;
        case AIOD_RENAME:
            r = ::rename(a, b);
            break;
        case AIOD_STAT:
            r = ::stat(a, &sb);
            break;
        case AIOD_LSTAT:
            r = ::lstat(a, &sb);
            break;
        case AIOD_STATVFS:
            r = ::statvfs(a, &svfs);
            if (r < 0) {
                /* libasync's helper said so on stderr, under its own name. */
                int e = errno;
                char line[PATH_MAX + 128];
                int n = snprintf(line, sizeof line, "aiod: statvfs('%s') failed: %s\n", a,
                                 strerror(e));
                if (n > (int)sizeof line - 1)
                    n = (int)sizeof line - 1;
                v_write(2, line, (size_t)n); /* one write: lines do not interleave */
                errno = e;
            }
            break;
        case AIOD_MKDIR:
            r = mkdir_exact(a, (mode_t)mode);
            break;
        case AIOD_READLINK: {
            char buf[PATH_MAX];
            ssize_t n = ::readlink(a, buf, sizeof buf);
            if (n >= 0)
                text = str(buf, (size_t)n);
            r = n < 0 ? -1 : 0;
            break;
        }
        case AIOD_GETCWD:
            err = getcwd_of(a, &text);
            return;
        default:
            err = EINVAL;
            return;
        }
        err = r < 0 ? errno : 0;
    }

    void done() override
    {
        if (icb)
            (*icb)(err);
        else if (scb)
            (*scb)(err ? nullptr : &sb, err);
        else if (vcb)
            (*vcb)(err ? nullptr : &svfs, err);
        else if (tcb)
            (*tcb)(err ? str() : text, err);
    }
};

/* ---- Opening ------------------------------------------------------------------------- */

struct open_job : job {
    str path;
    int flags, mode;
    ref<aiofh> fh;
    file_t *f;
    callback<void, ptr<aiofh>, int>::ref cb;

    open_job(aiod *d, const callback<void, ptr<aiofh>, int>::ref &c, const str &p, int fl, int m,
             file_t *file)
        : job(d, c), path(p), flags(fl), mode(m), fh(acc::new_fh(d, file)), f(file), cb(c)
    {
    }

    void run() override
    {
        const char *p = path ? path.cstr() : "";
        if (f->isdir) {
            f->dir = ::opendir(p);
            if (!f->dir)
                err = errno;
        } else {
            f->fd = open_exact(p, flags, (mode_t)mode);
            if (f->fd < 0)
                err = errno;
        }
        if (err) {
            /* Nothing to close: the aiofh is dropped quietly. */
            std::lock_guard<std::mutex> g(acc::st(iod)->mu);
            f->closing = true;
        }
    }

    void done() override
    {
        if (err)
            (*cb)(nullptr, err);
        else
            (*cb)(fh, 0);
    }
};

/* ---- Requests on open files ---------------------------------------------------------- */

struct rw_job : job {
    aiod_op op;
    off_t pos;
    ref<aiofh> fh;
    ptr<aiobuf> buf;
    u_int start, size;
    ssize_t n = -1;
    callback<void, ptr<aiobuf>, ssize_t, int>::ref cb;

    rw_job(aiod *d, const callback<void, ptr<aiobuf>, ssize_t, int>::ref &c, aiod_op o, off_t p,
           aiofh *h, const ptr<aiobuf> &b, u_int s, u_int len)
        : job(d, c), op(o), pos(p), fh(h), buf(b), start(s), size(len), cb(c)
    {
    }

    void run() override
    {
        char *p = buf->base() + start;
        if (op == AIOD_READDIR) {
            readdir_one(p);
            return;
        }
        if (f->isdir) {
            /* libasync's helper reopened opendir's path as a file and found
             * it was not the file it had been given. */
            err = ESTALE;
            return;
        }
        if (op == AIOD_READ)
            n = pos == -1 ? ::read(f->fd, p, size) : ::pread(f->fd, p, size, pos);
        else
            n = pos == -1 ? ::write(f->fd, p, size) : ::pwrite(f->fd, p, size, pos);
        if (n < 0)
            err = errno;
    }

    /* One entry as a whole struct dirent, or n = 0 at the end. */
    void readdir_one(char *p)
    {
        std::lock_guard<std::mutex> g(f->dir_mu);
        if (!f->dir) {
            /* A file opened with open(): readdir reads it as a directory
             * (ENOTDIR if it is none), as libasync's helper did. */
            int d = fcntl(f->fd, F_DUPFD_CLOEXEC, 0);
            if (d < 0 || !(f->dir = fdopendir(d))) {
                err = errno;
                if (d >= 0)
                    ::close(d);
                return;
            }
        }
        errno = 0;
        struct dirent *de = ::readdir(f->dir);
        if (!de) {
            err = errno;
            n = err ? -1 : 0;
            return;
        }
        /* libasync copied a whole struct dirent and called the result EIO
         * when the buffer was smaller (after writing past its end). */
        if (size < sizeof(struct dirent)) {
            err = EIO;
            return;
        }
        struct dirent out;
        memset(&out, 0, sizeof out);
        out.d_ino = de->d_ino;
        out.d_off = de->d_off;
        out.d_reclen = de->d_reclen;
        out.d_type = de->d_type;
        snprintf(out.d_name, sizeof out.d_name, "%s", de->d_name);
        memcpy(p, &out, sizeof out);
        n = (ssize_t)sizeof out;
    }

    void done() override
    {
        if (err)
            (*cb)(nullptr, -1, err);
        else
            (*cb)(buf, n, 0);
    }
};

struct simple_job : job {
    aiod_op op;
    off_t length;
    ref<aiofh> fh;
    callback<void, int>::ptr icb;
    callback<void, struct stat *, int>::ptr scb;
    struct stat sb;

    simple_job(aiod *d, const callback_base *cb, aiod_op o, off_t len, aiofh *h)
        : job(d, cb), op(o), length(len), fh(h)
    {
    }

    void run() override
    {
        if (f->isdir) {
            err = ESTALE; /* as rw_job */
            return;
        }
        int r;
        if (op == AIOD_FSYNC)
            r = ::fsync(f->fd);
        else if (op == AIOD_FTRUNC)
            r = ::ftruncate(f->fd, length);
        else
            r = ::fstat(f->fd, &sb);
        err = r < 0 ? errno : 0;
    }

    void done() override
    {
        if (icb)
            (*icb)(err);
        else
            (*scb)(err ? nullptr : &sb, err);
    }
};

/* Closes a file once the requests on it queued before are done. From
 * close(): holds the aiofh (which owns the file); from ~aiofh: owns it. */
struct close_job : job {
    ptr<aiofh> fh;
    file_t *owned = nullptr;
    file_t *target;
    callback<void, int>::ptr cb;

    close_job(aiod *d, const callback_base *c, file_t *t) : job(d, c), target(t) {}
    ~close_job() override { delete owned; }

    void run() override
    {
        state_t *st = acc::st(iod);
        {
            std::unique_lock<std::mutex> l(st->mu);
            st->idle.wait(l, [this] { return target->users == 0; });
        }
        int r = 0;
        if (target->dir) {
            r = ::closedir(target->dir);
            target->dir = nullptr;
        }
        if (target->fd >= 0) {
            r = ::close(target->fd);
            target->fd = -1;
        }
        err = r < 0 ? errno : 0;
    }

    void done() override
    {
        if (cb)
            (*cb)(err);
    }
};

/* bufwait()'s callback, once a buffer was freed. */
struct wake_job : job {
    callback<void>::ref cb;
    wake_job(aiod *d, const callback<void>::ref &c, mely_to_t t) : job(d, c), cb(c) { to = t; }
    void done() override { (*cb)(); }
};

/* The thread's last failed bufalloc: its aiod and how many buffers that
 * aiod had freed then (so that bufwait knows one was freed since). */
thread_local const aiod *t_failed_iod;
thread_local uint64_t t_failed_frees;

size_t round_pow2(size_t n)
{
    size_t p = aiod::minbuf;
    while (p < n)
        p <<= 1;
    return p;
}

} // namespace

mely_compat_aiod::job::job(aiod *d, const callback_base *cb)
    : iod(d), to(where(cb)), who(cb)
{
    acc::addref(d);
}

mely_compat_aiod::job::~job()
{
    acc::delref(iod); /* last: the job's other members are gone by now */
}

/* ---- aiod ------------------------------------------------------------------------------- */

aiod::aiod(u_int nproc, ssize_t shmsize, size_t mb, bool shmpin, str, str)
    : st_(new state), maxbuf(mb)
{
    if (shmsize <= 0)
        panic("aiod: shmsize must be positive (%zd)\n", shmsize);
    runtime(); /* the completions' runtime, made on the program's thread */
    size_t unit = mb ? mb : 1;
    st_->shmmax = ((size_t)shmsize + unit - 1) / unit * unit;
    st_->shmpin = shmpin;

    /* libasync started nproc helper processes (0 of them never answered). */
    if (nproc == 0)
        nproc = 1;
    if (nproc > 256)
        nproc = 256;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    /* The helpers take no signals: the runtime's signal watches do. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = 0;
    for (u_int i = 0; i < nproc; i++) {
        pthread_t t;
        err = pthread_create(&t, &attr, helper, st_);
        if (err)
            break;
        pthread_setname_np(t, "mely-aiod");
        st_->threads.push_back(t);
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    pthread_attr_destroy(&attr);
    if (st_->threads.empty()) {
        fprintf(stderr, "mely-compat: aiod: cannot start a helper thread: %s\n", strerror(err));
        exit(EXIT_FAILURE);
    }
}

aiod::~aiod()
{
    {
        std::lock_guard<std::mutex> g(st_->mu);
        st_->stop = true;
    }
    st_->work.notify_all();
    pthread_t self = pthread_self();
    for (pthread_t t : st_->threads) {
        if (pthread_equal(t, self))
            pthread_detach(t); /* cannot happen (jobs die on workers); never join oneself */
        else
            pthread_join(t, nullptr);
    }
    delete st_;
}

void aiod::addref()
{
    st_->refs.fetch_add(1, std::memory_order_relaxed);
}

void aiod::delref()
{
    if (st_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
        delete this;
}

void aiod::finalize()
{
    /* Drops the program's reference, once (libasync's second finalize()
     * after the last reference was gone used freed memory). */
    if (!st_->finalized.exchange(true, std::memory_order_acq_rel))
        delref();
}

ptr<aiobuf> aiod::bufalloc(size_t len)
{
    if (len == 0 || len > maxbuf)
        panic("aiod::bufalloc: %zu bytes asked for, 1 to maxbuf (%zu) allowed\n", len, maxbuf);
    size_t charge = round_pow2(len);
    if (charge > st_->shmmax)
        charge = st_->shmmax;
    {
        std::lock_guard<std::mutex> g(st_->mu);
        if (st_->used + charge > st_->shmmax) {
            t_failed_iod = this;
            t_failed_frees = st_->frees;
            return nullptr;
        }
        st_->used += charge;
    }
    void *p = nullptr;
    size_t align = charge < 4096 ? charge : 4096;
    if (posix_memalign(&p, align, charge) != 0) {
        fprintf(stderr, "mely-compat: aiod: out of memory\n");
        abort();
    }
    if (st_->shmpin)
        (void)!mlock(p, charge);
    return New refcounted<aiobuf>(this, static_cast<char *>(p), len, charge);
}

void aiod::bufwait(cbv cb)
{
    mely_to_t to = where(cb);
    bool now;
    {
        std::lock_guard<std::mutex> g(st_->mu);
        /* Nothing to wait for when no buffer is in use, or one was freed
         * since this thread's bufalloc failed (between it and this call,
         * maybe on another core). */
        now = st_->used == 0 || (t_failed_iod == this && t_failed_frees != st_->frees);
        if (!now)
            st_->waiters.push_back(state::waiter{cb, to});
    }
    if (now)
        post_done(new wake_job(this, cb, to));
}

aiobuf::aiobuf(aiod *d, char *b, size_t len, size_t charge)
    : buf_(b), len_(len), iod_(d), charge_(charge)
{
    acc::addref(d);
}

aiobuf::~aiobuf()
{
    aiod::state *st = acc::st(iod_);
    if (st->shmpin)
        (void)!munlock(buf_, charge_);
    free(buf_);
    std::vector<aiod::state::waiter> wake;
    {
        std::lock_guard<std::mutex> g(st->mu);
        st->used -= charge_;
        st->frees++;
        wake.swap(st->waiters);
    }
    for (auto &w : wake)
        post_done(new wake_job(iod_, w.cb, w.to));
    acc::delref(iod_);
}

void aiod::unlink(str path, cbi cb)
{
    path_job *j = new path_job(this, cb, AIOD_UNLINK, path, str());
    j->icb = cb;
    submit(j);
}

void aiod::link(str from, str to, cbi cb)
{
    path_job *j = new path_job(this, cb, AIOD_LINK, from, to);
    j->icb = cb;
    submit(j);
}

void aiod::symlink(str from, str to, cbi cb)
{
    path_job *j = new path_job(this, cb, AIOD_SYMLINK, from, to);
    j->icb = cb;
    submit(j);
}

void aiod::rename(str from, str to, cbi cb)
{
    path_job *j = new path_job(this, cb, AIOD_RENAME, from, to);
    j->icb = cb;
    submit(j);
}

void aiod::statvfs(str file, cbstatvfs cb)
{
    path_job *j = new path_job(this, cb, AIOD_STATVFS, file, str());
    j->vcb = cb;
    submit(j);
}

void aiod::mkdir(str dir, int mode, cbi cb)
{
    path_job *j = new path_job(this, cb, AIOD_MKDIR, dir, str());
    j->mode = mode;
    j->icb = cb;
    submit(j);
}

void aiod::readlink(str path, cbsi cb)
{
    path_job *j = new path_job(this, cb, AIOD_READLINK, path, str());
    j->tcb = cb;
    submit(j);
}

void aiod::getcwd(str path, cbsi cb)
{
    path_job *j = new path_job(this, cb, AIOD_GETCWD, path, str());
    j->tcb = cb;
    submit(j);
}

void aiod::stat(str path, cbstat cb)
{
    path_job *j = new path_job(this, cb, AIOD_STAT, path, str());
    j->scb = cb;
    submit(j);
}

void aiod::lstat(str path, cbstat cb)
{
    path_job *j = new path_job(this, cb, AIOD_LSTAT, path, str());
    j->scb = cb;
    submit(j);
}

void aiod::open(str path, int flags, int mode, cbopen cb)
{
    file_t *f = new file_t;
    submit(new open_job(this, cb, path, flags, mode, f));
}

void aiod::opendir(str path, cbopen cb)
{
    file_t *f = new file_t;
    f->isdir = true;
    submit(new open_job(this, cb, path, 0, 0, f));
}

/* ---- aiofh --------------------------------------------------------------------------------- */

aiofh::aiofh(aiod *iod, file *f) : iod_(iod), f_(f)
{
    acc::addref(iod);
}

aiofh::~aiofh()
{
    /* Not closed by the program: close it now (no callback). The job takes
     * the file; it runs after the requests queued on it (none: each held
     * this aiofh). */
    aiod::state *st = acc::st(iod_);
    close_job *j = nullptr;
    {
        std::lock_guard<std::mutex> g(st->mu);
        if (!f_->closing) {
            f_->closing = true;
            j = new close_job(iod_, nullptr, f_);
            j->owned = f_;
            st->q.push_back(j);
        }
    }
    if (j)
        st->work.notify_one();
    else
        delete f_; /* closed (its close job is gone: it held this aiofh), or never opened */
    acc::delref(iod_);
}

void aiofh::close(cbi cb)
{
    close_job *j = new close_job(iod_, cb, f_);
    j->fh = mkref(this);
    j->cb = cb;
    aiod::state *st = acc::st(iod_);
    {
        std::lock_guard<std::mutex> g(st->mu);
        if (!f_->closing) {
            f_->closing = true;
            st->q.push_back(j);
            j = nullptr;
        }
    }
    if (j)
        fail_now(j, EBADF);
    else
        st->work.notify_one();
}

void aiofh::closedir(cbi cb)
{
    close(cb);
}

void aiofh::rw(int op, off_t pos, const ptr<aiobuf> &buf, u_int iostart, u_int iosize, cbrw cb)
{
    rw_job *j = new rw_job(iod_, cb, (aiod_op)op, pos, this, buf, iostart, iosize);
    /* libasync asserted on these; an error is kinder than an abort. */
    if (!buf || acc::owner(buf) != iod_ || iostart >= buf->size() || iosize == 0 ||
        iosize > buf->size() - iostart) {
        fail_now(j, EINVAL);
        return;
    }
    if (!submit(j, f_))
        fail_now(j, EBADF);
}

void aiofh::simpleop(int op, off_t length, cbi *icb, aiod::cbstat *scb)
{
    simple_job *j =
        new simple_job(iod_, icb ? (const callback_base *)*icb : (const callback_base *)*scb,
                       (aiod_op)op, length, this);
    if (icb)
        j->icb = *icb;
    else
        j->scb = *scb;
    if (!submit(j, f_))
        fail_now(j, EIO); /* libasync: a closed file's fsync, ftrunc, fstat */
}

void aiofh::fsync(cbi cb)
{
    simpleop(AIOD_FSYNC, 0, &cb, nullptr);
}

void aiofh::ftrunc(off_t length, cbi cb)
{
    simpleop(AIOD_FTRUNC, length, &cb, nullptr);
}

void aiofh::fstat(aiod::cbstat cb)
{
    simpleop(AIOD_FSTAT, 0, nullptr, &cb);
}

void aiofh::read(off_t pos, ptr<aiobuf> buf, cbrw cb)
{
    rw(AIOD_READ, pos, buf, 0, buf ? (u_int)buf->size() : 0, cb);
}

void aiofh::readdir(ptr<aiobuf> buf, cbrw cb)
{
    rw(AIOD_READDIR, 0, buf, 0, buf ? (u_int)buf->size() : 0, cb);
}

void aiofh::sread(off_t pos, ptr<aiobuf> buf, u_int iostart, u_int iosize, cbrw cb)
{
    rw(AIOD_READ, pos, buf, iostart, iosize, cb);
}

void aiofh::sreaddir(off_t pos, ptr<aiobuf> buf, u_int iostart, u_int iosize, cbrw cb)
{
    rw(AIOD_READDIR, pos, buf, iostart, iosize, cb);
}

void aiofh::write(off_t pos, ptr<aiobuf> buf, cbrw cb)
{
    rw(AIOD_WRITE, pos, buf, 0, buf ? (u_int)buf->size() : 0, cb);
}

void aiofh::swrite(off_t pos, ptr<aiobuf> buf, u_int iostart, u_int iosize, cbrw cb)
{
    rw(AIOD_WRITE, pos, buf, iostart, iosize, cb);
}
