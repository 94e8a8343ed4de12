/* SPDX-License-Identifier: MIT */
/* config.h: the resolved configuration of a runtime (internal; see config.c). */
#ifndef MELY_CONFIG_H
#define MELY_CONFIG_H

#include <sched.h>
#include <stdbool.h>

#include "mely/sched/engine.h"
#include <mely/mely.h>

#include "mely/steal/stealops.h"

struct mely__settings {
    unsigned workers;
    unsigned batch;
    unsigned spin_us;
    bool stealing;                       /* false: steal policy "off" */
    struct mely__steal_ops steal;        /* the composed policy, when stealing */
    char steal_name[MELY__STEAL_NAME_MAX]; /* steal.name points here */
    const struct mely__engine *engine;   /* engine.h */
    int topo_source;                     /* enum mely__topo_source */
    bool pin;
    bool keep_sigpipe;
    bool keep_malloc;
    unsigned stall_ms;  /* MELY_STALL_MS (stall.h); 0: off */
    unsigned event_budget_mb; /* event memory, MiB (freelist.h) */
    unsigned ncpus;    /* CPUs in `allowed` */
    cpu_set_t allowed; /* the process's affinity mask at init */
};

/* Applies defaults and MELY_* overrides to `in` (NULL: defaults) and checks
 * them. Returns 0 or MELY_EINVAL (after a message through mely__log, log.h). */
int mely__config_resolve(const mely_config_t *in, struct mely__settings *out);

/* The CPU worker `worker` is pinned to (the allowed CPUs in order, wrapping), or
 * -1 when pinning is off. */
int mely__config_cpu(const struct mely__settings *s, unsigned worker);

#endif
