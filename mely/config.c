/* SPDX-License-Identifier: MIT */
/*
 * config.c: defaults, MELY_* environment overrides, and validation.
 * The environment wins over the program's configuration, so that a deployed
 * binary can be tuned (or a benchmark row chosen) without rebuilding it.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "mely/config.h"
#include "mely/core/log.h"
#include "mely/observe/stall.h"
#include "mely/steal/steal.h"
#include "mely/topology/topology.h"

void mely_config_init(mely_config_t *cfg)
{
    *cfg = (mely_config_t){
        .workers = 0,
        .pin = 1,
        .batch = MELY_BATCH_DEFAULT,
        .spin_us = MELY_SPIN_US_DEFAULT,
        .steal = NULL,
        .engine = NULL,
        .event_budget_mb = MELY_EVENT_BUDGET_MB_DEFAULT,
    };
}

/* Parses env var `name` as an integer in [lo, hi] into *out if it is set.
 * Returns false (after a message through mely__log) if it is set to anything else. */
static bool env_uint(const char *name, unsigned long lo, unsigned long hi, unsigned *out)
{
    const char *s = getenv(name);
    if (!s)
        return true;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end != '\0' || *s == '-' || v < lo || v > hi) {
        mely__log(MELY_LOG_ERROR, "%s=\"%s\": expected an integer in %lu..%lu", name, s, lo, hi);
        return false;
    }
    *out = (unsigned)v;
    return true;
}

static bool check_range(const char *what, unsigned long v, unsigned long lo, unsigned long hi)
{
    if (v >= lo && v <= hi)
        return true;
    mely__log(MELY_LOG_ERROR, "configuration %s=%lu: expected %lu..%lu", what, v, lo, hi);
    return false;
}

/* The setting from env var `env` if set, else the configuration's value;
 * *where names its origin for messages. */
static const char *env_or(const char *env, const char *cfg_value, const char **where)
{
    const char *v = getenv(env);
    *where = v ? env : "configuration";
    return v ? v : cfg_value;
}

static bool resolve_engine(const mely_config_t *cfg, struct mely__settings *out)
{
    const char *where;
    const char *engine = env_or("MELY_ENGINE", cfg->engine, &where);

    out->engine = mely__engine_find(engine);
    if (out->engine)
        return true;
    mely__log(MELY_LOG_ERROR, "%s engine \"%s\": expected %s", where, engine, mely__engine_names);
    return false;
}

static bool resolve_steal(const mely_config_t *cfg, struct mely__settings *out)
{
    const char *where;
    const char *steal = env_or("MELY_STEAL", cfg->steal, &where);
    int r = mely__steal_compose(steal, &out->steal, out->steal_name, sizeof(out->steal_name));

    if (r < 0) {
        mely__log(MELY_LOG_ERROR, "%s steal policy \"%s\": expected %s", where, steal,
                  mely__steal_names);
        return false;
    }
    out->stealing = r > 0;
    if (!out->engine->colorqs && (out->steal.stealq || out->steal.measure)) {
        mely__log(MELY_LOG_ERROR,
                  "%s steal policy \"%s\": the %s engine takes off, base and locality",
                  where, steal, out->engine->name);
        return false;
    }
    return true;
}

/* Checks a 0-or-1 switch of the configuration. */
static bool check_flag(const char *what, int v)
{
    if (v == 0 || v == 1)
        return true;
    mely__log(MELY_LOG_ERROR, "configuration %s=%d: expected 0 or 1", what, v);
    return false;
}

/* Applies the numeric MELY_* overrides to *cfg and resolves its two
 * switches into *pin, *keep_sigpipe and *keep_malloc. Each value is checked as it is read,
 * in this order, so that the first bad one is the one reported. */
static bool resolve_numbers(mely_config_t *cfg, unsigned *pin, unsigned *keep_sigpipe,
                            unsigned *keep_malloc)
{
    *pin = cfg->pin != 0;
    if (!check_flag("pin", cfg->pin) ||
        !env_uint("MELY_WORKERS", 1, MELY_MAX_WORKERS, &cfg->workers) ||
        !env_uint("MELY_PIN", 0, 1, pin) ||
        !env_uint("MELY_BATCH", 1, MELY_BATCH_MAX, &cfg->batch) ||
        !env_uint("MELY_SPIN_US", 0, 1000000, &cfg->spin_us) ||
        !check_flag("keep_sigpipe", cfg->keep_sigpipe) ||
        !check_flag("keep_malloc", cfg->keep_malloc))
        return false;
    *keep_sigpipe = (unsigned)cfg->keep_sigpipe;
    *keep_malloc = (unsigned)cfg->keep_malloc;
    return env_uint("MELY_KEEP_SIGPIPE", 0, 1, keep_sigpipe) &&
           env_uint("MELY_KEEP_MALLOC", 0, 1, keep_malloc);
}

/* MELY_STALL_MS (stall.h): the environment alone sets it, since it is a
 * matter of watching a deployed program rather than of the program. */
static bool resolve_stall(struct mely__settings *out)
{
    out->stall_ms = MELY__STALL_MS_DEFAULT;
    return env_uint("MELY_STALL_MS", 0, MELY__STALL_MS_MAX, &out->stall_ms);
}

/* The configuration's own numbers, which no environment variable has
 * checked when it left them alone. */
static bool check_ranges(const mely_config_t *cfg)
{
    return check_range("workers", cfg->workers, 0, MELY_MAX_WORKERS) &&
           check_range("batch", cfg->batch, 1, MELY_BATCH_MAX) &&
           check_range("spin_us", cfg->spin_us, 0, 1000000) &&
           check_range("event_budget_mb", cfg->event_budget_mb, 0, MELY_EVENT_BUDGET_MB_MAX);
}

/* The least event budget, per worker: its reserve (deliver.c: 20 KB) and
 * its cache (freelist.h: 5 KB) are handed out from the start, and must
 * leave room for posts. */
enum { BUDGET_MIN_MB_PER_WORKER = 1 };

/* The event budget (freelist.h): MELY_EVENT_BUDGET_MB, else the
 * configuration's (0: the default), at least BUDGET_MIN_MB_PER_WORKER.
 * After the workers are known. */
static bool resolve_budget(const mely_config_t *cfg, struct mely__settings *out)
{
    const char *where = getenv("MELY_EVENT_BUDGET_MB") ? "MELY_EVENT_BUDGET_MB"
                                                       : "configuration event_budget_mb";
    unsigned mb = cfg->event_budget_mb ? cfg->event_budget_mb : MELY_EVENT_BUDGET_MB_DEFAULT;

    if (!env_uint("MELY_EVENT_BUDGET_MB", 1, MELY_EVENT_BUDGET_MB_MAX, &mb))
        return false;
    unsigned least = out->workers * BUDGET_MIN_MB_PER_WORKER;
    if (mb < least) {
        mely__log(MELY_LOG_ERROR, "%s=%u: expected at least %u (1 MiB per worker, %u workers)",
                  where, mb, least, out->workers);
        return false;
    }
    out->event_budget_mb = mb;
    return true;
}

static bool resolve_topology(struct mely__settings *out)
{
    const char *topo = getenv("MELY_TOPOLOGY");

    if (!topo || strcmp(topo, "sysfs") == 0) {
        out->topo_source = MELY__TOPO_SYSFS;
    } else if (strcmp(topo, "hwloc") == 0) {
        out->topo_source = MELY__TOPO_HWLOC;
    } else {
        mely__log(MELY_LOG_ERROR, "MELY_TOPOLOGY=\"%s\": expected sysfs or hwloc", topo);
        return false;
    }
    return true;
}

/* Usable CPUs come from the affinity mask, not get_nprocs(): taskset and
 * container limits must be honoured. */
static void resolve_cpus(struct mely__settings *out)
{
    CPU_ZERO(&out->allowed);
    if (sched_getaffinity(0, sizeof(out->allowed), &out->allowed) != 0 ||
        CPU_COUNT(&out->allowed) == 0) {
        CPU_ZERO(&out->allowed);
        CPU_SET(0, &out->allowed);
    }
    out->ncpus = (unsigned)CPU_COUNT(&out->allowed);
}

int mely__config_resolve(const mely_config_t *in, struct mely__settings *out)
{
    mely_config_t cfg;
    unsigned pin, keep_sigpipe, keep_malloc;

    if (in)
        cfg = *in;
    else
        mely_config_init(&cfg);
    if (!resolve_numbers(&cfg, &pin, &keep_sigpipe, &keep_malloc) || !resolve_engine(&cfg, out) ||
        !resolve_steal(&cfg, out) || !resolve_topology(out) || !resolve_stall(out) || !check_ranges(&cfg))
        return MELY_EINVAL;
    resolve_cpus(out);
    out->workers = cfg.workers ? cfg.workers
                               : (out->ncpus < MELY_MAX_WORKERS ? out->ncpus : MELY_MAX_WORKERS);
    out->pin = pin;
    out->keep_sigpipe = keep_sigpipe;
    out->keep_malloc = keep_malloc;
    out->batch = cfg.batch;
    out->spin_us = cfg.spin_us;
    return resolve_budget(&cfg, out) ? 0 : MELY_EINVAL;
}

int mely__config_cpu(const struct mely__settings *s, unsigned worker)
{
    if (!s->pin)
        return -1;
    unsigned k = worker % s->ncpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &s->allowed) && k-- == 0)
            return cpu;
    return -1;
}
