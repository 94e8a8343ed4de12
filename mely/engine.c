/* SPDX-License-Identifier: MIT */
/* engine.c: the engines, found by name (engine.h). */
#include <string.h>

#include "mely/sched/engine.h"

static const struct mely__engine *const engines[] = {
    &mely__engine_mely, /* the first: the default */
    &mely__engine_legacy,
};

const char mely__engine_names[] = "mely or legacy";

const struct mely__engine *mely__engine_find(const char *name)
{
    if (!name)
        return engines[0];
    for (size_t i = 0; i < sizeof(engines) / sizeof(engines[0]); i++)
        if (strcmp(engines[i]->name, name) == 0)
            return engines[i];
    return NULL;
}
