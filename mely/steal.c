/*
 * steal.c: the steal driver (see steal.h for the policy interface).
 *
 * Ownership: a color's map entry changes only here, with both the victim's and
 * the thief's locks held, in the same step that moves its color-queue from the
 * victim's core-queue to the thief's. Producers lock the owner they read and
 * re-check it (colormap.h), so they either queue on the victim before the move
 * (and the event moves with the queue) or on the thief after it. A running
 * color-queue is never taken: its worker holds events detached from it.
 *
 * Deadlock: two idle workers may try to steal from each other; both take the
 * two locks in worker-index order.
 *
 * Cost: a steal moves one color-queue in O(1) (unlink, relink, one map store)
 * whatever the number of events; the policy's choice may scan the victim.
 */
#include <string.h>

#include "mely/cycles.h"
#include "mely/enqueue.h"
#include "mely/steal.h"

static const struct {
    const char *name;
    const struct mely__steal_ops *ops;
} policies[] = {
    {"off", NULL},
    {"base", &mely__steal_base},
    {"locality", &mely__steal_locality},
};

const char mely__steal_names[] = "off, base, locality";

bool mely__steal_lookup(const char *name, const struct mely__steal_ops **ops)
{
    if (!name) {
        *ops = NULL;
        return true;
    }
    for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
        if (strcmp(policies[i].name, name) == 0) {
            *ops = policies[i].ops;
            return true;
        }
    }
    return false;
}

static void lock_pair(struct mely__worker *a, struct mely__worker *b, struct mely__counters *c)
{
    if (a->index > b->index) {
        struct mely__worker *t = a;
        a = b;
        b = t;
    }
    mely__spin_lock(&a->lock, c);
    mely__spin_lock(&b->lock, c);
}

static void unlock_pair(struct mely__worker *a, struct mely__worker *b)
{
    mely__spin_unlock(&a->lock);
    mely__spin_unlock(&b->lock);
}

/* Under both locks: construct_event_set and migrate in one O(1) step. */
static void migrate(struct mely__worker *thief, struct mely__worker *victim,
                    struct mely__colorq *cq)
{
    int n = (int)cq->count;

    mely__coreq_remove(&victim->coreq, cq);
    mely__add_pending(victim, -n);
    atomic_store_explicit(&thief->rt->owner[cq->color], (uint8_t)thief->index,
                          memory_order_release);
    mely__coreq_insert(&thief->coreq, cq);
    mely__add_pending(thief, n);
    mely__count(&thief->ctr.stolen_events, (uint64_t)n);
}

/* Tries one victim; true if a color moved. */
static bool try_victim(struct mely__worker *thief, struct mely__worker *victim,
                       const struct mely__steal_ops *ops)
{
    struct mely__colorq *cq = NULL;

    lock_pair(thief, victim, &thief->ctr);
    if (ops->can_be_stolen(victim))
        cq = ops->choose_color(victim);
    if (cq && mely__colorq_stealable(victim, cq))
        migrate(thief, victim, cq);
    else
        cq = NULL;
    unlock_pair(thief, victim);
    return cq != NULL;
}

bool mely__steal(struct mely__worker *thief)
{
    struct mely__rt *rt = thief->rt;
    const struct mely__steal_ops *ops = rt->steal;

    if (!ops || rt->nworkers < 2)
        return false;
    uint64_t start = mely__cycles();
    unsigned n = ops->core_set(thief, thief->steal_order);
    bool stolen = false;

    for (unsigned i = 0; i < n && !stolen; i++) { /* bounded: n < workers */
        struct mely__worker *victim = &rt->workers[thief->steal_order[i]];
        if (atomic_load_explicit(&victim->nevents, memory_order_relaxed) != 0)
            stolen = try_victim(thief, victim, ops);
    }
    mely__count(&thief->ctr.steal_attempts, 1);
    if (stolen) {
        mely__count(&thief->ctr.steals, 1);
        mely__count(&thief->ctr.steal_cycles, mely__cycles() - start);
    }
    return stolen;
}
