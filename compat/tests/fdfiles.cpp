/* SPDX-License-Identifier: MIT */
/*
 * fdfiles.cpp: fdcb on what epoll refuses (regular files, /dev/null), which
 * libasync's select() loop saw as always ready: stdin redirected from a file
 * read to EOF, /dev/null for reading and writing, a callback that stays
 * registered runs as ordinary events of its color (other events of that
 * color, other colors and timers run between its runs, on one worker too),
 * and stops after fdcb(fd, op, NULL), fdcb_finished(true) or a replacement.
 * Each case runs in a child whose stderr must stay empty: no "Operation not
 * permitted" from compat, no "[warn] Epoll ADD" from libevent.
 * Then descriptor numbers (RLIMIT_NOFILE lowered to 1024): a registration
 * on a descriptor that is not open, at or past the limit, or a negative one,
 * or an unknown op, ends the program with one line (fdcb(1e8) grew the table
 * by 1.5 GB, fdcb(INT_MAX) died of bad_alloc); one that is closed but within
 * the limit is refused with a line and the program goes on; removals never
 * grow the table; an open descriptor above a limit lowered since is served.
 */
#include "async.h"

#include "ctest.h"

static const char TEXT[] = "first line\nsecond line\nthird\n";

/* ---- stdin from a regular file, read to EOF ---- */

static std::string *g_read = new std::string;
static int g_read_calls;

static void stdin_readable()
{
    CHECK(get_current_color() == 4);
    char buf[7]; /* small: several runs before EOF */
    ssize_t n = read(0, buf, sizeof buf);
    CHECK(n >= 0);
    g_read_calls++;
    if (n > 0) {
        g_read->append(buf, (size_t)n);
        return;
    }
    fdcb(0, selread, NULL);
    CHECK(*g_read == TEXT && g_read_calls == (int)(sizeof TEXT - 1 + 6) / 7 + 1);
    exit(0);
}

static void stdin_from_file()
{
    char path[] = "/tmp/mely-fdfiles-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && unlink(path) == 0);
    CHECK(write(fd, TEXT, sizeof TEXT - 1) == (ssize_t)(sizeof TEXT - 1));
    CHECK(lseek(fd, 0, SEEK_SET) == 0 && dup2(fd, 0) == 0);
    close(fd);
    make_async(0);
    fdcb(0, selread, cwrap(stdin_readable, 4));
    amain();
}

/* ---- /dev/null: EOF at once for reading, always writable ---- */

static int g_null_writes;

static void null_writable(int fd)
{
    CHECK(write(fd, "x", 1) == 1);
    if (++g_null_writes == 100) {
        fdcb(fd, selwrite, NULL);
        delaycb(0, 20000000, wrap(+[] {
            CHECK(g_null_writes == 100); /* removed: never again */
            exit(0);
        }));
    }
}

static void null_readable()
{
    char c;
    CHECK(read(0, &c, 1) == 0);
    fdcb(0, selread, NULL);
    int w = open("/dev/null", O_WRONLY);
    CHECK(w >= 0);
    fdcb(w, selwrite, cwrap(null_writable, w, 6));
}

static void dev_null()
{
    int fd = open("/dev/null", O_RDONLY);
    CHECK(fd >= 0 && dup2(fd, 0) == 0);
    close(fd);
    fdcb(0, selread, cwrap(null_readable, 5));
    amain();
}

/* ---- a callback that stays registered shares its worker fairly ---- */

static int g_spins;       /* color 7 only */
static int g_marker_seen; /* the g_spins value when the marker ran */
static int g_other_color; /* color 8 */
static int g_fd;

static void spin()
{
    CHECK(get_current_color() == 7);
    if (++g_spins == 1) {
        /* queued before the chain's next run: runs before it */
        cpucb_tail(cwrap(+[] { g_marker_seen = g_spins; }, 7));
    }
}

static void check_stopped(int at)
{
    CHECK(g_spins == at);
    exit(0);
}

static void stop_spin()
{
    CHECK(g_marker_seen == 1 && g_other_color == 1 && g_spins > 1);
    fdcb(g_fd, selread, NULL); /* from the chain's color: synchronous */
    delaycb(0, 20000000, cwrap(check_stopped, g_spins, 7));
}

static void fair_share()
{
    setenv("MELY_WORKERS", "1", 1);
    g_fd = open("/dev/null", O_RDONLY);
    CHECK(g_fd >= 0);
    fdcb(g_fd, selread, cwrap(spin, 7));
    cpucb_tail(cwrap(+[] { g_other_color++; }, 8));
    /* a timer still fires while the callback is registered */
    delaycb(0, 20000000, cwrap(stop_spin, 7));
    amain();
}

/* ---- fdcb_finished(true), and a replacement callback ---- */

static int g_first, g_second;
static int g_file;

static void second()
{
    CHECK(g_first == 1);
    if (++g_second == 3) {
        fdcb_finished(true);
        delaycb(0, 20000000, wrap(+[] {
            CHECK(g_first == 1 && g_second == 3);
            exit(0);
        }));
    }
}

static void first()
{
    g_first++;
    fdcb(g_file, selwrite, wrap(second)); /* replaces this one */
}

static void finished_and_replaced()
{
    char path[] = "/tmp/mely-fdfiles-XXXXXX";
    g_file = mkstemp(path);
    CHECK(g_file >= 0 && unlink(path) == 0);
    fdcb(g_file, selwrite, wrap(first));
    amain();
}

/* ---- descriptor numbers ---- */

static const rlim_t LIMIT = 1024;

static void lower_limit(rlim_t soft)
{
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max >= soft);
    rl.rlim_cur = soft;
    CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
}

/* The process's resident memory, in MB. */
static double rss_mb()
{
    FILE *f = fopen("/proc/self/statm", "r");
    CHECK(f);
    unsigned long size = 0, resident = 0;
    CHECK(fscanf(f, "%lu %lu", &size, &resident) == 2);
    fclose(f);
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / 1e6;
}

/* fdcb(fd, op, cb) exits with status 1 and exactly `line` on stderr. */
static void expect_refused(int fd, int op, const char *line)
{
    std::string err;
    int st = ct_fork([fd, op] {
        lower_limit(LIMIT);
        fdcb(fd, (selop)op, wrap(+[] {}));
        _exit(0); /* went on: wrong */
    }, &err);
    if (!ct_exited(st, EXIT_FAILURE) || err != line) {
        fprintf(stderr, "FAIL: fdcb(%d, %d): status %d, stderr:\n%s\nexpected:\n%s", fd, op, st,
                err.c_str(), line);
        exit(1);
    }
    printf("ok: fdcb(%d, %d) refused\n", fd, op);
}

static int g_freed;
struct probe {
    void run() { CHECK(!"a refused callback ran"); }
    ~probe() { g_freed++; }
};

static int g_pipe[2];

static void pipe_readable()
{
    char c;
    CHECK(read(g_pipe[0], &c, 1) == 1 && c == 'z');
    fdcb(g_pipe[0], selread, NULL);
    exit(0);
}

/* A closed descriptor within the limit: one line, the callback is freed and
 * never runs, the program goes on. Removals of numbers never registered,
 * however large, do not grow the table. */
static void closed_within_limit()
{
    lower_limit(LIMIT);
    CHECK(fcntl(1000, F_GETFD) < 0);
    {
        ref<probe> p = New refcounted<probe>;
        fdcb(1000, selread, wrap(p, &probe::run));
    }
    CHECK(g_freed == 1);
    fdcb(1000, selread, NULL); /* harmless */
    double before = rss_mb();
    fdcb(100000000, selread, NULL);
    fdcb(INT_MAX, selwrite, NULL);
    CHECK(rss_mb() - before < 50); /* was +1.6 GB, then bad_alloc */
    CHECK(pipe(g_pipe) == 0 && write(g_pipe[1], "z", 1) == 1);
    fdcb(g_pipe[0], selread, wrap(pipe_readable));
    amain();
}

/* A descriptor opened before the limit was lowered below it is served. */
static void open_past_lowered_limit()
{
    int p[2];
    CHECK(pipe(p) == 0 && dup2(p[0], 900) == 900);
    close(p[0]);
    g_pipe[0] = 900;
    g_pipe[1] = p[1];
    setenv("MELY_WORKERS", "2", 1); /* the runtime's own descriptors fit under 100 */
    lower_limit(100);
    CHECK(write(g_pipe[1], "z", 1) == 1);
    fdcb(900, selread, wrap(pipe_readable));
    amain();
}

static void run(const char *name, void (*fn)())
{
    std::string err;
    int st = ct_fork([fn] {
        ct_watchdog(20); /* a hang (the bug this guards against) fails, and ends */
        fn();
    }, &err);
    if (!ct_exited(st, 0) || !err.empty()) {
        fprintf(stderr, "FAIL: %s (status %d), stderr:\n%s\n", name, st, err.c_str());
        exit(1);
    }
    printf("ok: %s\n", name);
}

int main()
{
    ct_watchdog(60);
    run("stdin from a regular file, read to EOF", stdin_from_file);
    run("/dev/null for reading and writing", dev_null);
    run("a registered callback shares its worker", fair_share);
    run("fdcb_finished and a replacement on a file", finished_and_replaced);
    expect_refused(100000000, selread,
                   "mely-compat: fdcb(100000000, selread): bad descriptor: not open, and past "
                   "the process's limit (RLIMIT_NOFILE: 1024)\n");
    expect_refused(INT_MAX, selwrite,
                   "mely-compat: fdcb(2147483647, selwrite): bad descriptor: not open, and past "
                   "the process's limit (RLIMIT_NOFILE: 1024)\n");
    expect_refused((int)LIMIT, selread,
                   "mely-compat: fdcb(1024, selread): bad descriptor: not open, and past "
                   "the process's limit (RLIMIT_NOFILE: 1024)\n");
    expect_refused(-1, selread, "mely-compat: fdcb(-1, selread): negative descriptor\n");
    expect_refused(0, 2, "mely-compat: fdcb(0, 2): bad operation (selread or selwrite)\n");
    {
        std::string err;
        int st = ct_fork(closed_within_limit, &err);
        if (!ct_exited(st, 0) || err != "mely-compat: fdcb(1000, selread): Bad file descriptor\n") {
            fprintf(stderr, "FAIL: closed fd within the limit: status %d, stderr:\n%s\n", st,
                    err.c_str());
            exit(1);
        }
        printf("ok: a closed descriptor within the limit\n");
    }
    run("an open descriptor past a limit lowered since", open_past_lowered_limit);
    return 0;
}
