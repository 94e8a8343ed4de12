/*
 * fdfiles.cpp: fdcb on what epoll refuses (regular files, /dev/null), which
 * libasync's select() loop saw as always ready: stdin redirected from a file
 * read to EOF, /dev/null for reading and writing, a callback that stays
 * registered runs as ordinary events of its color (other events of that
 * color, other colors and timers run between its runs, on one worker too),
 * and stops after fdcb(fd, op, NULL), fdcb_finished(true) or a replacement.
 * Each case runs in a child whose stderr must stay empty: no "Operation not
 * permitted" from compat, no "[warn] Epoll ADD" from libevent.
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
    return 0;
}
