/* SPDX-License-Identifier: MIT */
/* Unit tests of the cache map (mely/topology/topology.h) on the fake sysfs trees under
 * tests/unit/fixtures/sysfs/ (machines described in gen.py there): each machine's
 * neighbour orders, written by hand from its description; sysfs and hwloc
 * agreeing on every fixture; odd or unreadable content (or a root too long
 * for a path) giving the flat map and one warning; the package deciding when
 * no cache is shared; more workers than CPUs; pinning off.
 *
 * The fixtures are found in $MELY_FIXTURES_DIR if set, else in FIXTURES_DIR
 * (the Makefile passes $(abs_top_srcdir)/tests/unit/fixtures/sysfs), else in
 * fixtures/sysfs relative to the current directory. A missing fixture fails
 * the test: nothing is skipped. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mely/topology/topology.h"
#include "tests/testutil.h"

#ifndef FIXTURES_DIR
#define FIXTURES_DIR "fixtures/sysfs"
#endif

static const char *fixtures(void)
{
    const char *d = getenv("MELY_FIXTURES_DIR");
    return d && *d ? d : FIXTURES_DIR;
}

/* Points both sources at fixture `name` (failing the test if it is missing). */
static void use_machine(const char *name)
{
    char root[4096], probe[4200];
    struct stat st;

    snprintf(root, sizeof(root), "%s/%s", fixtures(), name);
    snprintf(probe, sizeof(probe), "%s/sys/devices/system/cpu", root);
    ck_assert_msg(stat(probe, &st) == 0, "fixture %s not found (MELY_FIXTURES_DIR?)", probe);
    ck_assert_int_eq(setenv("MELY_SYSFS_ROOT", root, 1), 0);
    ck_assert_int_eq(setenv("HWLOC_FSROOT", root, 1), 0);
}

static const enum mely__topo_source sources[] = {MELY__TOPO_SYSFS, MELY__TOPO_HWLOC};
static const char *const source_name[] = {"sysfs", "hwloc"};

/* Asserts worker w's order in t equals want (n - 1 entries). */
static void assert_order(const struct mely__topo *t, unsigned n, unsigned w, const unsigned *want,
                         const char *what)
{
    const unsigned *got = mely__topo_order(t, w);
    char g[1024] = "", e[1024] = "";

    for (unsigned i = 0; i + 1 < n; i++) {
        snprintf(g + strlen(g), sizeof(g) - strlen(g), "%u ", got[i]);
        snprintf(e + strlen(e), sizeof(e) - strlen(e), "%u ", want[i]);
    }
    ck_assert_msg(strcmp(g, e) == 0, "%s: worker %u's order is [%s], expected [%s]", what, w, g,
                  e);
}

/* Every row is a permutation of the other workers, distances are symmetric,
 * 0 on the diagonal, and never decrease along an order. */
static void assert_well_formed(const struct mely__topo *t, unsigned n)
{
    for (unsigned w = 0; w < n; w++) {
        const unsigned *o = mely__topo_order(t, w);
        unsigned char seen[256] = {0};
        ck_assert_uint_eq(mely__topo_distance(t, w, w), 0);
        for (unsigned i = 0; i + 1 < n; i++) {
            ck_assert_uint_lt(o[i], n);
            ck_assert_uint_ne(o[i], w);
            ck_assert(!seen[o[i]]);
            seen[o[i]] = 1;
            if (i > 0)
                ck_assert_uint_le(mely__topo_distance(t, w, o[i - 1]),
                                  mely__topo_distance(t, w, o[i]));
        }
        for (unsigned v = 0; v < n; v++) {
            ck_assert_uint_le(mely__topo_distance(t, w, v), 2);
            ck_assert_uint_eq(mely__topo_distance(t, w, v), mely__topo_distance(t, v, w));
        }
    }
}

/* The flat map: every distance 2 (0 to oneself), orders w+1, ..., w-1. */
static void assert_flat(const struct mely__topo *t, unsigned n)
{
    for (unsigned w = 0; w < n; w++) {
        const unsigned *o = mely__topo_order(t, w);
        for (unsigned i = 0; i + 1 < n; i++)
            ck_assert_uint_eq(o[i], (w + 1 + i) % n);
        for (unsigned v = 0; v < n; v++)
            ck_assert_uint_eq(mely__topo_distance(t, w, v), v == w ? 0 : 2);
    }
}

static void identity(int *cpu, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        cpu[i] = (int)i;
}

/* ---- each machine's orders, from both sources ---------------------------------- */

struct want {
    unsigned w;
    unsigned order[16];
};

static void check_machine(const char *name, const int *cpu, unsigned n, const struct want *want,
                          unsigned nwant)
{
    use_machine(name);
    for (int s = 0; s < NELEM(sources); s++) {
        char what[128];
        struct mely__topo *t = mely__topo_build(cpu, n, sources[s]);

        snprintf(what, sizeof(what), "%s from %s", name, source_name[s]);
        ck_assert_ptr_nonnull(t);
        ck_assert_msg(!mely__topo_fell_back(t), "%s fell back to the flat map", what);
        assert_well_formed(t, n);
        for (unsigned i = 0; i < nwant; i++)
            assert_order(t, n, want[i].w, want[i].order, what);
        mely__topo_free(t);
    }
}

START_TEST(ci2_orders)
{
    int cpu[2] = {0, 1};
    static const struct want want[] = {{0, {1}}, {1, {0}}};
    check_machine("ci2", cpu, 2, want, NELEM(want));

    use_machine("ci2");
    struct mely__topo *t = mely__topo_build(cpu, 2, MELY__TOPO_SYSFS);
    ck_assert_uint_eq(mely__topo_distance(t, 0, 1), 1); /* private L2, shared L3 */
    mely__topo_free(t);
}
END_TEST

START_TEST(e5410_orders)
{
    int cpu[8];
    identity(cpu, 8);
    /* L2 pairs {0,1} {2,3} {4,5} {6,7}; packages 0-3 and 4-7; no L3. */
    static const struct want want[] = {
        {0, {1, 2, 3, 4, 5, 6, 7}}, {1, {0, 2, 3, 4, 5, 6, 7}}, {3, {2, 0, 1, 4, 5, 6, 7}},
        {5, {4, 6, 7, 0, 1, 2, 3}}, {6, {7, 4, 5, 0, 1, 2, 3}},
    };
    check_machine("e5410", cpu, 8, want, NELEM(want));

    use_machine("e5410");
    struct mely__topo *t = mely__topo_build(cpu, 8, MELY__TOPO_SYSFS);
    ck_assert_uint_eq(mely__topo_distance(t, 2, 3), 0);
    ck_assert_uint_eq(mely__topo_distance(t, 1, 2), 1);
    ck_assert_uint_eq(mely__topo_distance(t, 3, 4), 2);
    mely__topo_free(t);
}
END_TEST

START_TEST(amd16_orders)
{
    int cpu[16];
    identity(cpu, 16);
    /* One package; L3 groups 0-3, 4-7, 8-11, 12-15; private L2. The L3 group
     * comes before the rest of the package. */
    static const struct want want[] = {
        {0, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
        {5, {6, 7, 4, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3}},
        {15, {12, 13, 14, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
    };
    check_machine("amd16", cpu, 16, want, NELEM(want));

    use_machine("amd16");
    struct mely__topo *t = mely__topo_build(cpu, 16, MELY__TOPO_SYSFS);
    ck_assert_uint_eq(mely__topo_distance(t, 5, 6), 1);
    ck_assert_uint_eq(mely__topo_distance(t, 5, 9), 1); /* same package */
    mely__topo_free(t);
}
END_TEST

START_TEST(smt2s_orders)
{
    int cpu[16];
    identity(cpu, 16);
    /* Siblings c and c+8 share L1/L2; socket 0 = 0-3,8-11 shares an L3,
     * socket 1 = 4-7,12-15 another. */
    static const struct want want[] = {
        {0, {8, 1, 2, 3, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15}},
        {9, {1, 10, 11, 0, 2, 3, 8, 12, 13, 14, 15, 4, 5, 6, 7}},
        {6, {14, 7, 12, 13, 15, 4, 5, 8, 9, 10, 11, 0, 1, 2, 3}},
    };
    check_machine("smt2s", cpu, 16, want, NELEM(want));
}
END_TEST

START_TEST(offline_orders)
{
    /* Workers on the online CPUs 0, 1, 3, 4: packages {0,1} and {3,4}. */
    int cpu[4] = {0, 1, 3, 4};
    static const struct want want[] = {{0, {1, 2, 3}}, {1, {0, 2, 3}}, {2, {3, 0, 1}},
                                       {3, {2, 0, 1}}};
    check_machine("offline", cpu, 4, want, NELEM(want));
}
END_TEST

/* ---- sysfs and hwloc agree ----------------------------------------------------------- */

static const struct {
    const char *name;
    unsigned ncpu;
    int cpus[16];
} machines[] = {
    {"ci2", 2, {0, 1}},
    {"e5410", 8, {0, 1, 2, 3, 4, 5, 6, 7}},
    {"amd16", 16, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
    {"smt2s", 16, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
    {"offline", 4, {0, 1, 3, 4}},
};

/* For machine _i: workers on every online CPU, then twice as many workers as
 * CPUs (wrapping, as the runtime pins), then in reverse CPU order. */
START_TEST(sources_agree)
{
    const char *name = machines[_i].name;
    unsigned nc = machines[_i].ncpu;
    int cpu[32];

    use_machine(name);
    for (int shape = 0; shape < 3; shape++) {
        unsigned n = shape == 1 ? 2 * nc : nc;
        for (unsigned w = 0; w < n; w++)
            cpu[w] = shape == 2 ? machines[_i].cpus[nc - 1 - w] : machines[_i].cpus[w % nc];

        struct mely__topo *a = mely__topo_build(cpu, n, MELY__TOPO_SYSFS);
        struct mely__topo *b = mely__topo_build(cpu, n, MELY__TOPO_HWLOC);
        ck_assert_msg(!mely__topo_fell_back(a), "%s: sysfs fell back", name);
        ck_assert_msg(!mely__topo_fell_back(b), "%s: hwloc could not load the fixture", name);
        for (unsigned x = 0; x < n; x++) {
            for (unsigned y = 0; y < n; y++)
                ck_assert_msg(mely__topo_distance(a, x, y) == mely__topo_distance(b, x, y),
                              "%s (shape %d): distance(%u, %u) is %u from sysfs, %u from hwloc",
                              name, shape, x, y, mely__topo_distance(a, x, y),
                              mely__topo_distance(b, x, y));
            ck_assert_msg(memcmp(mely__topo_order(a, x), mely__topo_order(b, x),
                                 (n - 1) * sizeof(unsigned)) == 0,
                          "%s (shape %d): worker %u's orders differ", name, shape, x);
        }
        mely__topo_free(a);
        mely__topo_free(b);
    }
}
END_TEST

/* ---- more workers than CPUs; pinning off ------------------------------------------- */

START_TEST(more_workers_than_cpus)
{
    use_machine("ci2");
    /* 4 workers on 2 CPUs: workers on one CPU are distance 0. */
    int cpu[4] = {0, 1, 0, 1};
    static const struct want want[] = {{0, {2, 1, 3}}, {1, {3, 2, 0}}, {3, {1, 0, 2}}};
    check_machine("ci2", cpu, 4, want, NELEM(want));

    /* 12 workers on the 8 CPUs of e5410: worker 8 shares CPU 0. */
    int cpu12[12];
    for (unsigned w = 0; w < 12; w++)
        cpu12[w] = (int)(w % 8);
    static const struct want want12[] = {{8, {9, 0, 1, 10, 11, 2, 3, 4, 5, 6, 7}},
                                         {0, {1, 8, 9, 2, 3, 10, 11, 4, 5, 6, 7}}};
    check_machine("e5410", cpu12, 12, want12, NELEM(want12));
}
END_TEST

START_TEST(pinning_off)
{
    for (int s = 0; s < NELEM(sources); s++) {
        use_machine("e5410");
        int cpu[5] = {-1, -1, -1, -1, -1};
        struct mely__topo *t = mely__topo_build(cpu, 5, sources[s]);
        ck_assert(!mely__topo_fell_back(t));
        assert_flat(t, 5);
        mely__topo_free(t);

        /* One worker unpinned among pinned ones: it comes last for all. */
        int mixed[3] = {0, -1, 1};
        static const struct want want[] = {{0, {2, 1}}, {1, {2, 0}}, {2, {0, 1}}};
        check_machine("e5410", mixed, 3, want, NELEM(want));
    }
}
END_TEST

START_TEST(one_and_zero_workers)
{
    use_machine("ci2");
    for (int s = 0; s < NELEM(sources); s++) {
        int cpu[1] = {1};
        struct mely__topo *t = mely__topo_build(cpu, 1, sources[s]);
        ck_assert_ptr_nonnull(t);
        ck_assert(!mely__topo_fell_back(t));
        ck_assert_uint_eq(mely__topo_distance(t, 0, 0), 0);
        mely__topo_free(t);
        t = mely__topo_build(NULL, 0, sources[s]);
        ck_assert_ptr_nonnull(t);
        mely__topo_free(t);
    }
    mely__topo_free(NULL);
}
END_TEST

/* ---- odd content: flat map and one warning -------------------------------------------- */

static char tmp_root[64];

/* Copies fixture ci2 into a fresh temporary directory and points
 * MELY_SYSFS_ROOT at it. */
static void copy_ci2(void)
{
    char cmd[4400];

    use_machine("ci2"); /* fails the test if the fixture is missing */
    strcpy(tmp_root, "/tmp/mely-topo-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmp_root));
    snprintf(cmd, sizeof(cmd), "cp -R '%s/ci2/.' '%s'", fixtures(), tmp_root);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(setenv("MELY_SYSFS_ROOT", tmp_root, 1), 0);
}

static void remove_copy(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_root);
    ck_assert_int_eq(system(cmd), 0);
}

static void put(const char *rel, const char *content)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/%s", tmp_root, rel);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(content, f);
    fclose(f);
}

/* A warning may hold a path of PATH_MAX bytes. */
static char warned[8192];

/* Builds from sysfs for workers on CPUs 0 and 1 with stderr captured into
 * `warned`; returns the map and the length of what was written. */
static struct mely__topo *build_captured(ssize_t *len)
{
    char log[] = "/tmp/mely-topo-log-XXXXXX";
    int fd = mkstemp(log);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);

    int cpu[2] = {0, 1};
    struct mely__topo *t = mely__topo_build(cpu, 2, MELY__TOPO_SYSFS);

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    *len = pread(fd, warned, sizeof(warned) - 1, 0);
    close(fd);
    unlink(log);
    warned[*len > 0 ? *len : 0] = '\0';
    ck_assert_ptr_nonnull(t);
    return t;
}

/* Builds from sysfs for workers on CPUs 0 and 1 with stderr captured; asserts
 * the flat map and exactly one warning line containing `names`. */
static void assert_flat_with_warning(const char *names, const char *what)
{
    ssize_t len;
    struct mely__topo *t = build_captured(&len);
    const char *buf = warned;
    ck_assert_int_gt(len, 0);

    ck_assert_msg(mely__topo_fell_back(t), "%s: no fallback", what);
    assert_flat(t, 2);
    mely__topo_free(t);
    ck_assert_msg(strstr(buf, names) != NULL, "%s: warning \"%s\" does not name %s", what, buf,
                  names);
    ck_assert_msg(strchr(buf, '\n') == buf + len - 1, "%s: not one line: \"%s\"", what, buf);
}

static const char *const garbage_lists[] = {
    "", "x", "0-", "-1", "1-0", "0,,1", "0-1,", "0 1", "0-1x", "99999999999999999999", "0;1",
    "1", /* well-formed, but cpu0's own cache must serve cpu0 */
};

START_TEST(garbage_shared_cpu_list)
{
    copy_ci2();
    put("cpu0/cache/index3/shared_cpu_list", garbage_lists[_i]);
    assert_flat_with_warning("cpu0/cache/index3/shared_cpu_list", garbage_lists[_i]);
    remove_copy();
}
END_TEST

START_TEST(odd_level_and_type)
{
    copy_ci2();
    put("cpu1/cache/index2/level", "two");
    assert_flat_with_warning("cpu1/cache/index2/level", "level \"two\"");
    put("cpu1/cache/index2/level", "2");
    put("cpu0/cache/index0/type", "Weird");
    assert_flat_with_warning("cpu0/cache/index0/type", "type \"Weird\"");
    put("cpu0/cache/index0/type", "Data");
    put("cpu0/topology/physical_package_id", "zero");
    assert_flat_with_warning("cpu0/topology/physical_package_id", "package \"zero\"");
    remove_copy();
}
END_TEST

START_TEST(missing_files)
{
    char cmd[256];

    static const char *const files[] = {
        "cpu0/cache/index0/type",
        "cpu1/cache/index2/level",
        "cpu1/topology/physical_package_id",
    };
    for (int i = 0; i < NELEM(files); i++) {
        copy_ci2();
        snprintf(cmd, sizeof(cmd), "rm '%s/sys/devices/system/cpu/%s'", tmp_root, files[i]);
        ck_assert_int_eq(system(cmd), 0);
        assert_flat_with_warning(files[i], files[i]);
        remove_copy();
    }

    copy_ci2();
    snprintf(cmd, sizeof(cmd), "rm '%s/sys/devices/system/cpu/cpu1/cache/index3/shared_cpu_list'",
             tmp_root);
    ck_assert_int_eq(system(cmd), 0);
    assert_flat_with_warning("cpu1/cache/index3/shared_cpu_list", "missing shared_cpu_list");

    /* No cache directory: hwloc is asked first (no_cache_information). */
    snprintf(cmd, sizeof(cmd), "rm -r '%s/sys/devices/system/cpu/cpu1/cache'", tmp_root);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(setenv("HWLOC_FSROOT", "/nonexistent/mely", 1), 0);
    assert_flat_with_warning("cpu1/cache", "missing cache directory");
    remove_copy();
}
END_TEST

START_TEST(unreadable_root)
{
    ck_assert_int_eq(setenv("MELY_SYSFS_ROOT", "/nonexistent/mely", 1), 0);
    ck_assert_int_eq(setenv("HWLOC_FSROOT", "/nonexistent/mely", 1), 0);
    assert_flat_with_warning("/nonexistent/mely/sys/devices/system/cpu/cpu0/cache", "no root");

    /* hwloc on the same root: its own message, then ours, and the flat map. */
    ck_assert_int_eq(setenv("HWLOC_FSROOT", "/nonexistent/mely", 1), 0);
    int cpu[2] = {0, 1};
    struct mely__topo *t = mely__topo_build(cpu, 2, MELY__TOPO_HWLOC);
    ck_assert(mely__topo_fell_back(t));
    assert_flat(t, 2);
    mely__topo_free(t);
}
END_TEST

/* What mely__topo_describe() prints for t. */
static const char *described(const struct mely__topo *t)
{
    static char out[4096];
    FILE *f = fmemopen(out, sizeof(out), "w");
    ck_assert_ptr_nonnull(f);
    mely__topo_describe(t, f);
    fclose(f);
    return out;
}

/* Fixture nocache has no cpuN/cache directory: the sysfs source asks hwloc
 * (on the fixture: one package, no caches; on e5410: CPUs 0 and 1 share an
 * L2, which proves hwloc's answer is the one used), and only when hwloc
 * fails too gives the flat map, with one warning; a map from hwloc is no
 * warning (an info line, which stderr does not get), and its description
 * names the source. */
START_TEST(no_cache_information_asks_hwloc)
{
    ssize_t len;
    char root[4200];

    use_machine("nocache");
    struct mely__topo *t = build_captured(&len);
    ck_assert_msg(!mely__topo_fell_back(t), "fell back: %s", warned);
    ck_assert_uint_eq(mely__topo_distance(t, 0, 1), MELY__TOPO_L3); /* the package */
    ck_assert_msg(len <= 0, "a warning for a map hwloc built: \"%s\"", warned);
    ck_assert_msg(strstr(described(t), "source: hwloc (sysfs has no cache information)") &&
                      strstr(described(t), "sharing a package (or nearer): {0 1}") &&
                      strstr(described(t), "sharing an L1/L2 cache or a CPU: none"),
                  "described as \"%s\"", described(t));
    mely__topo_free(t);

    snprintf(root, sizeof(root), "%s/e5410", fixtures());
    ck_assert_int_eq(setenv("HWLOC_FSROOT", root, 1), 0);
    t = build_captured(&len);
    ck_assert_uint_eq(mely__topo_distance(t, 0, 1), MELY__TOPO_L2);
    ck_assert_msg(strstr(described(t), "sharing an L1/L2 cache or a CPU: {0 1}"), "described as \"%s\"",
                  described(t));
    mely__topo_free(t);

    ck_assert_int_eq(setenv("HWLOC_FSROOT", "/nonexistent/mely", 1), 0);
    t = build_captured(&len);
    ck_assert(mely__topo_fell_back(t));
    assert_flat(t, 2);
    ck_assert_msg(strstr(warned, "no cache information") && strstr(warned, "hwloc failed") &&
                      strchr(warned, '\n') == warned + len - 1,
                  "the warning is \"%s\"", warned);
    ck_assert_msg(strstr(described(t), "source: flat, as a fallback: sysfs has no cache"),
                  "described as \"%s\"", described(t));
    mely__topo_free(t);
}
END_TEST

/* A map read in full says so, with its groups and orders. */
START_TEST(describe_names_groups_and_source)
{
    int cpu[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    use_machine("e5410");
    struct mely__topo *t = mely__topo_build(cpu, 8, MELY__TOPO_SYSFS);
    const char *d = described(t);
    ck_assert_msg(strstr(d, "(8 workers; source: sysfs)") &&
                      strstr(d, "sharing an L1/L2 cache or a CPU: {0 1} {2 3} {4 5} {6 7}") &&
                      strstr(d, "sharing an L3 cache (or nearer): {0 1} {2 3} {4 5} {6 7}") &&
                      strstr(d, "sharing a package (or nearer): {0 1 2 3} {4 5 6 7}") &&
                      strstr(d, "worker 0 steals from: 1 2 3 4 5 6 7"),
                  "described as \"%s\"", d);
    mely__topo_free(t);
}
END_TEST

/* MELY_SYSFS_ROOT may end in '/'s; one too long for a path gives the flat
 * map, whether the root itself or a cache directory under it is too long. */
START_TEST(sysfs_root_forms)
{
    char root[PATH_MAX + 16];
    int cpu[2] = {0, 1};

    snprintf(root, sizeof(root), "%s/ci2//", fixtures());
    use_machine("ci2"); /* fails the test if the fixture is missing */
    ck_assert_int_eq(setenv("MELY_SYSFS_ROOT", root, 1), 0);
    struct mely__topo *t = mely__topo_build(cpu, 2, MELY__TOPO_SYSFS);
    ck_assert_msg(!mely__topo_fell_back(t), "root %s: fell back", root);
    ck_assert_uint_eq(mely__topo_distance(t, 0, 1), 1);
    mely__topo_free(t);

    memset(root, 'a', sizeof(root) - 1);
    root[0] = '/';
    root[PATH_MAX] = '\0';
    ck_assert_int_eq(setenv("MELY_SYSFS_ROOT", root, 1), 0);
    assert_flat_with_warning("MELY_SYSFS_ROOT too long", "a root of PATH_MAX bytes");
    root[PATH_MAX - 20] = '\0'; /* fits, but not with /sys/devices/... after it */
    ck_assert_int_eq(setenv("MELY_SYSFS_ROOT", root, 1), 0);
    assert_flat_with_warning("path too long", "a root 20 bytes short of PATH_MAX");
}
END_TEST

/* Workers whose CPUs share no cache are ranked by package: the same one
 * gives distance 1, different ones 2, and so does a package Linux does not
 * know (physical_package_id -1), which is no reason to fall back. */
START_TEST(ranked_by_package)
{
    static const struct {
        const char *pkg0, *pkg1;
        unsigned distance;
    } cases[] = {{"0", "0", 1}, {"0", "1", 2}, {"-1", "-1", 2}, {"-1", "0", 2}};
    int cpu[2] = {0, 1};

    for (int i = 0; i < NELEM(cases); i++) {
        copy_ci2();
        put("cpu0/cache/index3/shared_cpu_list", "0"); /* each CPU its own L3 */
        put("cpu1/cache/index3/shared_cpu_list", "1");
        put("cpu0/topology/physical_package_id", cases[i].pkg0);
        put("cpu1/topology/physical_package_id", cases[i].pkg1);
        struct mely__topo *t = mely__topo_build(cpu, 2, MELY__TOPO_SYSFS);
        ck_assert_msg(!mely__topo_fell_back(t), "packages %s, %s: fell back", cases[i].pkg0,
                      cases[i].pkg1);
        ck_assert_msg(mely__topo_distance(t, 0, 1) == cases[i].distance,
                      "packages %s, %s: distance %u, expected %u", cases[i].pkg0, cases[i].pkg1,
                      mely__topo_distance(t, 0, 1), cases[i].distance);
        mely__topo_free(t);
        remove_copy();
    }
}
END_TEST

/* The offline fixture: cpu2 is absent, cpu5 offline (no cache directory). */
START_TEST(pinned_to_missing_cpu)
{
    use_machine("offline");
    for (int s = 0; s < NELEM(sources); s++)
        for (int bad = 2; bad <= 5; bad += 3) {
            int cpu[3] = {0, bad, 3};
            struct mely__topo *t = mely__topo_build(cpu, 3, sources[s]);
            ck_assert_msg(mely__topo_fell_back(t), "%s, cpu %d", source_name[s], bad);
            assert_flat(t, 3);
            mely__topo_free(t);
        }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("topology");
    TCase *tc = new_tcase(s, "machines", 30);
    tcase_add_test(tc, ci2_orders);
    tcase_add_test(tc, e5410_orders);
    tcase_add_test(tc, amd16_orders);
    tcase_add_test(tc, smt2s_orders);
    tcase_add_test(tc, offline_orders);
    tcase_add_loop_test(tc, sources_agree, 0, NELEM(machines));
    tc = new_tcase(s, "shapes", 30);
    tcase_add_test(tc, more_workers_than_cpus);
    tcase_add_test(tc, pinning_off);
    tcase_add_test(tc, one_and_zero_workers);
    tc = new_tcase(s, "odd", 30);
    tcase_add_loop_test(tc, garbage_shared_cpu_list, 0, NELEM(garbage_lists));
    tcase_add_test(tc, odd_level_and_type);
    tcase_add_test(tc, missing_files);
    tcase_add_test(tc, no_cache_information_asks_hwloc);
    tcase_add_test(tc, describe_names_groups_and_source);
    tcase_add_test(tc, unreadable_root);
    tcase_add_test(tc, sysfs_root_forms);
    tcase_add_test(tc, ranked_by_package);
    tcase_add_test(tc, pinned_to_missing_cpu);
    return mely_test_main(s);
}
