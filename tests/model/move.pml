/*
 * move.pml: the move protocol of mely/deliver.c, checked exhaustively by SPIN
 * (tests/model/check-move.sh runs it).
 *
 * What is modeled (names as in deliver.c's essay):
 *  - two workers W0 and W1, each with an inbox: a ring of CAP slots reserved
 *    in one total order by advancing `tail` (one atomic step: the CAS),
 *    written later and then marked ready; an owner drains ready slots in
 *    position order under its own lock, stopping at the first one not ready;
 *  - two colors: c, which a mover moves W0 -> W1 -> W0, and d, which stays on
 *    W0; each has an owner (the color map) and a color-queue that lives on
 *    one worker (loc); a worker runs a color's events from its queue under
 *    its lock (a run is atomic here: a running color is never moved, and the
 *    lock says so);
 *  - two posting workers, P posting PER_POSTER events to c and Q to d, each
 *    event one flush (steps 1-3): seq++, read the owner, reserve a slot in
 *    that owner's inbox, write it, seq++; what does not fit in a full inbox
 *    goes after step 3 by the overflow path: lock the owner (re-checking
 *    it), drain its inbox whole (waiting for slots still being written),
 *    queue directly;
 *  - the mover (a steal, or mely_color_move), holding both workers' locks
 *    (taken in index order): a. owner[c] = to; b. wait while a poster's seq
 *    is odd (Q's checked first, as a lower worker index would be); c. until
 *    = from's tail, drain from's inbox up to it, waiting for slots still
 *    being written; d. loc[c] = to.
 * Promela's interleavings are sequentially consistent, as the protocol's
 * key operations are (seq_cst in C11); each d_step or atomic block is one
 * atomic operation of the C code (a CAS, a lock acquisition, a store) or
 * work done under a lock that the model's other processes cannot observe.
 *
 * Properties: a worker queues an event only for a color whose queue it holds
 * and that it owns, or that a mover is taking from it (steps a-d; the
 * ghost moving_from) (assertion); each poster's events run in post order, each
 * once (assertion); no event is lost and nothing deadlocks (the workers
 * block when they have nothing to do and leave once every event ran, so a
 * lost event or a stuck wait is an invalid end state).
 * Abstractions: the foreign posters' lock (the second half of step b) and
 * the events' memory (the reserve) are not modeled.
 *
 * Broken variants, to show that the model is not vacuous (check-move.sh
 * requires SPIN to find each): -DSKIP_B (the mover does not wait for
 * flushes), -DSHORT_C (step c stops at the first slot not yet written).
 */

#define CAP 2          /* slots per inbox */
#define PER_POSTER 2   /* events each poster posts */
#define NEV (2 * PER_POSTER)
#define C 0            /* the color that moves */
#define D 1            /* the color that stays on W0 */

/* An event: poster * 8 + number (from 1); poster 0 posts to C, 1 to D. */
byte slot_ev[2 * CAP];      /* inbox w's slot i: [w * CAP + i] */
bool slot_ready[2 * CAP];
byte tail[2], head[2];      /* free-running positions */

bool lock[2];
byte owner[2];              /* color -> worker (C and D start on W0) */
byte loc[2];                /* color -> the worker holding its queue */
byte moving_from[2] = 255;  /* ghost: during steps a-d, the worker c leaves */
byte cq[2 * NEV];           /* color k's queue: cq[k * NEV + i] */
byte cq_n[2];

byte seq[2];                /* the posters' flush counters */
byte last_run[2];           /* per poster: the last number run */
byte ran = 0;

#define SLOT(w, pos) ((w) * CAP + (pos) % CAP)
#define READY(w) (head[w] != tail[w] && slot_ready[SLOT(w, head[w])])

inline release(w) { lock[w] = false }

/* Under w's lock: queue event e on its color's queue. */
inline enqueue(w, e) {
    assert(loc[(e) / 8] == w && (owner[(e) / 8] == w || moving_from[(e) / 8] == w));
    cq[((e) / 8) * NEV + cq_n[(e) / 8]] = (e);
    cq_n[(e) / 8]++
}

/* Under w's lock: drain w's inbox. whole: every position before `until`,
 * waiting for slots still being written; else stop at the first not ready.
 * Either way ready slots past `until` are taken too (so "before", not "up
 * to": the C code's (int32_t)(until - h) <= 0 test; a first version of this
 * model wrote !=, and SPIN found the wait that never ends). Positions do
 * not wrap in this model's few events. */
inline drain(w, whole, until) {
    do
    :: READY(w) ->
        d_step {
            enqueue(w, slot_ev[SLOT(w, head[w])]);
            slot_ready[SLOT(w, head[w])] = false;
            head[w]++
        }
    :: whole && head[w] < until && !slot_ready[SLOT(w, head[w])] ->
        slot_ready[SLOT(w, head[w])]    /* wait for the writer */
    :: else -> break
    od
}

proctype poster(byte p) {
    byte k = 1, o, pos, w, until;
    bool left;
    do
    :: k <= PER_POSTER ->
        left = false;
        d_step { seq[p]++ }                                /* 1 */
        o = owner[p];                                      /* 2: color p's owner */
        atomic {                                           /*    the CAS */
            if
            :: tail[o] - head[o] < CAP -> pos = tail[o]; tail[o]++
            :: else -> left = true
            fi
        }
        if
        :: !left ->
            slot_ev[SLOT(o, pos)] = p * 8 + k;
            slot_ready[SLOT(o, pos)] = true
        :: else -> skip
        fi;
        d_step { seq[p]++ }                                /* 3 */
        if
        :: left ->                                         /* overflow */
again:      w = owner[p];
            atomic { !lock[w] -> lock[w] = true };
            if
            :: owner[p] != w -> release(w); goto again
            :: else -> skip
            fi;
            until = tail[w];
            drain(w, true, until);
            skip;   /* the loop's exit cannot land inside a d_step */
            d_step { enqueue(w, p * 8 + k) }
            release(w)
        :: else -> skip
        fi;
        k++
    :: else -> break
    od
}

/* Runs the head event of color k, checking its poster's order. */
inline run_one(k) {
    d_step {
        e = cq[k * NEV];
        assert(e % 8 == last_run[e / 8] + 1);
        last_run[e / 8] = e % 8;
        i = 0;
        do
        :: i + 1 < cq_n[k] -> cq[k * NEV + i] = cq[k * NEV + i + 1]; i++
        :: else -> break
        od;
        cq_n[k]--;
        ran++
    }
}

proctype worker(byte w) {
    byte e, i;
    do
    :: ran == NEV -> break
    :: atomic { (READY(w) || (loc[C] == w && cq_n[C] > 0) || (loc[D] == w && cq_n[D] > 0)) &&
                !lock[w] -> lock[w] = true };
        drain(w, false, 0);
        if
        :: loc[C] == w && cq_n[C] > 0 -> run_one(C)
        :: loc[D] == w && cq_n[D] > 0 -> run_one(D)
        :: else -> skip
        fi;
        release(w)
    od
}

proctype mover() {
    byte from = 0, to = 1, n = 0, until;
    do
    :: n < 2 ->
        atomic { !lock[0] -> lock[0] = true };
        atomic { !lock[1] -> lock[1] = true };
        moving_from[C] = from;
        owner[C] = to;                                     /* a */
#ifndef SKIP_B
        (seq[1] % 2 == 0);                                 /* b */
        (seq[0] % 2 == 0);
#endif
        until = tail[from];                                /* c */
#ifdef SHORT_C
        drain(from, false, until);
#else
        drain(from, true, until);
#endif
        skip;   /* the drain loop's exit cannot land inside a d_step */
        d_step { loc[C] = to; moving_from[C] = 255 }        /* d */
        release(1);
        release(0);
        from = 1 - from;
        to = 1 - to;
        n++
    :: else -> break
    od
}

init {
    atomic {
        run poster(0);
        run poster(1);
        run worker(0);
        run worker(1);
        run mover()
    }
}
