/* SPDX-License-Identifier: MIT */
/*
 * aiod.cpp: libasync's aiod (aiod.h). Reads, writes (positioned and at the
 * file's own position), stat, lstat, fstat, statvfs, ftrunc, fsync, links,
 * rename, mkdir, readlink, getcwd, opendir/readdir; modes as asked
 * whatever the umask; the errors libasync gave (errno values, its own EBADF,
 * EIO, ESTALE) and EINVAL for misuse; completions as events on the
 * callback's color, else the caller's, pinned colors too, never inside the
 * call; blocking calls off the workers (one worker, a helper blocked in
 * open() of a FIFO while timers run); bufalloc's limit and bufwait; many
 * concurrent requests from 16 colors with little buffer space; in-order
 * completions with one helper; the aiod and its threads gone once finalized
 * and unused. In child processes first: an exception from an aiod callback,
 * statvfs's message, bufalloc(0).
 */
#include "aiod.h"

#include <dirent.h>
#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <sys/resource.h>
#include <vector>

#include "ctest.h"

static std::string g_dir; /* scratch directory */
static str P(const char *name)
{
    return str((g_dir + "/" + name).c_str());
}

/* Helper threads of all aiods now ("mely-aiod" threads of this process). */
static int helper_threads()
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    CHECK(d);
    while (struct dirent *de = readdir(d)) {
        if (de->d_name[0] == '.')
            continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(comm, sizeof comm, f) && !strncmp(comm, "mely-aiod", 9))
            n++;
        fclose(f);
    }
    closedir(d);
    return n;
}

/* The process's descriptor open on path, or -1. */
static int fd_of(const std::string &path)
{
    for (int fd = 0; fd < 1024; fd++) {
        char link[64], target[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0 && std::string(target, (size_t)n) == path)
            return fd;
    }
    return -1;
}

/* ---- The sequence: each step makes one request whose callback checks and
 * goes on (all on color 0, from the previous step's callback). ---------- */

static aiod *A;
static std::vector<std::function<void()>> g_steps;
static size_t g_step;
static ptr<aiofh> F, R, DH;
static ptr<aiobuf> B, SMALL;
static bool g_in_request; /* a request is being made: its callback must not run now */

static void next()
{
    CHECK(!g_in_request);
    CHECK(get_current_color() == 0);
    if (g_step == g_steps.size()) {
        ct_done();
        return;
    }
    g_in_request = true;
    g_steps[g_step++]();
    g_in_request = false;
}

static void expect_err(int want, int err)
{
    if (err != want)
        fprintf(stderr, "step %zu: err %d, expected %d\n", g_step, err, want);
    CHECK(err == want);
    next();
}
static void expect_stat(int want, mode_t mode, off_t size, struct stat *sb, int err)
{
    if (err != want)
        fprintf(stderr, "step %zu: err %d, expected %d\n", g_step, err, want);
    CHECK(err == want);
    if (want) {
        CHECK(sb == NULL);
    } else {
        CHECK(sb != NULL);
        if ((sb->st_mode & 07777) != mode)
            fprintf(stderr, "step %zu: mode %o, expected %o\n", g_step,
                    (unsigned)(sb->st_mode & 07777), (unsigned)mode);
        CHECK((sb->st_mode & 07777) == mode);
        CHECK(size < 0 || sb->st_size == size);
    }
    next();
}
static void expect_rw(int want, ssize_t n, const char *data, bool small, ptr<aiobuf> b, ssize_t got,
                      int err)
{
    if (err != want)
        fprintf(stderr, "step %zu: err %d, expected %d\n", g_step, err, want);
    CHECK(err == want);
    if (want) {
        CHECK(!b && got == -1);
    } else {
        if (got != n)
            fprintf(stderr, "step %zu: n %zd, expected %zd\n", g_step, got, n);
        CHECK(b == (small ? SMALL : B) && got == n);
        CHECK(!data || !memcmp(b->base(), data, (size_t)n));
    }
    next();
}
static void expect_str(int want, const char *s, str got, int err)
{
    CHECK(err == want);
    if (want) {
        CHECK(!got);
    } else {
        CHECK(got && got.len() == strlen(s) && !strcmp(got.cstr(), s));
    }
    next();
}
static void expect_open(int want, ptr<aiofh> *slot, ptr<aiofh> fh, int err)
{
    if (err != want)
        fprintf(stderr, "step %zu: err %d, expected %d\n", g_step, err, want);
    CHECK(err == want);
    CHECK(want ? !fh : !!fh);
    if (slot)
        *slot = fh;
    next();
}

static std::vector<std::string> g_names;
static void readdir_all(ptr<aiobuf> b, ssize_t n, int err)
{
    CHECK(err == 0);
    if (n == 0) {
        std::sort(g_names.begin(), g_names.end());
        CHECK(g_names.size() == 3 && g_names[0] == "." && g_names[1] == ".." &&
              g_names[2] == "inside");
        next();
        return;
    }
    CHECK(b == B && n == (ssize_t)sizeof(struct dirent));
    g_names.push_back(((struct dirent *)b->base())->d_name);
    DH->readdir(B, wrap(readdir_all));
}

static void sequence()
{
    /* Buffers: none larger than maxbuf; B must hold a struct dirent. */
    B = A->bufalloc(512);
    SMALL = A->bufalloc(16);
    CHECK(B && SMALL && B->size() == 512 && SMALL->size() == 16);
    CHECK(B->lim() == B->base() + 512);
    CHECK(((uintptr_t)B->base() & 511) == 0); /* aligned as libasync's buddy blocks */
    umask(022);

    auto e = [](int want) { return wrap(expect_err, want); };
    auto st = [](int want, mode_t m, off_t size) { return wrap(expect_stat, want, m, size); };
    auto rw = [](int want, ssize_t n, const char *data) {
        return wrap(expect_rw, want, n, data, false);
    };
    auto rws = [](int want, ssize_t n) { return wrap(expect_rw, want, n, (const char *)NULL, true); };
    auto op = [](int want, ptr<aiofh> *slot) { return wrap(expect_open, want, slot); };
    auto s = [](int want, const char *text) { return wrap(expect_str, want, text); };

    g_steps = {
        [=] { A->stat("/nonexistent/x", st(ENOENT, 0, 0)); },
        [=] { A->stat("", st(ENOENT, 0, 0)); },
        [=] { A->stat(str(), st(ENOENT, 0, 0)); }, /* a null str: an empty path */
        /* Created with the mode asked for, whatever the umask (022 here). */
        [=] { A->open(P("f"), O_CREAT | O_RDWR | O_TRUNC, 0666, op(0, &F)); },
        [=] {
            /* Our descriptor is close-on-exec, as the helper's was not ours. */
            int fd = fd_of(g_dir + "/f");
            CHECK(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC));
            A->stat(P("f"), st(0, 0666, 0));
        },
        [=] {
            strcpy(B->base(), "hello world");
            F->swrite(0, B, 0, 11, rw(0, 11, "hello world"));
        },
        [=] {
            memset(B->base(), 0, 512);
            F->sread(6, B, 0, 5, rw(0, 5, "world"));
        },
        /* pos -1: the file's own position (pread/pwrite did not move it). */
        [=] { F->sread(-1, B, 0, 4, rw(0, 4, "hell")); },
        [=] { F->sread(-1, B, 0, 100, rw(0, 7, "o world")); },
        [=] { F->read(100, B, rw(0, 0, NULL)); },
        [=] { F->sread(-5, B, 0, 10, rw(EINVAL, 0, NULL)); },
        [=] {
            strcpy(B->base(), "XY");
            F->swrite(-1, B, 0, 2, rw(0, 2, NULL)); /* appended at 11 */
        },
        [=] { F->fstat(st(0, 0666, 13)); },
        [=] { F->ftrunc(3, e(0)); },
        [=] { F->fstat(st(0, 0666, 3)); },
        [=] { F->fsync(e(0)); },
        /* Misuse that libasync asserted on: EINVAL. */
        [=] { F->read(0, NULL, rw(EINVAL, 0, NULL)); },
        [=] { F->sread(0, B, 512, 1, rw(EINVAL, 0, NULL)); },
        [=] { F->sread(0, B, 0, 0, rw(EINVAL, 0, NULL)); },
        [=] { F->sread(0, B, 500, 13, rw(EINVAL, 0, NULL)); },
        [=] {
            aiod *other = New aiod(1, 0x10000, 0x1000);
            ptr<aiobuf> theirs = other->bufalloc(64);
            CHECK(theirs);
            other->finalize();
            F->read(0, theirs, rw(EINVAL, 0, NULL));
        },
        /* Closed: libasync's EBADF for close, read and write, EIO for the rest. */
        [=] { F->close(e(0)); },
        [=] {
            CHECK(fd_of(g_dir + "/f") == -1);
            F->close(e(EBADF));
        },
        [=] { F->read(0, B, rw(EBADF, 0, NULL)); },
        [=] { F->write(0, B, rw(EBADF, 0, NULL)); },
        [=] { F->fsync(e(EIO)); },
        [=] { F->ftrunc(0, e(EIO)); },
        [=] { F->fstat(st(EIO, 0, 0)); },
        [=] { A->open(P("nope"), O_RDONLY, 0, op(ENOENT, &F)); },
        [=] { A->open(P("f"), O_CREAT | O_EXCL | O_RDWR, 0600, op(EEXIST, &F)); },
        [=] { A->open(str(g_dir.c_str()), O_RDWR, 0, op(EISDIR, &F)); },
        /* O_CREAT on an existing file leaves its mode alone. */
        [=] {
            int fd = ::open(P("g"), O_CREAT | O_WRONLY, 0600);
            CHECK(fd >= 0 && fchmod(fd, 0600) == 0 && ::close(fd) == 0);
            A->open(P("g"), O_CREAT | O_WRONLY, 0666, op(0, &F));
        },
        [=] { A->stat(P("g"), st(0, 0600, 0)); },
        [=] { F->read(0, B, rw(EBADF, 0, NULL)); }, /* write-only */
        [=] { A->open(P("f"), O_RDONLY, 0, op(0, &R)); },
        [=] { R->write(0, B, rw(EBADF, 0, NULL)); },
        [=] { R->ftrunc(0, e(EINVAL)); },
        [=] { R->read(0, SMALL, wrap(+[](ptr<aiobuf> b, ssize_t n, int err) {
                  CHECK(err == 0 && b == SMALL && n == 3 && !memcmp(b->base(), "hel", 3));
                  next();
              })); },
        [=] { R->readdir(B, rw(ENOTDIR, 0, NULL)); },
        /* Directories. */
        [=] { A->mkdir(P("d"), 0777, e(0)); },
        [=] { A->stat(P("d"), st(0, 0777, -1)); },
        [=] { A->mkdir(P("d"), 0777, e(EEXIST)); },
        [=] { A->mkdir(P("nope/d"), 0777, e(ENOENT)); },
        [=] { A->mkdir(P("d/inside"), 0700, e(0)); },
        [=] { A->opendir(P("d"), op(0, &DH)); },
        [=] {
            g_names.clear();
            DH->readdir(B, wrap(readdir_all));
        },
        [=] { DH->readdir(SMALL, rws(0, 0)); }, /* at the end: 0, whatever the size */
        [=] { DH->read(0, B, rw(ESTALE, 0, NULL)); },
        [=] { DH->fstat(st(ESTALE, 0, 0)); },
        [=] { DH->fsync(e(ESTALE)); },
        [=] { DH->closedir(e(0)); },
        [=] { DH->closedir(e(EBADF)); },
        [=] { A->opendir(P("d"), op(0, &DH)); },
        [=] { DH->readdir(SMALL, rw(EIO, 0, NULL)); }, /* an entry, in too few bytes */
        [=] { A->opendir(P("nope"), op(ENOENT, NULL)); },
        [=] { A->opendir(P("f"), op(ENOTDIR, NULL)); },
        [=] { A->open(P("d"), O_RDONLY, 0, op(0, &F)); },
        [=] { F->read(0, B, rw(EISDIR, 0, NULL)); },
        [=] { F->readdir(SMALL, rw(EIO, 0, NULL)); },
        [=] {
            F = NULL; /* closed by its last ptr */
            DH = NULL;
            A->unlink(P("d"), e(EISDIR));
        },
        /* Links, names. */
        [=] { A->symlink("f", P("l"), e(0)); },
        [=] { A->readlink(P("l"), s(0, "f")); },
        [=] { A->readlink(P("f"), s(EINVAL, NULL)); },
        [=] { A->readlink(P("nope"), s(ENOENT, NULL)); },
        [=] { A->lstat(P("l"), st(0, 0777, 1)); },
        [=] { A->stat(P("l"), st(0, 0666, 3)); },
        [=] { A->link(P("f"), P("f2"), e(0)); },
        [=] { A->link(P("f"), P("f2"), e(EEXIST)); },
        [=] { A->rename(P("f2"), P("f3"), e(0)); },
        [=] { A->rename(P("f2"), P("f3"), e(ENOENT)); },
        [=] { A->unlink(P("f3"), e(0)); },
        [=] { A->unlink(P("f3"), e(ENOENT)); },
        /* getcwd: the directory's real path, with its exact length. */
        [=] {
            char *real = realpath(g_dir.c_str(), NULL);
            CHECK(real);
            static std::string want;
            want = std::string(real) + "/d";
            free(real);
            A->getcwd(P("d"), s(0, want.c_str()));
        },
        [=] { A->getcwd(P("f"), s(ENOTDIR, NULL)); },
        [=] { A->getcwd(P("nope"), s(ENOENT, NULL)); },
        [=] {
            A->statvfs(str(g_dir.c_str()), wrap(+[](struct statvfs *sv, int err) {
                CHECK(err == 0 && sv && sv->f_bsize > 0);
                next();
            }));
        },
        /* The process's umask and current directory were left alone. */
        [=] {
            mode_t m = umask(022);
            CHECK(m == 022);
            char cwd[4096];
            CHECK(getcwd(cwd, sizeof cwd) && std::string(cwd) != g_dir + "/d");
            A->unlink(P("l"), e(0));
        },
        [=] { A->unlink(P("f"), e(0)); },
        [=] { A->unlink(P("g"), e(0)); },
        [=] { A->stat(P("d/inside"), st(0, 0700, -1)); },
    };
    next();
}

/* ---- Colors ------------------------------------------------------------------- */

static aiod *C;
static void on_color(int want, struct stat *sb, int err)
{
    CHECK(err == 0 && sb);
    if (get_current_color() != want)
        fprintf(stderr, "completion on color %d, expected %d\n", get_current_color(), want);
    CHECK(get_current_color() == want);
    if (want == -1)
        CHECK(get_current_proc() == 0);
    ct_done();
}
static void colors()
{
    ct_expect(5);
    str dir(g_dir.c_str());
    /* From color 7: a plain wrap() continues on 7, a colored one on its own. */
    cpucb_tail(cwrap(+[](str d) {
        C->stat(d, wrap(on_color, 7));
        C->stat(d, cwrap(on_color, 9, 9));
    }, dir, 7));
    /* From a pinned color, and to one. */
    cpucb_tail(cwrap(+[](str d) { C->lstat(d, wrap(on_color, -1)); }, dir, -1));
    cpucb_tail(cwrap(+[](str d) { C->lstat(d, cwrap(on_color, -1, -1)); }, dir, 3));
    /* bufwait's callback likewise: nothing in use, so it runs at once. */
    cpucb_tail(cwrap(+[] {
        C->bufwait(wrap(+[] {
            CHECK(get_current_color() == 12);
            ct_done();
        }));
    }, 12));
}

/* ---- Off the workers: one worker; a helper blocks in open() of a FIFO
 * until a timer, on that worker, opens the other end. ------------------------ */

static aiod *Q;
static std::atomic<int> g_fifo_stage;
static void fifo_opened(ptr<aiofh> fh, int err)
{
    CHECK(err == 0 && fh);
    CHECK(g_fifo_stage.load() == 2); /* the timer ran while the helper was blocked */
    ptr<aiobuf> b = Q->bufalloc(64);
    CHECK(b);
    fh->read(-1, b, wrap(+[](ptr<aiofh> keep, ptr<aiobuf> b2, ssize_t n, int err2) {
        CHECK(err2 == 0 && n == 4 && !memcmp(b2->base(), "fifo", 4));
        (void)keep;
        ct_done();
    }, fh));
}
static void fifo()
{
    ct_expect(1);
    std::string path = g_dir + "/fifo";
    CHECK(mkfifo(path.c_str(), 0600) == 0);
    Q->open(path.c_str(), O_RDONLY, 0, wrap(fifo_opened));
    g_fifo_stage = 1;
    delaycb(0, 100000000, wrap(+[] {
        CHECK(g_fifo_stage.load() == 1);
        g_fifo_stage = 2;
        /* The helper is in open(O_RDONLY): a reader exists. */
        int w = ::open((g_dir + "/fifo").c_str(), O_WRONLY | O_NONBLOCK);
        CHECK(w >= 0);
        CHECK(::write(w, "fifo", 4) == 4);
        ::close(w);
    }));
}

/* ---- A close waits for the requests on the file made before it: with two
 * helpers, one blocked in read() of an empty FIFO, the close that the other
 * takes does not close the descriptor under it. ---------------------------- */

static aiod *W2;
static int g_fifo2_w = -1;
static std::atomic<int> g_close_stage;
static void fifo2_read(ptr<aiobuf> b, ssize_t n, int err)
{
    CHECK(err == 0 && n == 1 && b->base()[0] == 'x');
    CHECK(g_close_stage.load() == 1);
    g_close_stage = 2;
}
static void fifo2_closed(int err)
{
    CHECK(err == 0);
    CHECK(g_close_stage.load() == 2); /* after the read's callback */
    ::close(g_fifo2_w);
    ct_done();
}
static void close_waits()
{
    ct_expect(1);
    std::string path = g_dir + "/fifo2";
    CHECK(mkfifo(path.c_str(), 0600) == 0);
    /* A writer first, so that the helper's open does not block. */
    g_fifo2_w = ::open(path.c_str(), O_RDWR | O_NONBLOCK);
    CHECK(g_fifo2_w >= 0);
    W2->open(path.c_str(), O_RDONLY, 0, wrap(+[](ptr<aiofh> fh, int err) {
        CHECK(err == 0 && fh);
        ptr<aiobuf> b = W2->bufalloc(16);
        CHECK(b);
        fh->read(-1, b, wrap(fifo2_read)); /* blocks: the FIFO is empty */
        fh->close(wrap(fifo2_closed));
        delaycb(0, 100000000, wrap(+[] {
            CHECK(g_close_stage.load() == 0); /* the close is still waiting */
            g_close_stage = 1;
            CHECK(::write(g_fifo2_w, "x", 1) == 1);
        }));
    }));
}

/* ---- Many requests: 16 colors, each writing and reading back 40 blocks of
 * its own through 4 helpers, with room for 8 buffers only. ----------------- */

enum { N_COLORS = 16, ROUNDS = 40, BLK = 4096 };
static aiod *M;
static ptr<aiofh> g_mfile;
static std::atomic<int> g_waits, g_rounds_done;

struct worker_state : public virtual refcount {
    int color, round = 0;
    ptr<aiobuf> buf;
    worker_state(int c) : color(c) {}
    off_t where() const { return ((off_t)color * ROUNDS + round) * BLK; }
    char fill() const { return (char)('a' + (color * 7 + round) % 26); }

    void start()
    {
        CHECK(get_current_color() == color);
        if (round == ROUNDS) {
            g_rounds_done++;
            ct_done();
            return;
        }
        buf = M->bufalloc(BLK);
        if (!buf) {
            g_waits++;
            M->bufwait(wrap(mkref(this), &worker_state::start));
            return;
        }
        memset(buf->base(), fill(), BLK);
        g_mfile->write(where(), buf, wrap(mkref(this), &worker_state::written));
    }
    void written(ptr<aiobuf> b, ssize_t n, int err)
    {
        CHECK(get_current_color() == color);
        CHECK(err == 0 && n == BLK && b == buf);
        memset(buf->base(), 0, BLK);
        g_mfile->read(where(), buf, wrap(mkref(this), &worker_state::readback));
    }
    void readback(ptr<aiobuf> b, ssize_t n, int err)
    {
        CHECK(get_current_color() == color);
        CHECK(err == 0 && n == BLK);
        for (int i = 0; i < BLK; i++)
            CHECK(b->base()[i] == fill());
        buf = NULL; /* frees room: a waiter runs */
        round++;
        start();
    }
};

static void many()
{
    ct_expect(N_COLORS + 1);
    M->open(P("many"), O_CREAT | O_RDWR | O_TRUNC, 0600,
            wrap(+[](ptr<aiofh> fh, int err) {
                CHECK(err == 0 && fh);
                g_mfile = fh;
                for (int c = 0; c < N_COLORS; c++)
                    cpucb_tail(cwrap(mkref(New refcounted<worker_state>(100 + c)),
                                     &worker_state::start, 100 + c));
                ct_done();
            }));
}

/* ---- In order with one helper: 200 requests from one color complete in
 * the order they were made. ------------------------------------------------- */

static aiod *O1;
static int g_next_expected;
static void in_order(int i, struct stat *, int err)
{
    CHECK(err == ENOENT);
    CHECK(get_current_color() == 21);
    CHECK(i == g_next_expected);
    if (++g_next_expected == 200)
        ct_done();
}
static void order()
{
    ct_expect(1);
    cpucb_tail(cwrap(+[] {
        for (int i = 0; i < 200; i++)
            O1->stat(i % 2 ? "/nonexistent/a" : "/nonexistent/b", wrap(in_order, i));
    }, 21));
}

/* ---- In child processes, before the runtime exists. ----------------------------- */

static void child_checks()
{
    std::string err;
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);

    /* An exception from an aiod callback: compat's one line, then SIGABRT. */
    int st = ct_fork(
        [] {
            aiod *a = New aiod;
            a->stat("/", wrap(+[](struct stat *, int) { throw std::runtime_error("stat boom"); }));
            amain();
        },
        &err);
    if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT))
        fprintf(stderr, "child status %d, stderr: %s\n", st, err.c_str());
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    CHECK(ct_contains(err, "uncaught exception in a callback: std::runtime_error: stat boom"));
    CHECK(ct_contains(err, "aiod"));

    /* statvfs's failure: libasync's helper said so on stderr; the callback
     * gets ENOENT. */
    st = ct_fork(
        [] {
            aiod *a = New aiod;
            a->statvfs("/nonexistent/x", wrap(+[](struct statvfs *sv, int e) {
                CHECK(!sv && e == ENOENT);
                exit(0);
            }));
            amain();
        },
        &err);
    CHECK(ct_exited(st, 0));
    CHECK(err == "aiod: statvfs('/nonexistent/x') failed: No such file or directory\n");

    /* bufalloc(0) and past maxbuf: libasync's assertions, a panic here. */
    for (size_t len : {(size_t)0, (size_t)0x1001}) {
        st = ct_fork(
            [len] {
                aiod *a = New aiod(1, 0x10000, 0x1000);
                a->bufalloc(len);
                _exit(0);
            },
            &err);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
        CHECK(ct_contains(err, "aiod::bufalloc"));
    }
}

/* ---- The end: once every other check is done, finalize the aiods and drop
 * what is held; a tick later, every aiod and helper thread is gone. -------- */

static void finish()
{
    static bool finalized;
    static double deadline;
    if (!finalized) {
        if (ct_left.load() != 1) {
            delaycb(0, 20000000, wrap(finish));
            return;
        }
        finalized = true;
        CHECK(g_rounds_done.load() == N_COLORS);
        CHECK(g_waits.load() > 0); /* the 16 colors had room for 8 buffers */
        B = NULL;
        SMALL = NULL;
        R = NULL; /* the last ptr: closed by a request of its own */
        g_mfile = NULL;
        A->finalize();
        C->finalize();
        Q->finalize();
        M->finalize();
        O1->finalize();
        W2->finalize();
        A->finalize(); /* a second time does nothing */
        deadline = ct_now_ms() + 10000;
    }
    /* The last requests' events run meanwhile; then nothing refers to the
     * aiods, and they are gone with their threads. */
    if (helper_threads() != 0) {
        CHECK(ct_now_ms() < deadline);
        delaycb(0, 20000000, wrap(finish));
        return;
    }
    std::string cmd = "rm -rf " + g_dir;
    CHECK(system(cmd.c_str()) == 0);
    ct_done();
}

int main()
{
    ct_watchdog(60);
    char tmpl[] = "/tmp/mely-aiod-test.XXXXXX";
    CHECK(mkdtemp(tmpl));
    g_dir = tmpl;

    child_checks();

    /* The many requests again, on 4 workers with stealing, in a child. */
    std::string err;
    int st = ct_fork(
        [] {
            setenv("MELY_WORKERS", "4", 1);
            setenv("MELY_STEAL", "base", 1);
            M = New aiod(4, 8 * BLK, BLK);
            many();
            amain();
        },
        &err);
    if (!ct_exited(st, 0) || !err.empty())
        fprintf(stderr, "4 workers: status %d, stderr: %s\n", st, err.c_str());
    CHECK(ct_exited(st, 0) && err.empty());
    /* One worker: the FIFO test shows that a blocked helper does not hold it. */
    setenv("MELY_WORKERS", "1", 1);

    int threads_before = helper_threads();
    A = New aiod(2, 0x10000, 0x1000);
    C = New aiod;
    Q = New aiod;
    M = New aiod(4, 8 * BLK, BLK);
    O1 = New aiod(1);
    W2 = New aiod(2);
    CHECK(helper_threads() == threads_before + 2 + 1 + 1 + 4 + 1 + 2);

    /* bufalloc's limit: 0x10000 bytes, counted in powers of two >= minbuf. */
    {
        std::vector<ptr<aiobuf>> v;
        for (int i = 0; i < 16; i++) {
            v.push_back(A->bufalloc(3000)); /* counts 4096 */
            CHECK(v.back());
        }
        CHECK(!A->bufalloc(1));
        v.pop_back(); /* room for one again */
        ptr<aiobuf> again = A->bufalloc(4000);
        CHECK(again && again->size() == 4000);
        CHECK(!A->bufalloc(64));
    }

    ct_expect(1);
    sequence();
    colors();
    fifo();
    close_waits();
    many();
    order();

    /* Once all is done: finalize, drop what is held, and check that the
     * aiods and their threads are gone. */
    ct_expect(1);
    delaycb(0, 20000000, wrap(finish));
    amain();
}
