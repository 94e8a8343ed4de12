/* SPDX-License-Identifier: MIT */
/*
 * topology.h: the cache map (the paper's §3.1): for each worker, the other
 * workers ordered by cache distance, which the locality-aware steal heuristic
 * walks as its core set.
 *
 * Distance between two workers a and b (pinned to CPUs cpu[a] and cpu[b]):
 *   0 (MELY__TOPO_L2)   they share a data or unified cache of level 1 or 2,
 *                       or are pinned to the same CPU;
 *   1 (MELY__TOPO_L3)   they share a data or unified cache of level 3 or more,
 *                       or sit in the same package;
 *   2 (MELY__TOPO_FAR)  anything else, and always when either is unpinned
 *                       (cpu -1): nothing is known about where it runs.
 * Worker w's order lists the other nworkers - 1 workers by distance, and
 * within distance 1 those sharing a cache before those sharing only the
 * package (a package may hold several L3s: amd16's four groups of four);
 * within each such class, by index starting after w and wrapping (w+1, w+2,
 * ..., w-1), so
 * the order is deterministic and, when every distance is equal, it is
 * libasync-smp's "following core numbers". That all-equal map is the *flat*
 * map: it is what pinning off gives, and what a build falls back to when its
 * source cannot be read.
 *
 * Sources:
 *  - MELY__TOPO_SYSFS reads, for each CPU a worker is pinned to,
 *    /sys/devices/system/cpu/cpuN/cache/indexM/{level,type,shared_cpu_list}
 *    (Data and Unified caches; Instruction caches are skipped) and
 *    /sys/devices/system/cpu/cpuN/topology/physical_package_id (a negative id
 *    means unknown). The environment variable MELY_SYSFS_ROOT, when set and
 *    not empty, is a directory that replaces "/" in those paths (tests point
 *    it at the trees under tests/unit/fixtures/sysfs/).
 *  - MELY__TOPO_HWLOC asks hwloc, opened at run time (libhwloc.so.15, through
 *    dlopen: topology_hwloc.c says why). Its Linux backend reads the same sysfs, and
 *    honours its own HWLOC_FSROOT for a fake root (with HWLOC_FSROOT set, the
 *    x86 backend is turned off, since cpuid describes the real machine, not
 *    the fake root). Distances come from the nearest data/unified cache or
 *    package above both PUs.
 * A file that cannot be read, content that does not parse (a level that is not
 * a small number, an unknown cache type, a shared_cpu_list that is not a
 * cpulist such as "0-3,8-11" or does not contain its own CPU), a CPU missing
 * from the tree or an hwloc failure (hwloc missing included) prints one
 * warning naming the file (or the CPU) through mely__log (log.h: stderr by
 * default), and the build returns the flat map. One exception: when a CPU
 * has no cache directory at all (sysfs knows no caches, as on some
 * hypervisors' guests), the sysfs source asks hwloc (which can also read
 * CPUID) before it falls back, and its one warning says which map it built.
 *
 * Cost: the sysfs build reads a handful of small files per distinct pinned
 * CPU and is O(nworkers^2 x caches per CPU); the hwloc build costs an hwloc
 * load (milliseconds). Both run once, at startup. The map is immutable after
 * the build: any thread may call mely__topo_order() and mely__topo_distance()
 * concurrently; mely__topo_build() reads the environment, so call it before
 * threads that might setenv() start (mely_init() does).
 */
#ifndef MELY_TOPOLOGY_H
#define MELY_TOPOLOGY_H

#include <stdbool.h>
#include <stdio.h>

enum mely__topo_source {
    MELY__TOPO_SYSFS,
    MELY__TOPO_HWLOC,
};

enum {
    MELY__TOPO_L2 = 0,
    MELY__TOPO_L3 = 1,
    MELY__TOPO_FAR = 2,
};

struct mely__topo;

/* Builds the map for nworkers workers, worker i pinned to cpu[i] (-1 when
 * unpinned; cpu may be NULL when nworkers is 0). Returns NULL only when out of
 * memory; a source that cannot be read gives the flat map and one warning
 * (see above). */
struct mely__topo *mely__topo_build(const int *cpu, unsigned nworkers,
                                    enum mely__topo_source src);

/* Worker w's neighbours, nearest first: nworkers - 1 indices (none with one
 * worker), valid until mely__topo_free(). w < nworkers. */
const unsigned *mely__topo_order(const struct mely__topo *t, unsigned w);

/* The distance between workers a and b (0, 1 or 2, above); 0 when a == b.
 * Symmetric. a, b < nworkers. */
unsigned mely__topo_distance(const struct mely__topo *t, unsigned a, unsigned b);

/* Whether the build fell back to the flat map because its source could not be
 * read (a map that is flat because pinning is off returns false). */
bool mely__topo_fell_back(const struct mely__topo *t);

/* Prints the map on f: where it came from ("sysfs"; "hwloc (MELY_TOPOLOGY=
 * hwloc)"; "hwloc (sysfs has no cache information)"; "flat, as a fallback:
 * <the warning's reason>"), the groups of workers that share an L1/L2 (or a
 * CPU), an L3 and a package, and each worker's steal order. MELY_STATS=1
 * prints it with the statistics. Any thread. */
void mely__topo_describe(const struct mely__topo *t, FILE *f);

/* Frees the map; NULL is allowed. */
void mely__topo_free(struct mely__topo *t);

#endif
