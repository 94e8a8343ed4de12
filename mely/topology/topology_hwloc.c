/* SPDX-License-Identifier: MIT */
/*
 * topology_hwloc.c: the cache map's ranks from hwloc, with libhwloc opened at
 * run time.
 *
 * Why not link hwloc: its Linux backend needs libudev, which Debian ships
 * only as a shared library. Linked into libmely, hwloc made every static link
 * of a mely program fail (`pkg-config --static` adds -ludev, and no
 * libudev.a exists), for a source the runtime only uses when asked to
 * (MELY_TOPOLOGY=hwloc; sysfs is the default). So libhwloc is opened with
 * dlopen() the first time it is asked for, and kept until the process exits
 * (one load per process; hwloc keeps process-wide state, its list of
 * components, and unloading it would save nothing).
 *
 * A statically linked program can use it too: glibc's static dlopen works
 * when the program runs on the glibc it was linked with (the link prints
 * glibc's warning about it, as for libevent's getaddrinfo). A dlopen that
 * fails is one warning and the flat map, like any hwloc failure.
 *
 * Only functions libhwloc exports are called, through pointers, after
 * checking that its API has the major version this file was compiled with
 * (hwloc's own compatibility rule). The inline helpers of hwloc's headers
 * would call the library by name, so the three used here (root object,
 * common ancestor, PU by OS index) are written out below.
 */
#include "mely/topology/topology_hwloc.h"

#include <dlfcn.h>
#include <errno.h>
#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* hwloc 2.x's soname (since 2.0; a new major would change the API too). */
#define HWLOC_SONAME "libhwloc.so.15"

struct hwloc_api {
    __typeof__(&hwloc_get_api_version) get_api_version;
    __typeof__(&hwloc_topology_init) topology_init;
    __typeof__(&hwloc_topology_destroy) topology_destroy;
    __typeof__(&hwloc_topology_load) topology_load;
    __typeof__(&hwloc_topology_set_io_types_filter) set_io_types_filter;
    __typeof__(&hwloc_topology_set_flags) set_flags;
    __typeof__(&hwloc_get_type_depth) get_type_depth;
    __typeof__(&hwloc_get_nbobjs_by_depth) get_nbobjs_by_depth;
    __typeof__(&hwloc_get_obj_by_depth) get_obj_by_depth;
    __typeof__(&hwloc_obj_type_is_dcache) obj_type_is_dcache;
    /* hwloc >= 2.1 only; NULL before (used to keep cpuid out of a fake root) */
    int (*set_components)(hwloc_topology_t, unsigned long, const char *);
};

static const struct {
    const char *name;
    size_t offset;
} hwloc_syms[] = {
    {"hwloc_get_api_version", offsetof(struct hwloc_api, get_api_version)},
    {"hwloc_topology_init", offsetof(struct hwloc_api, topology_init)},
    {"hwloc_topology_destroy", offsetof(struct hwloc_api, topology_destroy)},
    {"hwloc_topology_load", offsetof(struct hwloc_api, topology_load)},
    {"hwloc_topology_set_io_types_filter", offsetof(struct hwloc_api, set_io_types_filter)},
    {"hwloc_topology_set_flags", offsetof(struct hwloc_api, set_flags)},
    {"hwloc_get_type_depth", offsetof(struct hwloc_api, get_type_depth)},
    {"hwloc_get_nbobjs_by_depth", offsetof(struct hwloc_api, get_nbobjs_by_depth)},
    {"hwloc_get_obj_by_depth", offsetof(struct hwloc_api, get_obj_by_depth)},
    {"hwloc_obj_type_is_dcache", offsetof(struct hwloc_api, obj_type_is_dcache)},
};

/* Written once under load_once, read-only afterwards. */
static struct hwloc_api api;
static char load_error[256]; /* empty: loaded */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static bool load_syms(void *lib)
{
    for (size_t i = 0; i < sizeof(hwloc_syms) / sizeof(hwloc_syms[0]); i++) {
        void *p = dlsym(lib, hwloc_syms[i].name);
        if (!p) {
            snprintf(load_error, sizeof(load_error), "%s has no %s", HWLOC_SONAME,
                     hwloc_syms[i].name);
            return false;
        }
        /* POSIX guarantees a function pointer fits a void *. */
        memcpy((char *)&api + hwloc_syms[i].offset, &p, sizeof(p));
    }
    void *p = dlsym(lib, "hwloc_topology_set_components");
    memcpy(&api.set_components, &p, sizeof(p));
    return true;
}

static void load(void)
{
    void *lib = dlopen(HWLOC_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(load_error, sizeof(load_error), "cannot load hwloc: %s",
                 e ? e : HWLOC_SONAME " not found");
        return;
    }
    if (!load_syms(lib))
        return;
    unsigned v = api.get_api_version();
    if (v >> 16 != HWLOC_API_VERSION >> 16)
        snprintf(load_error, sizeof(load_error), "%s has API %#x, mely was built for %#x",
                 HWLOC_SONAME, v, (unsigned)HWLOC_API_VERSION);
}

/* ---- what hwloc's inline helpers would do ------------------------------------- */

static hwloc_obj_t root_obj(hwloc_topology_t topo)
{
    return api.get_obj_by_depth(topo, 0, 0);
}

static const char *info_of(hwloc_obj_t o, const char *name)
{
    for (unsigned i = 0; i < o->infos_count; i++)
        if (strcmp(o->infos[i].name, name) == 0)
            return o->infos[i].value;
    return NULL;
}

/* A parent is always shallower than its child: moving the deeper of the two
 * (a on a tie) up never passes their deepest common ancestor. */
static hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b)
{
    while (a != b) {
        if (a->depth >= b->depth)
            a = a->parent;
        else
            b = b->parent;
    }
    return a;
}

static hwloc_obj_t pu_of(hwloc_topology_t topo, unsigned os_index)
{
    int depth = api.get_type_depth(topo, HWLOC_OBJ_PU);
    if (depth < 0)
        return NULL;
    unsigned n = api.get_nbobjs_by_depth(topo, depth);
    for (unsigned i = 0; i < n; i++) {
        hwloc_obj_t o = api.get_obj_by_depth(topo, depth, i);
        if (o && o->os_index == os_index)
            return o;
    }
    return NULL;
}

/* ---- ranks -------------------------------------------------------------------- */

/* The rank of two PUs: from their deepest common ancestor upwards, the first
 * data/unified cache (level <= 2: L2, else L3) or package decides; reaching
 * the root without one gives FAR. Cores, dies and groups are passed through
 * (SMT siblings share a Core, and their L1 above it decides). */
static uint8_t rank_of(hwloc_obj_t a, hwloc_obj_t b)
{
    if (a == b)
        return MELY__RANK_L2;
    for (hwloc_obj_t o = common_ancestor(a, b); o; o = o->parent) {
        if (api.obj_type_is_dcache(o->type))
            return o->attr->cache.depth <= 2 ? MELY__RANK_L2 : MELY__RANK_L3;
        if (o->type == HWLOC_OBJ_PACKAGE)
            return MELY__RANK_PKG;
    }
    return MELY__RANK_FAR;
}

/* Configures and loads topo; false with a reason in why. */
static bool load_topology(hwloc_topology_t topo, char *why, size_t whylen)
{
    api.set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
    api.set_flags(topo, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
    const char *fsroot = getenv("HWLOC_FSROOT");
    bool fake = fsroot && *fsroot && strcmp(fsroot, "/") != 0;
#if HWLOC_API_VERSION >= 0x00020100
    /* cpuid describes this machine, not a fake root: keep it out. */
    if (fake && api.set_components)
        api.set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
#endif
    if (api.topology_load(topo) < 0) {
        snprintf(why, whylen, "hwloc_topology_load failed (%s)", strerror(errno));
        return false;
    }
    /* A fake root hwloc's Linux backend cannot read leaves a topology made up
     * from sysconf(): as wrong as no answer. */
    const char *backend = info_of(root_obj(topo), "Backend");
    if (fake && (!backend || strcmp(backend, "Linux") != 0)) {
        snprintf(why, whylen, "hwloc could not read HWLOC_FSROOT=%s", fsroot);
        return false;
    }
    return true;
}

static bool fill_ranks(hwloc_topology_t topo, const int *cpu, unsigned n, uint8_t *dist,
                       hwloc_obj_t *pu, char *why, size_t whylen)
{
    for (unsigned w = 0; w < n; w++) {
        if (cpu[w] < 0)
            continue;
        pu[w] = pu_of(topo, (unsigned)cpu[w]);
        if (!pu[w]) {
            snprintf(why, whylen, "hwloc knows no PU for cpu %d", cpu[w]);
            return false;
        }
    }
    for (unsigned a = 0; a < n; a++)
        for (unsigned b = 0; b < n; b++)
            dist[(size_t)a * n + b] = a == b            ? MELY__RANK_L2
                                      : pu[a] && pu[b] ? rank_of(pu[a], pu[b])
                                                       : MELY__RANK_FAR;
    return true;
}

bool mely__hwloc_ranks(const int *cpu, unsigned n, uint8_t *dist, char *why, size_t whylen)
{
    pthread_once(&load_once, load);
    if (load_error[0]) {
        snprintf(why, whylen, "%s", load_error);
        return false;
    }
    hwloc_obj_t *pu = calloc(n ? n : 1, sizeof(*pu));
    if (!pu) {
        snprintf(why, whylen, "out of memory");
        return false;
    }
    hwloc_topology_t topo;
    if (api.topology_init(&topo) < 0) {
        snprintf(why, whylen, "hwloc_topology_init failed (%s)", strerror(errno));
        free(pu);
        return false;
    }
    bool ok = load_topology(topo, why, whylen) && fill_ranks(topo, cpu, n, dist, pu, why, whylen);
    api.topology_destroy(topo);
    free(pu);
    return ok;
}
