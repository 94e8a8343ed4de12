/* SPDX-License-Identifier: MIT */
/*
 * topology.c: the cache map, from sysfs or from hwloc (topology_hwloc.c); see
 * topology.h for the distances, the order and the fallback rules.
 *
 * Both sources fill the same distance matrix (one byte per pair of workers);
 * the orders are then derived from it by one stable bucket pass per worker,
 * so the two sources can only differ in the distances, which is what the tests
 * compare.
 */
#include "mely/topology/topology.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mely/core/log.h"
#include "mely/topology/topology_hwloc.h"

/* Ranks (topology_hwloc.h) refine the distances of topology.h so that,
 * within distance 1, workers sharing an L3 come before those that only share
 * the package (on a package with several L3s, such as amd16's four groups of
 * four). */
enum {
    RANK_L2 = MELY__RANK_L2,   /* distance 0 */
    RANK_L3 = MELY__RANK_L3,   /* distance 1: a shared level >= 3 cache */
    RANK_PKG = MELY__RANK_PKG, /* distance 1: the same package only */
    RANK_FAR = MELY__RANK_FAR, /* distance 2 */
    NRANKS
};

struct mely__topo {
    unsigned n;
    bool fell_back;
    char source[320];  /* where the map came from (mely__topo_describe) */
    unsigned *order; /* n rows of n - 1 */
    uint8_t *dist;   /* n x n ranks */
};

/* The largest CPU number a cpulist may name: far above any machine, low
 * enough that range arithmetic cannot overflow. */
#define TOPO_CPU_MAX (1u << 22)

/* Longest sysfs file we read (a shared_cpu_list of a huge machine is still
 * far shorter). */
#define TOPO_FILE_MAX 4096

/* ---- the flat map and the orders -------------------------------------------- */

static void set_flat(struct mely__topo *t)
{
    memset(t->dist, RANK_FAR, (size_t)t->n * t->n);
    for (unsigned i = 0; i < t->n; i++)
        t->dist[(size_t)i * t->n + i] = RANK_L2;
}

/* Fills every worker's order from the ranks: one bucket per rank, each in
 * index order starting after the worker and wrapping. O(n^2). */
static void fill_orders(struct mely__topo *t)
{
    unsigned n = t->n;

    for (unsigned w = 0; w < n; w++) {
        unsigned *row = t->order + (size_t)w * (n - 1), k = 0;

        for (unsigned d = RANK_L2; d < NRANKS; d++)
            for (unsigned s = 1; s < n; s++) {
                unsigned v = (w + s) % n;
                if (t->dist[(size_t)w * n + v] == d)
                    row[k++] = v;
            }
    }
}

/* ---- warnings ------------------------------------------------------------------ */

/* The last warning's reason, for the map's source (a build runs on one
 * thread, start to end). */
static _Thread_local char last_reason[256];

__attribute__((format(printf, 1, 2))) static void warn(const char *fmt, ...)
{
    char msg[PATH_MAX + 256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(last_reason, sizeof(last_reason), "%.*s", (int)sizeof(last_reason) - 1, msg);
    mely__log(MELY_LOG_WARN, "cache map: %s; steals use the flat order", msg);
}

/* ---- sysfs ------------------------------------------------------------------------ */

/* Reads a small file into buf (NUL-terminated, one trailing newline removed).
 * Returns 0 or a negative errno (-EFBIG when longer than the buffer). */
static int read_small(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;

    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, buf + len, size - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = -errno;
            close(fd);
            return e;
        }
        if (r == 0)
            break;
        len += (size_t)r;
        if (len == size - 1) {
            close(fd);
            return -EFBIG;
        }
    }
    close(fd);
    buf[len] = '\0';
    if (len > 0 && buf[len - 1] == '\n')
        buf[--len] = '\0';
    return 0;
}

/* A decimal number without sign or spaces, <= max. Advances *s past it. */
static bool parse_num(const char **s, unsigned long max, unsigned long *out)
{
    const char *p = *s;
    unsigned long v = 0;

    if (!isdigit((unsigned char)*p))
        return false;
    while (isdigit((unsigned char)*p)) {
        v = v * 10 + (unsigned long)(*p++ - '0');
        if (v > max)
            return false;
    }
    *s = p;
    *out = v;
    return true;
}

/* Whether s is exactly one (possibly negative) decimal number that fits an int. */
static bool parse_int(const char *s, long *out)
{
    bool neg = *s == '-';
    unsigned long v;

    if (neg)
        s++;
    if (!parse_num(&s, INT_MAX, &v) || *s != '\0')
        return false;
    *out = neg ? -(long)v : (long)v;
    return true;
}

/* Whether `list` is a well-formed cpulist ("0", "0-3,8-11": ranges with
 * lo <= hi, separated by single commas, nothing else); if so, sets *has to
 * whether it names cpu. An empty list is not well-formed: a cache always
 * serves the CPU it is listed under. */
static bool cpulist_has(const char *list, unsigned long cpu, bool *has)
{
    const char *p = list;

    *has = false;
    for (;;) {
        unsigned long lo, hi;

        if (!parse_num(&p, TOPO_CPU_MAX, &lo))
            return false;
        hi = lo;
        if (*p == '-') {
            p++;
            if (!parse_num(&p, TOPO_CPU_MAX, &hi) || hi < lo)
                return false;
        }
        if (cpu >= lo && cpu <= hi)
            *has = true;
        if (*p == '\0')
            return true;
        if (*p++ != ',')
            return false;
    }
}

struct sysfs {
    char root[PATH_MAX]; /* "" or a directory without the trailing '/' */
    char path[PATH_MAX]; /* the file being read, for the warning */
    char buf[TOPO_FILE_MAX];
    bool nocache;        /* a CPU has no cache directory: path names it */
};

/* Reads root + the printf-formatted path into s->buf; warns on failure. */
__attribute__((format(printf, 2, 3))) static bool sysfs_read(struct sysfs *s, const char *fmt,
                                                             ...)
{
    char rel[PATH_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(rel, sizeof(rel), fmt, ap);
    va_end(ap);
    if ((size_t)snprintf(s->path, sizeof(s->path), "%s%s", s->root, rel) >= sizeof(s->path)) {
        warn("path too long: %s%s", s->root, rel);
        return false;
    }
    int r = read_small(s->path, s->buf, sizeof(s->buf));
    if (r < 0) {
        warn("cannot read %s (%s)", s->path, strerror(-r));
        return false;
    }
    return true;
}

static bool odd(const struct sysfs *s)
{
    warn("unexpected content in %s: \"%.60s\"", s->path, s->buf);
    return false;
}

/* Opens CPU c's cache directory; NULL after a warning, or, when there is
 * none, with s->nocache set and its path in s->path. */
static DIR *open_cache_dir(struct sysfs *s, unsigned c)
{
    char dir[PATH_MAX];

    if ((size_t)snprintf(dir, sizeof(dir), "%s/sys/devices/system/cpu/cpu%u/cache", s->root, c) >=
        sizeof(dir)) {
        warn("path too long: %s", dir);
        return NULL;
    }
    DIR *d = opendir(dir);
    if (!d && errno == ENOENT) { /* no cache information: hwloc may know */
        s->nocache = true;
        snprintf(s->path, sizeof(s->path), "%s", dir);
    } else if (!d) {
        warn("cannot read %s (%s)", dir, strerror(errno));
    }
    return d;
}

/* Whether a cache directory entry is "index<idx>"; other entries (".",
 * "uevent", ...) are not caches and are passed over. */
static bool cache_index(const char *name, unsigned long *idx)
{
    if (strncmp(name, "index", 5) != 0)
        return false;
    name += 5;
    return parse_num(&name, 1000, idx) && *name == '\0';
}

/* Reads the type of CPU c's cache idx: *data is false for an instruction
 * cache, which cannot make two workers share data. */
static bool cache_holds_data(struct sysfs *s, unsigned c, unsigned long idx, bool *data)
{
    if (!sysfs_read(s, "/sys/devices/system/cpu/cpu%u/cache/index%lu/type", c, idx))
        return false;
    *data = strcmp(s->buf, "Instruction") != 0;
    if (*data && strcmp(s->buf, "Data") != 0 && strcmp(s->buf, "Unified") != 0)
        return odd(s);
    return true;
}

static bool cache_level(struct sysfs *s, unsigned c, unsigned long idx, unsigned long *level)
{
    long lv;

    if (!sysfs_read(s, "/sys/devices/system/cpu/cpu%u/cache/index%lu/level", c, idx))
        return false;
    if (!parse_int(s->buf, &lv) || lv < 1 || lv > 9)
        return odd(s);
    *level = (unsigned long)lv;
    return true;
}

/* Reads the CPUs sharing CPU c's cache idx into s->buf, checked to be a
 * well-formed list naming c. */
static bool cache_sharers(struct sysfs *s, unsigned c, unsigned long idx)
{
    bool mine;

    if (!sysfs_read(s, "/sys/devices/system/cpu/cpu%u/cache/index%lu/shared_cpu_list", c, idx))
        return false;
    if (!cpulist_has(s->buf, c, &mine) || !mine)
        return odd(s);
    return true;
}

/* Lowers d[w][v] to rank for every worker v pinned to a CPU of the
 * (well-formed) cpulist. */
static void lower_row(struct mely__topo *t, const int *cpu, unsigned w, const char *list,
                      uint8_t rank)
{
    unsigned n = t->n;

    for (unsigned v = 0; v < n; v++) {
        bool has;
        if (cpu[v] < 0)
            continue;
        cpulist_has(list, (unsigned long)cpu[v], &has);
        if (has && t->dist[(size_t)w * n + v] > rank)
            t->dist[(size_t)w * n + v] = rank;
    }
}

/* Applies cache idx of worker w's CPU to w's row (see sysfs_caches). */
static bool sysfs_cache(struct sysfs *s, struct mely__topo *t, const int *cpu, unsigned w,
                        unsigned long idx)
{
    unsigned c = (unsigned)cpu[w];
    unsigned long level;
    bool data;

    if (!cache_holds_data(s, c, idx, &data))
        return false;
    if (!data)
        return true;
    if (!cache_level(s, c, idx, &level) || !cache_sharers(s, c, idx))
        return false;
    lower_row(t, cpu, w, s->buf, level <= 2 ? RANK_L2 : RANK_L3);
    return true;
}

/* Applies the caches of worker w's CPU c to w's row (later workers pinned to
 * c copy it): d[w][v] is lowered to RANK_L2 for a worker v pinned to a CPU in
 * one of c's level <= 2 caches, to RANK_L3 for level >= 3. Returns false
 * (after a warning) on any unreadable or odd file. */
static bool sysfs_caches(struct sysfs *s, struct mely__topo *t, const int *cpu, unsigned w)
{
    DIR *d = open_cache_dir(s, (unsigned)cpu[w]);
    if (!d)
        return false;

    bool ok = true;
    struct dirent *e;
    while (ok && (e = readdir(d)) != NULL) {
        unsigned long idx;
        if (cache_index(e->d_name, &idx))
            ok = sysfs_cache(s, t, cpu, w, idx);
    }
    closedir(d);
    return ok;
}

/* Sets s->root from MELY_SYSFS_ROOT (the tests' fake trees), without its
 * trailing '/'s; "" when unset. */
static bool sysfs_root(struct sysfs *s)
{
    const char *root = getenv("MELY_SYSFS_ROOT");
    if (!root)
        root = "";
    size_t len = strlen(root);
    while (len > 0 && root[len - 1] == '/')
        len--;
    if (len >= sizeof(s->root)) {
        warn("MELY_SYSFS_ROOT too long");
        return false;
    }
    memcpy(s->root, root, len);
    s->root[len] = '\0';
    return true;
}

/* Reads every pinned worker's caches into its row and its CPU's package
 * into pkg[w], once per distinct CPU: the first worker pinned to a CPU reads
 * it, and later ones copy its row. */
static bool sysfs_cpus(struct sysfs *s, struct mely__topo *t, const int *cpu, long *pkg)
{
    unsigned n = t->n;

    for (unsigned w = 0; w < n; w++) {
        if (cpu[w] < 0)
            continue;
        unsigned first = 0;
        while (cpu[first] != cpu[w])
            first++;
        if (first < w) {
            memcpy(t->dist + (size_t)w * n, t->dist + (size_t)first * n, n);
            pkg[w] = pkg[first];
            continue;
        }
        if (!sysfs_caches(s, t, cpu, w) ||
            !sysfs_read(s, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu[w]))
            return false;
        if (!parse_int(s->buf, &pkg[w]))
            return odd(s);
    }
    return true;
}

/* Settles what the caches leave open: a worker to itself and workers on one
 * CPU are at RANK_L2, unpinned workers at RANK_FAR from all others, and
 * workers sharing only a package at RANK_PKG. */
static void rank_by_cpu_and_package(struct mely__topo *t, const int *cpu, const long *pkg)
{
    unsigned n = t->n;

    for (unsigned a = 0; a < n; a++)
        for (unsigned b = 0; b < n; b++) {
            uint8_t *d = &t->dist[(size_t)a * n + b];
            if (a == b)
                *d = RANK_L2;
            else if (cpu[a] < 0 || cpu[b] < 0)
                *d = RANK_FAR;
            else if (cpu[a] == cpu[b])
                *d = RANK_L2;
            else if (*d > RANK_PKG && pkg[a] >= 0 && pkg[a] == pkg[b])
                *d = RANK_PKG;
        }
}

/* Makes the ranks symmetric, each pair at the nearer of its two readings,
 * whatever each CPU's files claim. */
static void symmetrize(struct mely__topo *t)
{
    unsigned n = t->n;

    for (unsigned a = 0; a < n; a++)
        for (unsigned b = 0; b < a; b++) {
            uint8_t *x = &t->dist[(size_t)a * n + b], *y = &t->dist[(size_t)b * n + a];
            *x = *y = *x < *y ? *x : *y;
        }
}

/* Returns true, or false after a warning, or false with the cache
 * directory sysfs lacks in `missing` (and no warning: the caller tries hwloc). */
static bool build_sysfs(struct mely__topo *t, const int *cpu, char *missing, size_t len)
{
    struct sysfs *s = malloc(sizeof(*s));
    long *pkg = calloc(t->n ? t->n : 1, sizeof(*pkg));
    bool ok = s && pkg;

    missing[0] = '\0';
    if (!ok) {
        warn("out of memory");
    } else {
        s->nocache = false;
        ok = sysfs_root(s) && sysfs_cpus(s, t, cpu, pkg);
        if (ok) {
            rank_by_cpu_and_package(t, cpu, pkg);
            symmetrize(t);
        } else if (s->nocache) {
            snprintf(missing, len, "%s", s->path);
        }
    }
    free(pkg);
    free(s);
    return ok;
}

/* ---- hwloc ---------------------------------------------------------------------- */

static bool build_hwloc(struct mely__topo *t, const int *cpu)
{
    char why[PATH_MAX + 128];

    if (mely__hwloc_ranks(cpu, t->n, t->dist, why, sizeof(why)))
        return true;
    warn("%s", why);
    return false;
}

/* sysfs has no cache directory (`missing`): hwloc, which also reads CPUID,
 * before the flat map. A map from hwloc is a good map: an info line (a log
 * hook sees it; MELY_STATS's description names the source), not a warning
 * on every start of every program on such machines; the flat map warns. */
static bool build_without_sysfs_caches(struct mely__topo *t, const int *cpu, const char *missing)
{
    char why[PATH_MAX + 128];

    set_flat(t);
    if (mely__hwloc_ranks(cpu, t->n, t->dist, why, sizeof(why))) {
        mely__log(MELY_LOG_INFO, "cache map: sysfs has no cache information (no %s); built from hwloc",
                  missing);
        snprintf(t->source, sizeof(t->source), "hwloc (sysfs has no cache information)");
        return true;
    }
    warn("sysfs has no cache information (no %s) and hwloc failed (%s)", missing, why);
    return false;
}

static bool build_from(struct mely__topo *t, const int *cpu, enum mely__topo_source src)
{
    char missing[PATH_MAX];

    switch (src) {
    case MELY__TOPO_SYSFS:
        snprintf(t->source, sizeof(t->source), "sysfs");
        if (build_sysfs(t, cpu, missing, sizeof(missing)))
            return true;
        return missing[0] && build_without_sysfs_caches(t, cpu, missing);
    case MELY__TOPO_HWLOC:
        snprintf(t->source, sizeof(t->source), "hwloc (MELY_TOPOLOGY=hwloc)");
        return build_hwloc(t, cpu);
    default:
        warn("unknown source %d", (int)src);
        return false;
    }
}

/* ---- API ---------------------------------------------------------------------------- */

struct mely__topo *mely__topo_build(const int *cpu, unsigned nworkers,
                                    enum mely__topo_source src)
{
    size_t n = nworkers;
    struct mely__topo *t = malloc(sizeof(*t));

    if (!t)
        return NULL;
    t->n = nworkers;
    t->fell_back = false;
    t->order = malloc(n > 1 ? n * (n - 1) * sizeof(*t->order) : 1);
    t->dist = malloc(n ? n * n : 1);
    if (!t->order || !t->dist) {
        mely__topo_free(t);
        return NULL;
    }
    set_flat(t);

    snprintf(t->source, sizeof(t->source), "no workers");
    if (nworkers > 0 && !build_from(t, cpu, src)) {
        set_flat(t);
        t->fell_back = true;
        snprintf(t->source, sizeof(t->source), "flat, as a fallback: %s", last_reason);
    }
    fill_orders(t);
    return t;
}

const unsigned *mely__topo_order(const struct mely__topo *t, unsigned w)
{
    return t->order + (size_t)w * (t->n - 1);
}

unsigned mely__topo_distance(const struct mely__topo *t, unsigned a, unsigned b)
{
    static const uint8_t of_rank[NRANKS] = {
        [RANK_L2] = MELY__TOPO_L2,
        [RANK_L3] = MELY__TOPO_L3,
        [RANK_PKG] = MELY__TOPO_L3,
        [RANK_FAR] = MELY__TOPO_FAR,
    };
    return of_rank[t->dist[(size_t)a * t->n + b]];
}

bool mely__topo_fell_back(const struct mely__topo *t)
{
    return t->fell_back;
}

/* Prints the groups of workers at rank `rank` or nearer with two members or
 * more, after `label`; "none" when there are none. */
static void describe_groups(const struct mely__topo *t, unsigned rank, const char *label, FILE *f)
{
    unsigned n = t->n, groups = 0;
    bool *seen = calloc(n ? n : 1, sizeof(*seen));

    fprintf(f, "  %s:", label);
    for (unsigned a = 0; seen && a < n; a++) {
        if (seen[a])
            continue;
        unsigned members = 0;
        for (unsigned b = a; b < n; b++)
            members += t->dist[(size_t)a * n + b] <= rank;
        if (members < 2)
            continue;
        groups++;
        fputs(" {", f);
        const char *sep = "";
        for (unsigned b = a; b < n; b++)
            if (t->dist[(size_t)a * n + b] <= rank) {
                seen[b] = true;
                fprintf(f, "%s%u", sep, b);
                sep = " ";
            }
        fputc('}', f);
    }
    fprintf(f, "%s\n", groups ? "" : " none");
    free(seen);
}

void mely__topo_describe(const struct mely__topo *t, FILE *f)
{
    fprintf(f, "mely cache map (%u workers; source: %s)\n", t->n, t->source);
    describe_groups(t, RANK_L2, "workers sharing an L1/L2 cache or a CPU", f);
    describe_groups(t, RANK_L3, "sharing an L3 cache (or nearer)", f);
    describe_groups(t, RANK_PKG, "sharing a package (or nearer)", f);
    for (unsigned w = 0; w < t->n && t->n > 1; w++) {
        fprintf(f, "  worker %u steals from:", w);
        const unsigned *o = mely__topo_order(t, w);
        for (unsigned i = 0; i + 1 < t->n; i++)
            fprintf(f, " %u", o[i]);
        fputc('\n', f);
    }
}

void mely__topo_free(struct mely__topo *t)
{
    if (!t)
        return;
    free(t->order);
    free(t->dist);
    free(t);
}
