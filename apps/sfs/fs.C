/* SPDX-License-Identifier: MIT */
/*
 * fs.C: request dispatch on color 0: the handle table, LOOKUP confined to the
 * served root, GETATTR, READ from the page cache, READDIR, RELEASE.
 *
 * Every function here runs on color 0, libasync-smp's SFS colouring: dispatch
 * and file lookup are serial, only the crypto runs in parallel. Each request
 * ends in exactly one send(): a reply, or NULL for a malformed request (the
 * connection's color then closes it), so the backlog count stays exact.
 *
 * Confinement: a path is relative to the root; a ".." component is refused
 * outright (EINVAL), and the open resolves beneath the root's descriptor
 * (openat2's RESOLVE_BENEATH), so no symlink leads out of it. Without
 * openat2 (Linux < 5.6) every component is opened with O_NOFOLLOW: symlinks
 * are then refused altogether.
 *
 * Only regular files and directories are served. LOOKUP first resolves the
 * path with O_PATH, which opens nothing (no driver's open for a device, no
 * wait on a fifo, and a socket's file, which open() refuses with ENXIO, is
 * found as it is), refuses any other type with EACCES, and only then opens
 * the path for reading. The path is resolved twice (a few microseconds); a
 * file swapped for another type in between is caught by the fstat() of
 * what was opened.
 */
#include "apps/sfs/sfsd.h"

#include <dirent.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>

static const int OPEN_FLAGS = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;

/* Walks the path one component at a time, never following a symlink;
 * opens the last component with `flags`. */
static int open_nofollow(const char *path, int flags)
{
    int dir = dup(g_rootfd);
    char buf[SFS_MAX_PATH + 1];
    snprintf(buf, sizeof buf, "%s", path);
    char *save = nullptr;
    for (char *c = strtok_r(buf, "/", &save); c && dir >= 0;) {
        char *next = strtok_r(nullptr, "/", &save);
        int fd = openat(dir, c, (next ? OPEN_FLAGS | O_DIRECTORY : flags) | O_NOFOLLOW);
        ::close(dir);
        dir = fd;
        c = next;
    }
    return dir;
}

/* Opens path (NUL-terminated, relative) beneath the root with flags
 * (OPEN_FLAGS, or O_PATH). -1 with errno. */
static int open_beneath(const char *path, int flags)
{
    static std::atomic<bool> no_openat2{false};
    if (!no_openat2.load(std::memory_order_relaxed)) {
        open_how how{};
        how.flags = (uint64_t)flags;
        how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
        int fd = (int)syscall(SYS_openat2, g_rootfd, *path ? path : ".", &how, sizeof how);
        if (fd >= 0 || errno != ENOSYS)
            return fd < 0 && errno == EXDEV ? (errno = EACCES, -1) : fd;
        no_openat2.store(true, std::memory_order_relaxed);
    }
    return open_nofollow(path, flags);
}

/* Whether st is what LOOKUP serves: a regular file or a directory. */
static bool servable(const struct stat &st)
{
    return S_ISREG(st.st_mode) || S_ISDIR(st.st_mode);
}

/* The path of a LOOKUP as a C string, "" for the root; false if it holds a
 * NUL byte or a ".." component (leading and repeated slashes are allowed). */
static bool clean_path(const sfs_request &r, char out[SFS_MAX_PATH + 1])
{
    size_t n = r.pathlen;
    if (memchr(r.path, '\0', n))
        return false;
    const char *p = r.path;
    while (n && *p == '/')
        p++, n--;
    memcpy(out, p, n);
    out[n] = '\0';
    for (const char *c = out; *c;) {
        size_t len = strcspn(c, "/");
        if (len == 2 && c[0] == '.' && c[1] == '.')
            return false;
        c += len + (c[len] == '/');
    }
    return true;
}

static void fill_attr(const struct stat &st, sfs_attr *a)
{
    a->size = (uint64_t)st.st_size;
    a->mode = st.st_mode;
    a->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
}

/* A reply with its head encoded, and `extra` bytes of room after it. */
static sfs_out *reply_out(const sfs_reply &rep, size_t extra)
{
    sfs_out *out = sfs_out_new(sfs_reply_head_size(&rep) + extra);
    if (out)
        sfs_reply_encode_head(&rep, out->buf + SFS_LENGTH);
    return out;
}

static sfs_reply reply_to(const sfs_request &r, int status)
{
    sfs_reply rep{};
    rep.id = r.id;
    rep.op = r.op;
    rep.status = (uint16_t)status;
    return rep;
}

void sfsconn::reply_status(const sfs_request &r, int err)
{
    send(reply_out(reply_to(r, err), 0));
}

sfs_handle *sfsconn::handle_of(uint64_t h)
{
    uint32_t slot = (uint32_t)h, gen = (uint32_t)(h >> 32);
    if (slot == 0 || slot > handles_.size())
        return nullptr;
    sfs_handle *e = &handles_[slot - 1];
    return e->fd >= 0 && e->gen == gen ? e : nullptr;
}

void sfsconn::dispatch(uint8_t *req, size_t n)
{
    sfs_request r;
    bool ok = sfs_request_decode(req, n, &r);
    if (!ok) {
        free(req);
        return send(nullptr);
    }
    switch (r.op) {
    case SFS_LOOKUP: do_lookup(r); break;
    case SFS_GETATTR: do_getattr(r); break;
    case SFS_READ: do_read(r); break;
    case SFS_READDIR: do_readdir(r); break;
    default: do_release(r); break;
    }
    free(req);
}

void sfsconn::do_lookup(const sfs_request &r)
{
    char path[SFS_MAX_PATH + 1];
    if (!clean_path(r, path))
        return reply_status(r, EINVAL);
    size_t slot = 0;
    while (slot < handles_.size() && handles_[slot].fd >= 0)
        slot++;
    if (slot == handles_.size() && slot >= g_opt.max_handles)
        return reply_status(r, EMFILE);
    /* Look (O_PATH), then open: see the file's comment. */
    struct stat st;
    int fd = open_beneath(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return reply_status(r, errno);
    int err = fstat(fd, &st) != 0 ? errno : servable(st) ? 0 : EACCES;
    ::close(fd);
    if (err)
        return reply_status(r, err);
    fd = open_beneath(path, OPEN_FLAGS);
    if (fd < 0)
        return reply_status(r, errno);
    err = fstat(fd, &st) != 0 ? errno : servable(st) ? 0 : EACCES;
    if (err) {
        ::close(fd);
        return reply_status(r, err);
    }
    if (slot == handles_.size())
        handles_.emplace_back();
    sfs_handle &h = handles_[slot];
    h.fd = fd;
    h.dir = S_ISDIR(st.st_mode);
    sfs_reply rep = reply_to(r, 0);
    rep.handle = (uint64_t)h.gen << 32 | (slot + 1);
    fill_attr(st, &rep.attr);
    send(reply_out(rep, 0));
}

void sfsconn::do_getattr(const sfs_request &r)
{
    sfs_handle *h = handle_of(r.handle);
    struct stat st;
    if (!h)
        return reply_status(r, EBADF);
    if (fstat(h->fd, &st) != 0)
        return reply_status(r, errno);
    sfs_reply rep = reply_to(r, 0);
    fill_attr(st, &rep.attr);
    send(reply_out(rep, 0));
}

/* The data lands in the reply's buffer, where it is then sealed in place. */
void sfsconn::do_read(const sfs_request &r)
{
    sfs_handle *h = handle_of(r.handle);
    if (!h || h->dir)
        return reply_status(r, h ? EISDIR : EBADF);
    sfs_reply rep = reply_to(r, 0);
    size_t head = sfs_reply_head_size(&rep);
    /* pread's offset is an off_t: it refuses (EINVAL) an offset of 2^63 or
     * more, and a range that ends past 2^63 - 1. No file has bytes there, so
     * those are the end of the file, as doc/sfs.md says: 0 bytes. */
    const uint64_t off_max = (uint64_t)INT64_MAX;
    uint64_t count = r.offset >= off_max ? 0 : std::min<uint64_t>(r.count, off_max - r.offset);
    sfs_out *out = sfs_out_new(head + count);
    if (!out)
        return reply_status(r, ENOMEM);
    ssize_t got = count ? pread(h->fd, out->buf + SFS_LENGTH + head, count, (off_t)r.offset) : 0;
    if (got < 0) {
        int err = errno;
        sfs_out_free(out);
        return reply_status(r, err);
    }
    rep.count = (uint32_t)got;
    sfs_reply_encode_head(&rep, out->buf + SFS_LENGTH);
    out->plain = head + (size_t)got;
    g_stats.bytes_read.fetch_add((unsigned long)got, std::memory_order_relaxed);
    send(out);
}

/* Entries from the cookie-th on (., .. left out), as many as fit in a reply.
 * The directory is read afresh each time: a cookie is an index, stable while
 * the directory does not change. */
void sfsconn::do_readdir(const sfs_request &r)
{
    sfs_handle *h = handle_of(r.handle);
    if (!h || !h->dir)
        return reply_status(r, h ? ENOTDIR : EBADF);
    int fd = openat(h->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : nullptr;
    if (!d) {
        int err = errno;
        if (fd >= 0)
            ::close(fd);
        return reply_status(r, err);
    }
    sfs_reply rep = reply_to(r, 0);
    size_t head = sfs_reply_head_size(&rep), used = 0;
    sfs_out *out = sfs_out_new(head + SFS_MAX_READ);
    uint32_t index = 0;
    rep.eof = true;
    for (dirent *e; out && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (index++ < r.count)
            continue;
        sfs_dirent de{ e->d_type, (uint16_t)strlen(e->d_name), e->d_name };
        size_t n = sfs_dirent_encode(&de, out->buf + SFS_LENGTH + head + used, SFS_MAX_READ - used);
        if (n == 0) {
            rep.eof = false;
            break;
        }
        used += n;
        rep.count++;
    }
    closedir(d);
    if (!out)
        return reply_status(r, ENOMEM);
    rep.cookie = r.count + rep.count;
    sfs_reply_encode_head(&rep, out->buf + SFS_LENGTH);
    out->plain = head + used;
    send(out);
}

void sfsconn::do_release(const sfs_request &r)
{
    sfs_handle *h = handle_of(r.handle);
    if (!h)
        return reply_status(r, EBADF);
    ::close(h->fd);
    h->fd = -1;
    h->gen++;
    send(reply_out(reply_to(r, 0), 0));
}
