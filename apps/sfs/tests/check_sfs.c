/* SPDX-License-Identifier: MIT */
/*
 * check_sfs.c: apps/sfs/sfsd, run as a child process on a fixture root and
 * talked to with the protocol's own code (apps/sfs/proto.c, through
 * apps/sfs/tests/sfsclient.h):
 *  - the handshake: the keys agree, each session has its own; a bad magic or
 *    a low-order public key closes the connection before the server's hello,
 *    a garbage key at the first frame; the server serves the next client;
 *  - the operations: LOOKUP, GETATTR, READ (offsets, the short last read,
 *    counts 0 and over 64 KB malformed), READDIR over several replies,
 *    RELEASE and stale handles, ENOENT, EISDIR, ENOTDIR, EMFILE;
 *  - sealed frames tampered with, replayed, reordered, over or under the
 *    size limit: each closes its connection and nothing else, and sfsd's
 *    statistics count each by kind;
 *  - path confinement: "..", absolute paths, symlinks out of the root and
 *    within it, a NUL byte, a fifo;
 *  - clients that vanish mid-read, or half-close after their requests (the
 *    replies still come); memory bounded under slow readers;
 *  - the limits against hostile clients: silent connections cannot keep a
 *    real client out (the oldest still in its handshake makes room), the
 *    handshake and idle timeouts, the per-address limit.
 * Every test starts its own sfsd (so that its statistics are the test's)
 * and checks them when it stops it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "apps/sfs/tests/sfsclient.h"
#include "tests/testutil.h"

/* ---- the fixture: a served root in a temporary directory ----------------------------- */

/* Files of the root and the seed of their bytes (pattern()). */
#define SMALL 100u
#define MID 100000u /* one full READ, then a short one */
#define BIG (16u << 20)
enum { SEED_SMALL = 1, SEED_MID = 2, SEED_BIG = 3, SEED_INNER = 4, SEED_OUTSIDE = 5 };

/* Entries of many/: enough names of NAMELEN bytes that READDIR needs at
 * least three replies of 64 KB (1 + 2 + NAMELEN bytes each). */
#define MANY 2500
#define NAMELEN 60

static char top[64];   /* the temporary directory: root/ and outside.txt */
static char root[96];  /* the served root */
static struct sfsd_proc srv;
static bool srv_running;

/* A file's byte at offset o: cheap to recompute, so a reply is checked
 * without a copy of the file, and differs between files and offsets. */
static uint8_t pattern(unsigned seed, uint64_t o)
{
    uint64_t x = (o + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)seed << 56;
    x ^= x >> 29;
    return (uint8_t)(x >> 17);
}

static void fill(unsigned seed, uint64_t off, uint8_t *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = pattern(seed, off + i);
}

/* Whether n bytes at data are the file's bytes at offset off. */
static bool same_bytes(unsigned seed, uint64_t off, const uint8_t *data, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (data[i] != pattern(seed, off + i))
            return false;
    return true;
}

static void path_of(char *out, size_t n, const char *rel)
{
    snprintf(out, n, "%s/%s", root, rel);
}

static void put_file(const char *path, unsigned seed, size_t size)
{
    static uint8_t chunk[1 << 16];
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    for (size_t off = 0; off < size; off += sizeof chunk) {
        size_t n = size - off < sizeof chunk ? size - off : sizeof chunk;
        fill(seed, off, chunk, n);
        ck_assert_int_eq((int)fwrite(chunk, 1, n, f), (int)n);
    }
    ck_assert_int_eq(fclose(f), 0);
}

static void put(const char *rel, unsigned seed, size_t size)
{
    char p[256];
    path_of(p, sizeof p, rel);
    put_file(p, seed, size);
}

static void link_to(const char *target, const char *rel)
{
    char p[256];
    path_of(p, sizeof p, rel);
    ck_assert_msg(symlink(target, p) == 0, "symlink %s: %s", p, strerror(errno));
}

/* A name of many/: NAMELEN bytes, i in it. */
static void many_name(int i, char out[NAMELEN + 1])
{
    char head[24];
    int n = snprintf(head, sizeof head, "entry-%05d-", i);
    memset(out, 'x', NAMELEN);
    memcpy(out, head, (size_t)n);
    out[NAMELEN] = '\0';
}

/*
 * root/  empty  small.txt  mid.bin  [big.bin]  sub/inner.txt  sub/up-link -> ../small.txt
 *        in-link -> small.txt   out-abs -> /etc/passwd   out-rel -> ../outside.txt
 *        out-dir -> /etc   fifo   [many/ (MANY files)]
 * outside.txt next to root/: what an escape would reach.
 */
static void make_root(bool big, bool many)
{
    char p[256];
    strcpy(top, "/tmp/sfs-test-XXXXXX");
    ck_assert(mkdtemp(top) != NULL);
    snprintf(root, sizeof root, "%s/root", top);
    ck_assert_int_eq(mkdir(root, 0755), 0);
    snprintf(p, sizeof p, "%s/outside.txt", top);
    put_file(p, SEED_OUTSIDE, SMALL);
    put("empty", 0, 0);
    put("small.txt", SEED_SMALL, SMALL);
    put("mid.bin", SEED_MID, MID);
    if (big)
        put("big.bin", SEED_BIG, BIG);
    path_of(p, sizeof p, "sub");
    ck_assert_int_eq(mkdir(p, 0755), 0);
    put("sub/inner.txt", SEED_INNER, SMALL);
    link_to("../small.txt", "sub/up-link");
    link_to("small.txt", "in-link");
    link_to("/etc/passwd", "out-abs");
    link_to("../outside.txt", "out-rel");
    link_to("/etc", "out-dir");
    path_of(p, sizeof p, "fifo");
    ck_assert_int_eq(mkfifo(p, 0644), 0);
    if (!many)
        return;
    path_of(p, sizeof p, "many");
    ck_assert_int_eq(mkdir(p, 0755), 0);
    for (int i = 0; i < MANY; i++) {
        char name[NAMELEN + 1], rel[NAMELEN + 8];
        many_name(i, name);
        snprintf(rel, sizeof rel, "many/%s", name);
        put(rel, 0, 0);
    }
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

/* Also at exit: a failed test ends its process at once (Check's fork mode). */
static void cleanup(void)
{
    if (srv_running)
        kill(srv.pid, SIGKILL);
    srv_running = false;
    if (top[0])
        nftw(top, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    top[0] = '\0';
}

/* The fixture and sfsd on it, with extra arguments (NULL-ended, or NULL). */
static unsigned start(bool big, bool many, const char *const *extra)
{
    static bool registered;
    char why[256];
    if (!registered)
        atexit(cleanup);
    registered = true;
    make_root(big, many);
    ck_assert_msg(sfsd_start(&srv, root, extra, why, sizeof why), "%s", why);
    srv_running = true;
    return srv.port;
}

/* Stops sfsd (it must exit 0 with its statistics), removes the fixture, and
 * checks the errors sfsd counted by kind (never an io error). */
static struct sfsd_report stop_expect(unsigned long hello, unsigned long frame,
                                      unsigned long request, unsigned long oversize)
{
    struct sfsd_report r;
    bool ok = sfsd_stop(&srv, 20000, &r);
    srv_running = false;
    cleanup();
    ck_assert_msg(ok, "sfsd did not exit 0 with its statistics on SIGTERM: \"%s\"", r.line);
    printf("%s", r.line);
    ck_assert_msg(r.hello == hello && r.frame == frame && r.request == request &&
                      r.oversize == oversize && r.io == 0,
                  "errors counted: hello %lu frame %lu request %lu oversize %lu io %lu; expected "
                  "%lu %lu %lu %lu 0",
                  r.hello, r.frame, r.request, r.oversize, r.io, hello, frame, request, oversize);
    return r;
}

/* ---- client shorthands (asserting) -------------------------------------------------------- */

static void connect_ok(struct sfsc *c, unsigned port)
{
    ck_assert_msg(sfsc_connect(c, port), "%s", c->why);
}

/* LOOKUP of a C string; its status (a failed call fails the test). */
static int lookup(struct sfsc *c, const char *path, uint64_t *h, struct sfs_attr *a)
{
    int st = sfsc_lookup(c, path, strlen(path), h, a);
    ck_assert_msg(st >= 0, "LOOKUP \"%s\": %s", path, c->why);
    return st;
}

static uint64_t open_ok(struct sfsc *c, const char *path, struct sfs_attr *a)
{
    uint64_t h = 0;
    int st = lookup(c, path, &h, a);
    ck_assert_msg(st == 0, "LOOKUP \"%s\": status %d (%s)", path, st, strerror(st));
    return h;
}

static int status_of(struct sfsc *c, uint8_t op, uint64_t h, uint32_t cookie, struct sfs_reply *rep)
{
    int st = sfsc_simple(c, op, h, cookie, rep);
    ck_assert_msg(st >= 0, "op %u: %s", op, c->why);
    return st;
}

/* READ of count bytes at off of the file of `seed` and `size`: the reply
 * must hold exactly the file's bytes there (short at the end). */
static void read_ok(struct sfsc *c, uint64_t h, unsigned seed, uint64_t size, uint64_t off,
                    uint32_t count)
{
    struct sfs_reply rep;
    int st = sfsc_read(c, h, off, count, &rep);
    ck_assert_msg(st == 0, "READ %u at %llu: status %d (%s)", count, (unsigned long long)off, st,
                  st < 0 ? c->why : strerror(st));
    uint64_t want = off >= size ? 0 : size - off < count ? size - off : count;
    ck_assert_msg(rep.count == want, "READ %u at %llu: %u bytes, expected %llu", count,
                  (unsigned long long)off, rep.count, (unsigned long long)want);
    ck_assert_msg(same_bytes(seed, off, rep.data, rep.count), "READ at %llu: wrong bytes",
                  (unsigned long long)off);
}

/* LOOKUPs that must fail with the given status, each in well under 5 s (a
 * fifo opened for reading must not block sfsd). */
struct path_err {
    const char *path;
    int err;
};

static void lookups_fail(struct sfsc *c, const struct path_err *t, int n)
{
    for (int i = 0; i < n; i++) {
        uint64_t t0 = now_ns();
        int s = lookup(c, t[i].path, NULL, NULL);
        ck_assert_msg(s == t[i].err, "LOOKUP \"%s\": %d (%s), expected %d", t[i].path, s,
                      strerror(s), t[i].err);
        ck_assert_msg(now_ns() - t0 < 5000000000ull, "LOOKUP \"%s\" took %.1f s", t[i].path,
                      (double)(now_ns() - t0) / 1e9);
    }
}

/* A client the other tests leave alone: checks it still gets correct replies. */
static void bystander_ok(struct sfsc *b, uint64_t mid)
{
    read_ok(b, mid, SEED_MID, MID, 65536, 65536);
}

/* ---- the handshake ------------------------------------------------------------------------ */

/* Sends a raw hello on a new connection; whether the server closes it
 * having sent nothing (no hello of its own). */
static bool hello_refused(unsigned port, const uint8_t hello[SFS_HELLO])
{
    int fd = sfs_dial(port, 5000);
    size_t extra = 1;
    ck_assert_msg(fd >= 0, "connect: %s", strerror(errno));
    bool closed = send_all(fd, hello, SFS_HELLO) && closed_within(fd, 10000, &extra);
    close(fd);
    return closed && extra == 0;
}

START_TEST(test_handshake)
{
    unsigned port = start(false, false, NULL);
    struct sfsc a, b;
    struct sfs_attr attr;
    connect_ok(&a, port);
    ck_assert_int_eq(lookup(&a, "", NULL, &attr), 0); /* the keys agree both ways */
    ck_assert(S_ISDIR(attr.mode));
    connect_ok(&b, port);
    ck_assert_msg(memcmp(a.server_hello, b.server_hello, SFS_HELLO) != 0,
                  "two sessions got the same server key");

    struct sfs_kx kx;
    ck_assert_int_eq(sfs_kx_new(&kx), 0);
    uint8_t bad[SFS_HELLO];
    memcpy(bad, kx.hello, SFS_HELLO);
    memcpy(bad, "SFS2", 4);
    ck_assert_msg(hello_refused(port, bad), "a bad magic was not refused");
    /* Low-order points (u = 0, 1, and p = 2^255 - 19, which is 0): their
     * shared secret is all zeros, whatever the server's key. */
    static const uint8_t p_le[32] = { 0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f };
    const uint8_t *low[] = { NULL, NULL, p_le };
    for (int i = 0; i < NELEM(low); i++) {
        memcpy(bad, SFS_MAGIC, 4);
        memset(bad + 4, 0, SFS_PUBKEY);
        if (low[i])
            memcpy(bad + 4, low[i], SFS_PUBKEY);
        else
            bad[4] = (uint8_t)i; /* u = 0, then u = 1 */
        ck_assert_msg(hello_refused(port, bad), "low-order key %d was not refused", i);
    }
    /* A key that is not ours: the server cannot tell, but the first frame we
     * seal does not open with the keys it derived. */
    memcpy(bad, kx.hello, SFS_HELLO);
    for (int i = 4; i < SFS_HELLO; i++)
        bad[i] ^= (uint8_t)(0x5a + i);
    struct sfsc g;
    int fd = sfs_dial(port, 5000);
    ck_assert(fd >= 0);
    ck_assert_msg(sfsc_handshake(&g, fd, &kx, bad), "%s", g.why);
    struct sfs_request r = { .op = SFS_LOOKUP, .path = "", .pathlen = 0 };
    ck_assert(sfsc_send(&g, &r));
    size_t extra = 1;
    ck_assert_msg(closed_within(g.fd, 10000, &extra) && extra == 0,
                  "a session on the wrong key was not closed at its first frame");
    sfsc_close(&g);
    sfs_kx_free(&kx);
    /* A hello cut short by the client: nothing to count. */
    fd = sfs_dial(port, 5000);
    ck_assert(fd >= 0 && send_all(fd, SFS_MAGIC, 4));
    close(fd);

    ck_assert_int_eq(lookup(&a, "small.txt", NULL, &attr), 0); /* still served */
    ck_assert_int_eq((int)attr.size, SMALL);
    ck_assert_int_eq(lookup(&b, "sub", NULL, NULL), 0);
    sfsc_close(&b);
    connect_ok(&b, port); /* and a new client */
    ck_assert_int_eq(lookup(&b, "mid.bin", NULL, &attr), 0);
    ck_assert_int_eq((int)attr.size, MID);
    sfsc_close(&a);
    sfsc_close(&b);
    stop_expect(4, 1, 0, 0);
}
END_TEST

/* ---- operations ------------------------------------------------------------------------------ */

START_TEST(test_lookup_getattr)
{
    unsigned port = start(false, false, NULL);
    struct sfsc c;
    struct sfs_attr a;
    struct sfs_reply rep;
    struct stat st;
    char p[256];
    connect_ok(&c, port);
    uint64_t rh = open_ok(&c, "", &a);
    ck_assert(S_ISDIR(a.mode));
    const struct {
        const char *path, *rel;
        bool dir;
    } found[] = {
        { "small.txt", "small.txt", false },   { "/small.txt", "small.txt", false },
        { "sub", "sub", true },                { "sub/", "sub", true },
        { "sub//inner.txt", "sub/inner.txt", false }, { "./mid.bin", "mid.bin", false },
        { "empty", "empty", false },           { "/", ".", true },
    };
    for (int i = 0; i < NELEM(found); i++) {
        uint64_t h = open_ok(&c, found[i].path, &a);
        path_of(p, sizeof p, found[i].rel);
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_msg(h != rh && a.mode == st.st_mode && (!found[i].dir || S_ISDIR(a.mode)) &&
                          (found[i].dir || a.size == (uint64_t)st.st_size),
                      "LOOKUP %s: mode %o size %llu", found[i].path, a.mode,
                      (unsigned long long)a.size);
        /* GETATTR: the same attributes, mtime to the nanosecond */
        ck_assert_int_eq(status_of(&c, SFS_GETATTR, h, 0, &rep), 0);
        ck_assert_msg(rep.attr.mode == st.st_mode && rep.attr.size == (uint64_t)st.st_size &&
                          rep.attr.mtime_ns == (uint64_t)st.st_mtim.tv_sec * 1000000000ull +
                                                   (uint64_t)st.st_mtim.tv_nsec,
                      "GETATTR %s differs from stat()", found[i].path);
    }
    static const struct path_err missing[] = {
        { "nope", ENOENT },          { "sub/nope", ENOENT },    { "small.txt/x", ENOTDIR },
        { "small.txt/", ENOTDIR },   { "SMALL.TXT", ENOENT },
    };
    lookups_fail(&c, missing, NELEM(missing));
    sfsc_close(&c);
    stop_expect(0, 0, 0, 0);
}
END_TEST

START_TEST(test_read)
{
    unsigned port = start(false, false, NULL);
    struct sfsc c;
    struct sfs_reply rep;
    connect_ok(&c, port);
    uint64_t small = open_ok(&c, "small.txt", NULL), mid = open_ok(&c, "mid.bin", NULL);
    uint64_t empty = open_ok(&c, "empty", NULL), dir = open_ok(&c, "sub", NULL);
    read_ok(&c, small, SEED_SMALL, SMALL, 0, SMALL);
    read_ok(&c, small, SEED_SMALL, SMALL, 10, 20);
    read_ok(&c, small, SEED_SMALL, SMALL, 90, 65536); /* short: 10 bytes */
    read_ok(&c, small, SEED_SMALL, SMALL, SMALL, 1);  /* at the end: 0 bytes */
    read_ok(&c, small, SEED_SMALL, SMALL, 1u << 30, 100);
    read_ok(&c, mid, SEED_MID, MID, 0, 65536);
    read_ok(&c, mid, SEED_MID, MID, 65536, 65536); /* the last, short read */
    read_ok(&c, mid, SEED_MID, MID, 12345, 65536);
    read_ok(&c, mid, SEED_MID, MID, MID - 1, 1);
    read_ok(&c, empty, 0, 0, 0, 4096);
    /* Offsets an off_t cannot hold (2^63 and up), and ranges that end past
     * what it can: no file has bytes there, so 0 bytes, the end of the file
     * (pread itself says EINVAL). */
    const uint64_t far[] = { 1ull << 63, UINT64_MAX, (1ull << 63) + 12345, INT64_MAX,
                             INT64_MAX - 100, (1ull << 63) - 65535 };
    for (int i = 0; i < NELEM(far); i++) {
        read_ok(&c, small, SEED_SMALL, SMALL, far[i], 65536);
        read_ok(&c, mid, SEED_MID, MID, far[i], 1);
    }
    ck_assert_int_eq(sfsc_read(&c, dir, 0, 100, &rep), EISDIR);
    ck_assert_int_eq(status_of(&c, SFS_READDIR, small, 0, &rep), ENOTDIR);
    ck_assert_int_eq(sfsc_read(&c, 0, 0, 100, &rep), EBADF);
    ck_assert_int_eq(sfsc_read(&c, 0xffffffffffffull, 0, 100, &rep), EBADF);
    /* RELEASE: the handle is gone, and stays gone when its slot is reused */
    ck_assert_int_eq(status_of(&c, SFS_RELEASE, small, 0, &rep), 0);
    ck_assert_int_eq(sfsc_read(&c, small, 0, 100, &rep), EBADF);
    ck_assert_int_eq(status_of(&c, SFS_GETATTR, small, 0, &rep), EBADF);
    ck_assert_int_eq(status_of(&c, SFS_RELEASE, small, 0, &rep), EBADF);
    uint64_t again = open_ok(&c, "sub/inner.txt", NULL);
    ck_assert(again != small);
    ck_assert_int_eq(sfsc_read(&c, small, 0, 100, &rep), EBADF);
    read_ok(&c, again, SEED_INNER, SMALL, 0, SMALL);
    read_ok(&c, mid, SEED_MID, MID, 0, 100); /* the others are untouched */
    /* Handles are per connection. */
    struct sfsc d;
    connect_ok(&d, port);
    ck_assert_int_eq(sfsc_read(&d, mid, 0, 100, &rep), EBADF);
    sfsc_close(&d);

    /* READ counts 0 and SFS_MAX_READ + 1 do not decode (proto.h): a
     * malformed request closes the connection. The encoder refuses them, so
     * they are written over a valid request's count (its last 4 bytes). */
    const uint32_t bad_counts[] = { 0, SFS_MAX_READ + 1 };
    for (int i = 0; i < NELEM(bad_counts); i++) {
        struct sfsc m;
        connect_ok(&m, port);
        uint64_t h = open_ok(&m, "mid.bin", NULL);
        uint8_t plain[SFS_MAX_REQUEST], frame[SFS_LENGTH + SFS_MAX_REQUEST + SFS_TAG];
        struct sfs_request r = { .id = 99, .op = SFS_READ, .handle = h, .count = 1 };
        size_t n = sfs_request_encode(&r, plain);
        ck_assert(n > 4);
        for (int k = 0; k < 4; k++)
            plain[n - 4 + k] = (uint8_t)(bad_counts[i] >> (24 - 8 * k));
        size_t f = sfsc_seal(&m, plain, n, frame);
        ck_assert(f > 0 && send_all(m.fd, frame, f));
        size_t extra = 1;
        ck_assert_msg(closed_within(m.fd, 10000, &extra) && extra == 0,
                      "READ of %u bytes was not refused", bad_counts[i]);
        sfsc_close(&m);
    }
    read_ok(&c, mid, SEED_MID, MID, 65536, 65536);
    sfsc_close(&c);
    stop_expect(0, 0, 2, 0);
}
END_TEST

/* The names READDIR lists from cookie 0 to eof; *replies gets their count. */
static char **readdir_all(struct sfsc *c, uint64_t h, int *n, int *replies)
{
    struct sfs_reply rep;
    uint32_t cookie = 0;
    int cap = 64;
    char **names = malloc(sizeof(char *) * (size_t)cap);
    *n = *replies = 0;
    for (bool eof = false; !eof;) {
        ck_assert_int_eq(status_of(c, SFS_READDIR, h, cookie, &rep), 0);
        ck_assert_msg(*replies < 100, "READDIR does not end");
        (*replies)++;
        struct sfs_dirent d;
        size_t pos = 0;
        uint32_t got = 0;
        while (sfs_dirent_next(&rep, &pos, &d)) {
            if (*n == cap)
                names = realloc(names, sizeof(char *) * (size_t)(cap *= 2));
            names[(*n)++] = strndup(d.name, d.namelen);
            got++;
        }
        ck_assert_msg(pos == rep.datalen && got == rep.count,
                      "READDIR reply: %u entries said, %u decoded, %zu of %u bytes", rep.count,
                      got, pos, rep.datalen);
        ck_assert_msg(rep.cookie == cookie + got, "cookie %u after %u + %u", rep.cookie, cookie, got);
        ck_assert_msg(got > 0 || rep.eof, "an empty READDIR reply before eof");
        cookie = rep.cookie;
        eof = rep.eof;
    }
    return names;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

START_TEST(test_readdir)
{
    unsigned port = start(false, true, NULL);
    struct sfsc c;
    struct sfs_reply rep;
    int n, replies;
    connect_ok(&c, port);
    uint64_t many = open_ok(&c, "many", NULL);
    char **names = readdir_all(&c, many, &n, &replies);
    ck_assert_int_eq(n, MANY);
    ck_assert_msg(replies >= 3, "%d entries of %d bytes in %d replies", MANY, NAMELEN, replies);
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        char want[NAMELEN + 1];
        many_name(i, want);
        ck_assert_str_eq(names[i], want);
    }
    free_names(names, n);
    /* Past the end: nothing, eof. */
    ck_assert_int_eq(status_of(&c, SFS_READDIR, many, MANY + 5, &rep), 0);
    ck_assert(rep.count == 0 && rep.eof && rep.datalen == 0);
    /* The root: every kind of entry, with its type; never "." or "..". */
    uint64_t rh = open_ok(&c, "", NULL);
    ck_assert_int_eq(status_of(&c, SFS_READDIR, rh, 0, &rep), 0);
    ck_assert(rep.eof);
    const struct {
        const char *name;
        uint8_t type;
    } want[] = {
        { "empty", DT_REG },   { "fifo", DT_FIFO },    { "in-link", DT_LNK }, { "many", DT_DIR },
        { "mid.bin", DT_REG }, { "out-abs", DT_LNK },  { "out-dir", DT_LNK }, { "out-rel", DT_LNK },
        { "small.txt", DT_REG }, { "sub", DT_DIR },
    };
    ck_assert_int_eq((int)rep.count, NELEM(want));
    struct sfs_dirent d;
    size_t pos = 0;
    while (sfs_dirent_next(&rep, &pos, &d)) {
        int i = 0;
        while (i < NELEM(want) && (strlen(want[i].name) != d.namelen ||
                                   memcmp(want[i].name, d.name, d.namelen) != 0))
            i++;
        ck_assert_msg(i < NELEM(want), "unexpected entry \"%.*s\"", (int)d.namelen, d.name);
        ck_assert_msg(d.type == want[i].type, "%s: type %u, expected %u", want[i].name, d.type,
                      want[i].type);
    }
    ck_assert_int_eq(status_of(&c, SFS_READDIR, 0x77, 0, &rep), EBADF);
    sfsc_close(&c);
    stop_expect(0, 0, 0, 0);
}
END_TEST

START_TEST(test_max_handles)
{
    static const char *const extra[] = { "--max-handles", "4", NULL };
    unsigned port = start(false, false, extra);
    struct sfsc c, d;
    struct sfs_reply rep;
    uint64_t h[4];
    connect_ok(&c, port);
    for (int i = 0; i < 4; i++)
        h[i] = open_ok(&c, "small.txt", NULL);
    ck_assert_int_eq(lookup(&c, "mid.bin", NULL, NULL), EMFILE);
    ck_assert_int_eq(lookup(&c, "", NULL, NULL), EMFILE);
    read_ok(&c, h[3], SEED_SMALL, SMALL, 0, SMALL); /* the open ones still work */
    connect_ok(&d, port);                           /* a table per connection */
    uint64_t dh = open_ok(&d, "mid.bin", NULL);
    read_ok(&d, dh, SEED_MID, MID, 0, 1000);
    ck_assert_int_eq(status_of(&c, SFS_RELEASE, h[1], 0, &rep), 0);
    uint64_t m = open_ok(&c, "mid.bin", NULL); /* the freed slot */
    read_ok(&c, m, SEED_MID, MID, 65536, 65536);
    ck_assert_int_eq(lookup(&c, "sub", NULL, NULL), EMFILE);
    sfsc_close(&c);
    sfsc_close(&d);
    stop_expect(0, 0, 0, 0);
}
END_TEST

/* ---- frames tampered with ------------------------------------------------------------------- */

enum tamper {
    T_CIPHERTEXT, /* a bit of the ciphertext flipped */
    T_TAG,        /* a bit of the tag flipped */
    T_LONGER,     /* the length field one more, and a byte more sent */
    T_SHORTER,    /* the length field one less, and a byte less sent */
    T_REPLAY,     /* a frame the server already answered, again */
    T_REORDER,    /* frame 2, then frame 1 */
    T_OVERSIZE,   /* a length over the request limit */
    T_HUGE,       /* a length of 4 GB - 1 */
    T_UNDERSIZE,  /* a length too short for a tag */
    T_MAXSIZE,    /* a frame of exactly the limit that opens: a malformed request */
    NTAMPER
};
static const char *const tamper_name[NTAMPER] = {
    "ciphertext bit", "tag bit", "length + 1", "length - 1", "replay",
    "reorder", "oversize", "huge length", "undersize", "max-size garbage",
};

static void put_length(uint8_t *frame, uint32_t len)
{
    for (int k = 0; k < 4; k++)
        frame[k] = (uint8_t)(len >> (24 - 8 * k));
}

/* Sends what `how` says on c, whose session has answered one request; the
 * bytes go out in one write where there are several frames. */
static void send_tampered(struct sfsc *c, enum tamper how)
{
    static uint8_t f1[SFS_LENGTH + SFS_MAX_REQUEST + SFS_TAG + 1], f2[sizeof f1];
    static uint8_t both[2 * sizeof f1];
    uint8_t plain[SFS_MAX_REQUEST];
    if (how == T_MAXSIZE) { /* sealed with the next counter: it opens */
        memset(plain, 0xee, sizeof plain); /* and decodes to no known op */
        size_t n = sfsc_seal(c, plain, SFS_MAX_REQUEST, f1);
        ck_assert_int_eq((int)n, SFS_LENGTH + SFS_MAX_REQUEST_FRAME);
        ck_assert(send_all(c->fd, f1, n));
        return;
    }
    struct sfs_request r1 = { .id = 50, .op = SFS_LOOKUP, .path = "small.txt", .pathlen = 9 };
    struct sfs_request r2 = { .id = 51, .op = SFS_LOOKUP, .path = "mid.bin", .pathlen = 7 };
    size_t n1 = sfsc_seal(c, plain, sfs_request_encode(&r1, plain), f1);
    size_t n2 = sfsc_seal(c, plain, sfs_request_encode(&r2, plain), f2);
    ck_assert(n1 > 0 && n2 > 0);
    struct sfs_reply rep;
    switch (how) {
    case T_CIPHERTEXT: f1[SFS_LENGTH + 2] ^= 0x10; break;
    case T_TAG: f1[n1 - 1] ^= 0x01; break;
    case T_LONGER: put_length(f1, (uint32_t)(n1 - SFS_LENGTH + 1)), f1[n1++] = 0; break;
    case T_SHORTER: put_length(f1, (uint32_t)(n1 - SFS_LENGTH - 1)), n1--; break;
    case T_REPLAY:
        ck_assert(send_all(c->fd, f1, n1));
        ck_assert_msg(sfsc_recv(c, &rep) && rep.id == 50 && rep.status == 0,
                      "no reply before the replay: %s", c->why);
        break;
    case T_REORDER:
        memcpy(both, f2, n2);
        memcpy(both + n2, f1, n1);
        ck_assert(send_all(c->fd, both, n1 + n2));
        return;
    case T_OVERSIZE: put_length(f1, SFS_MAX_REQUEST_FRAME + 1); break;
    case T_HUGE: put_length(f1, UINT32_MAX); break;
    case T_UNDERSIZE: put_length(f1, SFS_TAG - 1); break;
    default: ck_abort();
    }
    ck_assert(send_all(c->fd, f1, n1));
}

/* Every kind on its own connection, next to a bystander that keeps reading:
 * each closes its connection without a reply, and nothing else. */
START_TEST(test_tamper)
{
    unsigned port = start(false, false, NULL);
    struct sfsc b;
    connect_ok(&b, port);
    uint64_t bmid = open_ok(&b, "mid.bin", NULL);
    for (int how = 0; how < NTAMPER; how++) {
        struct sfsc c;
        connect_ok(&c, port);
        ck_assert_int_eq(lookup(&c, "sub", NULL, NULL), 0); /* counters at 1 both ways */
        send_tampered(&c, (enum tamper)how);
        size_t extra = 1;
        ck_assert_msg(closed_within(c.fd, 10000, &extra), "%s: the connection stays open",
                      tamper_name[how]);
        ck_assert_msg(extra == 0, "%s: %zu bytes came back", tamper_name[how], extra);
        sfsc_close(&c);
        bystander_ok(&b, bmid);
    }
    sfsc_close(&b);
    /* frame: ciphertext, tag, longer, shorter, replay, reorder; oversize:
     * oversize, huge, undersize; request: max-size garbage. */
    stop_expect(0, 6, 1, 3);
}
END_TEST

/* ---- path confinement ------------------------------------------------------------------------ */

/* A Unix socket's file at rel (nothing listens on it: open() says ENXIO). */
static void make_socket(const char *rel)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    char p[256];
    path_of(p, sizeof p, rel);
    ck_assert(strlen(p) < sizeof a.sun_path);
    strcpy(a.sun_path, p);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_msg(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "bind %s: %s", p,
                  strerror(errno));
    close(fd);
}

/* A device node at rel: major 0 has no driver, so open() says ENXIO. Only
 * root may make one: false (and the test leaves it out) otherwise. */
static bool make_device(const char *rel, mode_t type)
{
    char p[256];
    path_of(p, sizeof p, rel);
    if (mknod(p, type | 0644, makedev(0, 0)) == 0)
        return true;
    printf("confinement: no %s device (mknod: %s): not tested\n", rel, strerror(errno));
    return false;
}

START_TEST(test_confinement)
{
    unsigned port = start(false, false, NULL);
    struct sfsc c;
    struct sfs_attr a;
    struct sfs_reply rep;
    connect_ok(&c, port);
    /* Sockets and devices: EACCES, as fifos (doc/sfs.md), never open()'s
     * ENXIO. */
    make_socket("sock");
    struct path_err special[3] = { { "sock", EACCES } };
    int nspecial = 1;
    if (make_device("chr", S_IFCHR))
        special[nspecial++] = (struct path_err){ "chr", EACCES };
    if (make_device("blk", S_IFBLK))
        special[nspecial++] = (struct path_err){ "blk", EACCES };
    lookups_fail(&c, special, nspecial);
    static const struct path_err refused[] = {
        { "..", EINVAL },           { "../outside.txt", EINVAL },   { "a/../../x", EINVAL },
        { "sub/../small.txt", EINVAL }, { "sub/..", EINVAL },        { "/..", EINVAL },
        { "/etc/passwd", ENOENT },  { "//etc/passwd", ENOENT },      { "etc/passwd", ENOENT },
        { "out-abs", EACCES },      { "out-rel", EACCES },          { "out-dir/passwd", EACCES },
        { "out-dir", EACCES },      { "fifo", EACCES },
    };
    lookups_fail(&c, refused, NELEM(refused));
    /* A NUL byte: "small.txt" must not be what is opened. */
    ck_assert_int_eq(sfsc_lookup(&c, "small.txt\0/../x", 15, NULL, NULL), EINVAL);
    ck_assert_int_eq(sfsc_lookup(&c, "small.txt\0", 10, NULL, NULL), EINVAL);
    /* Symlinks that stay within the root are followed. */
    uint64_t h = open_ok(&c, "in-link", &a);
    ck_assert(S_ISREG(a.mode) && a.size == SMALL);
    read_ok(&c, h, SEED_SMALL, SMALL, 0, SMALL);
    h = open_ok(&c, "sub/up-link", &a);
    read_ok(&c, h, SEED_SMALL, SMALL, 0, SMALL);
    /* The longest path a request may hold. */
    char longp[SFS_MAX_PATH + 1];
    memset(longp, 'a', SFS_MAX_PATH);
    for (unsigned i = 200; i < SFS_MAX_PATH; i += 201)
        longp[i] = '/';
    ck_assert_int_eq(sfsc_lookup(&c, longp, SFS_MAX_PATH, NULL, NULL), ENOENT);
    ck_assert_int_eq(status_of(&c, SFS_GETATTR, h, 0, &rep), 0); /* still serving */
    sfsc_close(&c);
    stop_expect(0, 0, 0, 0);
}
END_TEST

/* ---- clients that vanish, slow readers ---------------------------------------------------------- */

#define BLOCK SFS_MAX_READ
#define BLOCKS (BIG / BLOCK)

/* Pipelines n READs of 64 KB of big.bin, from block `first` on, as one write. */
static void pipeline_reads(struct sfsc *c, uint64_t h, unsigned first, unsigned n)
{
    enum { FRAME = SFS_LENGTH + 64 + SFS_TAG };
    uint8_t *all = malloc((size_t)n * FRAME), plain[SFS_MAX_REQUEST];
    size_t len = 0;
    for (unsigned i = 0; i < n; i++) {
        struct sfs_request r = { .id = c->next_id++, .op = SFS_READ, .handle = h,
                                 .offset = (uint64_t)((first + i) % BLOCKS) * BLOCK, .count = BLOCK };
        size_t f = sfsc_seal(c, plain, sfs_request_encode(&r, plain), all + len);
        ck_assert(f > 0 && f <= FRAME);
        len += f;
    }
    ck_assert_msg(send_all(c->fd, all, len), "sending %u READs: %s", n, strerror(errno));
    free(all);
}

/* Reads the n replies of pipeline_reads(), in order, byte-exact. */
static void collect_reads(struct sfsc *c, unsigned first, unsigned n)
{
    struct sfs_reply rep;
    uint32_t id0 = c->next_id - n;
    for (unsigned i = 0; i < n; i++) {
        ck_assert_msg(sfsc_recv(c, &rep), "reply %u of %u: %s", i, n, c->why);
        uint64_t off = (uint64_t)((first + i) % BLOCKS) * BLOCK;
        ck_assert_msg(rep.id == id0 + i && rep.status == 0 && rep.count == BLOCK,
                      "reply %u: id %u (expected %u), status %u, %u bytes", i, rep.id, id0 + i,
                      rep.status, rep.count);
        ck_assert_msg(same_bytes(SEED_BIG, off, rep.data, BLOCK), "reply %u: wrong bytes", i);
    }
}

/* Waits at most `ms` for sfsd to hold `fds` descriptors again (a closed
 * connection's socket and handles are closed). */
static bool fds_back_to(int fds, unsigned ms)
{
    uint64_t deadline = now_ns() + (uint64_t)ms * 1000000u;
    while (proc_fds(srv.pid) != fds && now_ns() < deadline)
        sleep_us(10000);
    return proc_fds(srv.pid) == fds;
}

/* sfsd's descriptor count once it holds still for 300 ms (at most 10 s). */
static int stable_fds(void)
{
    int fds = proc_fds(srv.pid);
    for (int still = 0, i = 0; still < 30 && i < 1000; i++) {
        sleep_us(10000);
        int now = proc_fds(srv.pid);
        still = now == fds ? still + 1 : 0;
        fds = now;
    }
    ck_assert(fds > 0);
    return fds;
}

/* Clients that send many READs and go: after 0 or 1 replies read, closing
 * normally or with a reset (SO_LINGER 0). The server closes each without an
 * io error (ECONNRESET and EPIPE are how peers go), frees it, and serves. */
START_TEST(test_vanish)
{
    unsigned port = start(true, false, NULL);
    struct sfsc w;
    connect_ok(&w, port); /* whatever the first connection sets up lazily */
    ck_assert_int_eq(lookup(&w, "big.bin", NULL, NULL), 0);
    sfsc_close(&w);
    int fds = stable_fds();
    for (int k = 0; k < 4; k++) {
        struct sfsc v;
        connect_ok(&v, port);
        uint64_t h = open_ok(&v, "big.bin", NULL);
        pipeline_reads(&v, h, (unsigned)k * 7, 200);
        if (k & 1) {
            struct sfs_reply rep;
            ck_assert_msg(sfsc_recv(&v, &rep), "%s", v.why);
        }
        if (k & 2) {
            struct linger l = { .l_onoff = 1, .l_linger = 0 };
            ck_assert_int_eq(setsockopt(v.fd, SOL_SOCKET, SO_LINGER, &l, sizeof l), 0);
        }
        sfsc_close(&v);
        ck_assert_msg(fds_back_to(fds, 15000), "vanished client %d: sfsd holds %d fds, not %d", k,
                      proc_fds(srv.pid), fds);
        struct sfsc n;
        connect_ok(&n, port);
        h = open_ok(&n, "big.bin", NULL);
        pipeline_reads(&n, h, 100, 8);
        collect_reads(&n, 100, 8);
        sfsc_close(&n);
    }
    stop_expect(0, 0, 0, 0);
}
END_TEST

/*
 * A client that half-closes (shutdown SHUT_WR) once its requests are sent
 * still gets every reply, then the server's close. 40 READDIRs of many/
 * (each lists about 1,000 entries: slow, as requests go) in one write,
 * then SHUT_WR: the server reads the EOF while the last of them are still
 * being answered, since the backlog (16) lets the rest in only as replies
 * leave. Then a single LOOKUP followed by SHUT_WR, and a half-close in the
 * middle of the hello.
 */
#define HALF_REQS 40
START_TEST(test_half_close)
{
    unsigned port = start(false, true, NULL);
    struct sfsc c;
    struct sfs_reply rep;
    connect_ok(&c, port);
    uint64_t h = open_ok(&c, "many", NULL);
    enum { FRAME = SFS_LENGTH + 32 + SFS_TAG };
    uint8_t all[HALF_REQS * FRAME], plain[SFS_MAX_REQUEST];
    size_t len = 0;
    for (int i = 0; i < HALF_REQS; i++) {
        struct sfs_request r = { .id = c.next_id++, .op = SFS_READDIR, .handle = h };
        size_t f = sfsc_seal(&c, plain, sfs_request_encode(&r, plain), all + len);
        ck_assert(f > 0 && f <= FRAME);
        len += f;
    }
    ck_assert(send_all(c.fd, all, len));
    ck_assert_int_eq(shutdown(c.fd, SHUT_WR), 0);
    for (int i = 0; i < HALF_REQS; i++) {
        ck_assert_msg(sfsc_recv(&c, &rep), "reply %d of %d: %s", i, HALF_REQS, c.why);
        ck_assert(rep.op == SFS_READDIR && rep.status == 0 && rep.count > 0);
    }
    size_t extra = 1;
    ck_assert_msg(closed_within(c.fd, 10000, &extra) && extra == 0,
                  "no close after the replies to a half-closed client");
    sfsc_close(&c);

    connect_ok(&c, port);
    struct sfs_request r = { .op = SFS_LOOKUP, .path = "small.txt", .pathlen = 9 };
    ck_assert(sfsc_send(&c, &r));
    ck_assert_int_eq(shutdown(c.fd, SHUT_WR), 0);
    ck_assert_msg(sfsc_recv(&c, &rep), "LOOKUP, then SHUT_WR: %s", c.why);
    ck_assert(rep.id == r.id && rep.status == 0 && rep.attr.size == SMALL);
    ck_assert(closed_within(c.fd, 10000, &extra) && extra == 0);
    sfsc_close(&c);
    /* A half-close before the hello is complete: closed, nothing sent. */
    int fd = sfs_dial(port, 5000);
    ck_assert(fd >= 0 && send_all(fd, SFS_MAGIC, 4) && shutdown(fd, SHUT_WR) == 0);
    ck_assert(closed_within(fd, 10000, &extra) && extra == 0);
    close(fd);
    stop_expect(0, 0, 0, 0);
}
END_TEST

/*
 * Slow readers: 20 clients each pipeline 200 READs of 64 KB and read nothing
 * for 2 s. What sfsd may hold meanwhile (conn.C, "Backpressure"): per
 * connection, at most max_backlog (16) replies dispatched and not yet
 * written, each a buffer of SFS_LENGTH + 16 + 65536 + SFS_TAG bytes plus its
 * header (~65.6 KB), and its input buffer of 4 request frames of at most
 * SFS_LENGTH + SFS_MAX_REQUEST_FRAME bytes (8.3 KB); the other requests wait
 * in the kernel's socket buffers, which are not sfsd's RSS. So
 * 20 x (16 x 65.6 KB + 8.3 KB) = 21.2 MB at most over the RSS before the
 * load. The bound allows twice that for the allocator's caches and
 * fragmentation (tcmalloc's per-thread caches, glibc's arenas); the sanitizer
 * builds get more, for their own reasons (MEMORY_SLACK). Without the
 * backpressure the server would hold 200 replies per connection, less what
 * the kernel buffers take: over 150 MB.
 */
#define SLOW_CLIENTS 20
#define SLOW_READS 200
#if defined(__SANITIZE_ADDRESS__)
/* ASan keeps freed blocks in a quarantine, so the replies already written to
 * the sockets still count; it is set to 16 MB for sfsd here (below). */
#define MEMORY_SLACK 4
#elif defined(__SANITIZE_THREAD__)
/* TSan maps shadow memory for what the application touches: 4 bytes per
 * byte, plus its metadata; measured here, about 5 times the growth of the
 * plain build. */
#define MEMORY_SLACK 10
#else
#define MEMORY_SLACK 2
#endif

static long held_kb(void)
{
    const long per_conn = 16 * (SFS_LENGTH + 16 + SFS_MAX_READ + SFS_TAG + 32) +
                          4 * (SFS_LENGTH + SFS_MAX_REQUEST_FRAME);
    return SLOW_CLIENTS * per_conn / 1024;
}

START_TEST(test_slow_readers)
{
#if defined(__SANITIZE_ADDRESS__)
    const char *o = getenv("ASAN_OPTIONS");
    char opts[512];
    snprintf(opts, sizeof opts, "%s%squarantine_size_mb=16", o ? o : "", o && *o ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1); /* this test's process and its sfsd only */
#endif
    unsigned port = start(true, false, NULL);
    struct sfsc warm, c[SLOW_CLIENTS];
    uint64_t h[SLOW_CLIENTS];
    /* The baseline: after one client has read a while, the allocator warm. */
    connect_ok(&warm, port);
    uint64_t wh = open_ok(&warm, "big.bin", NULL);
    pipeline_reads(&warm, wh, 0, 64);
    collect_reads(&warm, 0, 64);
    sfsc_close(&warm);
    sleep_us(200000);
    long base = proc_status_kb(srv.pid, "VmRSS");
    ck_assert(base > 0);
    for (int i = 0; i < SLOW_CLIENTS; i++) {
        connect_ok(&c[i], port);
        h[i] = open_ok(&c[i], "big.bin", NULL);
    }
    for (int i = 0; i < SLOW_CLIENTS; i++)
        pipeline_reads(&c[i], h[i], (unsigned)i * 13, SLOW_READS);
    long peak = base;
    for (uint64_t end = now_ns() + 2000000000ull; now_ns() < end; sleep_us(50000)) {
        long kb = proc_status_kb(srv.pid, "VmRSS");
        peak = kb > peak ? kb : peak;
    }
    long bound = MEMORY_SLACK * held_kb();
    printf("slow readers: sfsd RSS %ld kB before, %ld kB at most while %d clients read nothing "
           "(+%ld kB; bound +%ld kB = %d x %ld kB)\n",
           base, peak, SLOW_CLIENTS, peak - base, bound, MEMORY_SLACK, held_kb());
    ck_assert_msg(peak - base <= bound, "sfsd grew by %ld kB under slow readers (bound %ld kB)",
                  peak - base, bound);
    for (int i = 0; i < SLOW_CLIENTS; i++) {
        collect_reads(&c[i], (unsigned)i * 13, SLOW_READS);
        sfsc_close(&c[i]);
    }
    struct sfsd_report r = stop_expect(0, 0, 0, 0);
    ck_assert_msg(r.paused >= SLOW_CLIENTS, "only %lu pauses for %d slow readers", r.paused,
                  SLOW_CLIENTS);
}
END_TEST

/* ---- limits: silent, idle and crowding clients ------------------------------------------------- */

/* Whether fd is still open at the server's end: no EOF or reset within ms. */
static bool still_open(int fd, unsigned ms)
{
    return !closed_within(fd, ms, NULL);
}

/* Stops the server, which must report no errors and exactly these
 * handshake and idle timeouts. */
static void stop_expect_timeouts(unsigned long handshake, unsigned long idle)
{
    struct sfsd_report r = stop_expect(0, 0, 0, 0);
    ck_assert_msg(r.handshake_timeouts == handshake && r.idle_timeouts == idle,
                  "timeouts: handshake %lu, idle %lu; expected %lu, %lu", r.handshake_timeouts,
                  r.idle_timeouts, handshake, idle);
}

/* Checks that a timeout of timeout_s has not closed fd early: it must be
 * open now, if now is less than 0.9 timeout_s after `since` (before the
 * server could have started the timeout). A test thread that ran late (a
 * loaded machine) proves nothing, and says so. */
static void open_before_timeout(int fd, uint64_t since, double timeout_s, const char *what)
{
    bool open = still_open(fd, 20);
    double s = (double)(now_ns() - since) / 1e9;
    if (s >= 0.9 * timeout_s) {
        printf("%s: checked only after %.2f s: not checked\n", what, s);
        return;
    }
    ck_assert_msg(open, "%s: closed %.2f s into a timeout of %.0f s", what, s, timeout_s);
}

/* Connects as a client that must be refused: the server closes the socket
 * without a hello. */
static void connect_refused(unsigned port, const char *from)
{
    struct sfsc c;
    ck_assert_msg(!sfsc_connect_from(&c, port, from), "a connection from %s was not refused",
                  from ? from : "127.0.0.1");
}

/* A connection that is not yet counted as closed by the server may still
 * hold its slot for a moment (its close goes to color 0 as an event): this
 * connects, retrying for up to 2 s. */
static void connect_soon(struct sfsc *c, unsigned port)
{
    for (int i = 0; i < 20 && !sfsc_connect(c, port); i++)
        sleep_us(100000);
    ck_assert_msg(c->fd >= 0, "%s", c->why);
}

/*
 * Silent connections fill the table (--max-conns 8): a real client is
 * still served, within 1 s, by evicting the oldest connection that has not
 * completed its handshake; the others stay. Keyed clients are never
 * evicted: once all 8 are keyed, a ninth is refused, and served again once
 * one leaves.
 */
#define CROWD 8
START_TEST(test_silent_crowd)
{
    static const char *const extra[] = { "--max-conns", "8", NULL };
    unsigned port = start(false, false, extra);
    int base = stable_fds(), silent[CROWD];
    for (int i = 0; i < CROWD; i++) {
        silent[i] = sfs_dial(port, 5000);
        ck_assert_msg(silent[i] >= 0, "connect: %s", strerror(errno));
    }
    ck_assert_msg(fds_back_to(base + CROWD, 10000), "sfsd holds %d fds, not %d + %d",
                  proc_fds(srv.pid), base, CROWD);
    struct sfsc c[CROWD + 1];
    uint64_t t0 = now_ns();
    connect_ok(&c[0], port);
    uint64_t h = open_ok(&c[0], "mid.bin", NULL);
    read_ok(&c[0], h, SEED_MID, MID, 0, 65536);
    double ms = (double)(now_ns() - t0) / 1e6;
    printf("silent crowd: %d silent connections, a real client served in %.1f ms\n", CROWD, ms);
    ck_assert_msg(ms < 1000, "a real client waited %.0f ms", ms);
    ck_assert_msg(closed_within(silent[0], 5000, NULL), "the oldest silent connection stays");
    for (int i = 1; i < CROWD; i++)
        ck_assert_msg(still_open(silent[i], 20), "silent connection %d was closed too", i);
    /* Each new client displaces the next oldest silent one. */
    for (int i = 1; i < CROWD; i++) {
        connect_ok(&c[i], port);
        ck_assert_int_eq(lookup(&c[i], "", NULL, NULL), 0);
        ck_assert_msg(closed_within(silent[i], 5000, NULL), "silent connection %d stays", i);
    }
    connect_refused(port, NULL); /* all keyed: nothing to evict */
    read_ok(&c[0], h, SEED_MID, MID, 65536, 65536);
    sfsc_close(&c[3]);
    connect_soon(&c[CROWD], port);
    ck_assert_int_eq(lookup(&c[CROWD], "small.txt", NULL, NULL), 0);
    for (int i = 0; i <= CROWD; i++)
        if (i != 3)
            sfsc_close(&c[i]);
    for (int i = 0; i < CROWD; i++)
        close(silent[i]);
    struct sfsd_report r = stop_expect(0, 0, 0, 0);
    ck_assert_msg(r.evicted == CROWD && r.refused >= 1, "evicted %lu (expected %d), refused %lu",
                  r.evicted, CROWD, r.refused);
}
END_TEST

/* --handshake-timeout 1: a silent connection and one that sent half a hello
 * are closed after about 1 s (not before 0.5 s, by 3 s), with nothing sent;
 * a keyed connection is not. */
START_TEST(test_handshake_timeout)
{
    static const char *const extra[] = { "--handshake-timeout", "1", NULL };
    unsigned port = start(false, false, extra);
    struct sfsc k;
    uint64_t t0 = now_ns();
    int silent = sfs_dial(port, 5000), half = sfs_dial(port, 5000);
    ck_assert(silent >= 0 && half >= 0 && send_all(half, SFS_MAGIC, 4));
    connect_ok(&k, port);
    sleep_us(500000);
    open_before_timeout(silent, t0, 1, "a silent connection");
    open_before_timeout(half, t0, 1, "half a hello");
    size_t got = 1;
    ck_assert_msg(closed_within(silent, 2500, &got) && got == 0,
                  "a silent connection stays past the handshake timeout");
    ck_assert_msg(closed_within(half, 1000, &got) && got == 0,
                  "half a hello stays past the handshake timeout");
    printf("handshake timeout 1 s: closed after %.2f s\n", (double)(now_ns() - t0) / 1e9);
    sleep_us(500000);
    ck_assert_int_eq(lookup(&k, "small.txt", NULL, NULL), 0); /* keyed: not timed out */
    sfsc_close(&k);
    close(silent);
    close(half);
    stop_expect_timeouts(2, 0);
}
END_TEST

/* --idle-timeout 3: a keyed client that sends nothing is closed after about
 * 3 s; one that trickles a request a byte at a time too (bytes that make no
 * request are no activity); one that sends a request every 250 ms is not
 * (3 s, not 1: a loaded machine can hold the test thread between two of
 * its requests for most of a second). */
START_TEST(test_idle_timeout)
{
    static const char *const extra[] = { "--idle-timeout", "3", NULL };
    unsigned port = start(false, false, extra);
    struct sfsc quiet, busy, trickle;
    uint64_t t0 = now_ns();
    connect_ok(&quiet, port);
    connect_ok(&busy, port);
    connect_ok(&trickle, port);
    uint8_t plain[SFS_MAX_REQUEST], frame[SFS_LENGTH + SFS_MAX_REQUEST + SFS_TAG];
    struct sfs_request r = { .id = 7, .op = SFS_LOOKUP, .path = "small.txt", .pathlen = 9 };
    size_t flen = sfsc_seal(&trickle, plain, sfs_request_encode(&r, plain), frame);
    ck_assert(flen > 18);
    for (int i = 0; i < 18; i++) { /* 4.5 s */
        sleep_us(250000);
        if (i == 4) {
            open_before_timeout(quiet.fd, t0, 3, "a quiet client");
            open_before_timeout(trickle.fd, t0, 3, "a trickling client");
        }
        ck_assert_msg(lookup(&busy, "", NULL, NULL) == 0, "the busy client: %s", busy.why);
        send(trickle.fd, frame + i, 1, MSG_NOSIGNAL); /* fails once closed */
    }
    ck_assert_msg(closed_within(quiet.fd, 3000, NULL), "a quiet client stays past the idle timeout");
    ck_assert_msg(closed_within(trickle.fd, 3000, NULL), "a trickling client stays");
    printf("idle timeout 3 s: checked after %.2f s\n", (double)(now_ns() - t0) / 1e9);
    ck_assert_int_eq(lookup(&busy, "small.txt", NULL, NULL), 0);
    sfsc_close(&quiet);
    sfsc_close(&busy);
    sfsc_close(&trickle);
    stop_expect_timeouts(0, 2);
}
END_TEST

/* --max-per-addr 2: a third client from 127.0.0.1 is refused while the two
 * it has are keyed; another address (127.0.0.2, loopback too) is served;
 * at its limit, a new connection displaces that address's silent one. */
START_TEST(test_per_address)
{
    static const char *const extra[] = { "--max-per-addr", "2", NULL };
    unsigned port = start(false, false, extra);
    struct sfsc a, b, d, e;
    connect_ok(&a, port);
    connect_ok(&b, port);
    connect_refused(port, NULL);
    ck_assert_msg(sfsc_connect_from(&d, port, "127.0.0.2"), "from 127.0.0.2: %s", d.why);
    ck_assert_int_eq(lookup(&d, "small.txt", NULL, NULL), 0);
    int silent = sfs_dial_from(port, "127.0.0.2", 5000);
    ck_assert(silent >= 0);
    ck_assert_msg(sfsc_connect_from(&e, port, "127.0.0.2"), "from 127.0.0.2: %s", e.why);
    ck_assert_msg(closed_within(silent, 5000, NULL), "127.0.0.2's silent connection stays");
    ck_assert_int_eq(lookup(&e, "", NULL, NULL), 0);
    ck_assert_int_eq(lookup(&a, "mid.bin", NULL, NULL), 0);
    sfsc_close(&b);
    connect_soon(&b, port); /* 127.0.0.1 has room again */
    sfsc_close(&a);
    sfsc_close(&b);
    sfsc_close(&d);
    sfsc_close(&e);
    close(silent);
    struct sfsd_report r = stop_expect(0, 0, 0, 0);
    ck_assert_msg(r.evicted == 1 && r.refused >= 1, "evicted %lu, refused %lu; expected 1, >= 1",
                  r.evicted, r.refused);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sfs");
    TCase *tc = new_tcase(s, "protocol", 60);
    tcase_add_test(tc, test_handshake);
    tcase_add_test(tc, test_tamper);
    tc = new_tcase(s, "operations", 60);
    tcase_add_test(tc, test_lookup_getattr);
    tcase_add_test(tc, test_read);
    tcase_add_test(tc, test_readdir);
    tcase_add_test(tc, test_max_handles);
    tcase_add_test(tc, test_confinement);
    tc = new_tcase(s, "clients", 120);
    tcase_add_test(tc, test_vanish);
    tcase_add_test(tc, test_half_close);
    tcase_add_test(tc, test_slow_readers);
    tc = new_tcase(s, "limits", 60);
    tcase_add_test(tc, test_silent_crowd);
    tcase_add_test(tc, test_handshake_timeout);
    tcase_add_test(tc, test_idle_timeout);
    tcase_add_test(tc, test_per_address);
    return mely_test_main(s);
}
