/* SPDX-License-Identifier: MIT */
/*
 * turnend.c: work at the end of a worker's turn (the design: turnend.h).
 *
 * Who may call: the worker's own thread only.
 */
#include "mely/remote/colormap.h"
#include "mely/remote/outbox.h"
#include "mely/runtime.h"
#include "mely/sched/turnend.h"

void mely__turnend_add(struct mely__worker *w, struct mely__turnend *node)
{
    node->color = (uint32_t)mely__current_color;
    node->next = w->batch_end;
    w->batch_end = node;
}

void mely__turnend_at_batch_end(struct mely__worker *w, struct mely__turnend *node)
{
    node->next = w->batch_done;
    w->batch_done = node;
}

void mely__turnend_batch_done(struct mely__worker *w)
{
    while (w->batch_done) { /* bounded: each node runs once per queuing */
        struct mely__turnend *node = w->batch_done;
        w->batch_done = node->next;
        node->next = NULL;
        node->run(node);
    }
}

void mely__turnend_batch_over(struct mely__worker *w, struct mely__colorq *cq)
{
    mely__spin_lock(&w->lock, &w->ctr);
    bool drained = mely__colorq_empty(&w->run) && mely__colorq_empty(cq);
    mely__spin_unlock(&w->lock);
    if (drained)
        mely__turnend_run_batch(w);
}

void mely__turnend_hold(struct mely__worker *w, struct mely__colorq *cq)
{
    struct mely__turnend *node = w->batch_end;
    while (node) { /* bounded: the batch's nodes */
        struct mely__turnend *next = node->next;
        node->next = w->turn_end;
        w->turn_end = node;
        cq->held++;
        node = next;
    }
    w->batch_end = NULL;
}

/* Runs the nodes of list, each on its color, and those they queue. */
static void run_list(struct mely__worker *w, struct mely__turnend *list)
{
    int saved = mely__current_color;
    while (list) { /* bounded: each node runs once per queuing */
        struct mely__turnend *node = list;
        list = node->next;
        node->next = NULL;
        mely__current_color = (int)node->color;
        node->run(node);
        mely__turnend_batch_done(w); /* what the node's run needs done on its color */
        if (w->batch_end) { /* queued by the run: same color, run now */
            struct mely__turnend *more = w->batch_end;
            w->batch_end = NULL;
            run_list(w, more);
        }
    }
    mely__current_color = saved;
    if (mely__outbox_pending(&w->outbox))
        mely__outbox_flush(w);
}

void mely__turnend_run_batch(struct mely__worker *w)
{
    struct mely__turnend *list = w->batch_end;
    w->batch_end = NULL;
    run_list(w, list);
}

/* Runs up to RELEASE_MAX nodes of the turn's list, then releases their
 * holds; false when the list was empty. */
static bool run_some(struct mely__worker *w)
{
    enum { RELEASE_MAX = 256 };
    uint32_t colors[RELEASE_MAX]; /* read before the runs: a node's owner may
                                     be gone once it ran */
    struct mely__turnend *list = w->turn_end, *last = NULL;
    unsigned n = 0;
    for (struct mely__turnend *node = list; node && n < RELEASE_MAX; node = node->next) {
        colors[n++] = node->color;
        last = node;
    }
    if (!n)
        return false;
    w->turn_end = last->next;
    last->next = NULL;
    run_list(w, list);
    mely__spin_lock(&w->lock, &w->ctr);
    for (unsigned i = 0; i < n; i++) /* one per node, as mely__turnend_hold held */
        mely__cq_of(w->rt, colors[i])->held--;
    w->turn_seq++; /* holds released: the claims' tags go stale */
    mely__spin_unlock(&w->lock);
    return true;
}

void mely__turnend_run(struct mely__worker *w)
{
    mely__turnend_batch_done(w); /* queued outside any batch (an idle hook's writes) */
    while (run_some(w)) /* bounded: the turn's nodes, RELEASE_MAX at a time */
        ;
}

bool mely__turnend_claim(struct mely__worker *w, uint32_t color, bool *queued,
                         struct mely__turnend *node, const _Atomic unsigned *refuse,
                         _Atomic uint64_t *tag)
{
    struct mely__rt *rt = w->rt;
    /* A look without the lock first: the owner changes only under the
     * owner's lock, so "not this worker" read now stays true while w does
     * not take the color itself; the lock confirms "this worker". */
    if (!rt->engine->holds || mely__owner(rt, color) != w->index)
        return false;
    mely__spin_lock(&w->lock, &w->ctr);
    struct mely__colorq *cq = mely__owner(rt, color) == w->index ? mely__cq_of(rt, color) : NULL;
    bool ok = cq && atomic_load_explicit(refuse, memory_order_relaxed) == 0;
    if (ok && !*queued) {
        *queued = true;
        node->color = color;
        node->next = w->turn_end;
        w->turn_end = node;
        cq->held++;
    }
    if (ok)
        atomic_store_explicit(tag, mely__turnend_tag(w->index, w->turn_seq),
                              memory_order_relaxed);
    mely__spin_unlock(&w->lock);
    return ok;
}
