/*
 * legacy.h: the legacy engine, libasync-smp's own queueing (the Mely paper,
 * section 2), kept beside Mely's so that both are measured in one binary
 * (mely_config_t.engine = "legacy", MELY_ENGINE=legacy). See legacy.c.
 */
#ifndef MELY_LEGACY_H
#define MELY_LEGACY_H

#include "mely/runtime.h"

/* Under w->lock: queues ev (its fields set) on w's list; returns the
 * MELY__WAKE_* flags of enqueue.h. */
unsigned mely__legacy_enqueue(struct mely__worker *w, struct mely__event *ev);

/* The worker's event loop in the legacy engine (worker.c calls it). */
void mely__legacy_loop(struct mely__worker *w);

/* Under both locks: libasync-smp's can_be_stolen, choose_color_to_steal,
 * construct_event_set and migrate, whatever the policy's core set chose as
 * victim; true if a color moved. */
bool mely__legacy_steal(struct mely__worker *thief, struct mely__worker *victim);

/* Under the owner's lock: whether `color` has pending events or is running. */
bool mely__legacy_color_busy(const struct mely__worker *owner, mely_color_t color);

/* Events still queued (shutdown; no worker runs). */
size_t mely__legacy_pending(const struct mely__rt *rt);

#endif
