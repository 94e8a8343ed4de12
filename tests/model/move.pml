/* SPDX-License-Identifier: MIT */
/*
 * move.pml: the move protocol of mely/remote/deliver.c (a color changes owner while
 * posts to it are in flight), checked exhaustively by SPIN. check-move.sh
 * runs it and requires SPIN to catch each broken variant below.
 *
 * WHAT IS MODELED (2 workers, 2 colors, inboxes of CAP = 2 slots)
 *  Workers W0 and W1 own an inbox each: a ring of CAP slots, reserved in one
 *  total order by a CAS on `tail`, each then written and marked ready by its
 *  poster; whoever holds the owner's lock reads ready slots in position order
 *  (`head`). Color C starts on W0 and is moved W0 -> W1 -> W0; color D stays
 *  on W0. owner[] is the color map; loc[] says which worker holds a color's
 *  queue (its cq). Processes:
 *   worker(w)  the owner W0 / W1: each lock hold drains the ready prefix of
 *              its inbox into its color-queues (mely__deliver: in position
 *              order, stopping at the first slot not ready).
 *   poster(A), poster(B)  two posting workers' threads (workers other than
 *              W0 and W1; their own inboxes play no part). B starts with the
 *              chain G: the handlers of a "generator" color, each posting one
 *              or two events to C. A posts the chain D_ (ND events to D, one
 *              per handler). With HOP (default), after any handler of G the
 *              generator may be stolen by the other thread, which runs its
 *              next handler: G's order is the order a causal chain of posts
 *              must keep, and with HOP=0 it is simply one poster's order.
 *              After each handler the thread flushes (mely__deliver_flush):
 *                1. seq[P]++, odd (SC RMW; in one step with the staging,
 *                   which no other process sees);
 *                2. the first staged event's owner o (SC load); then, as
 *                   deliver.c's publish() does, the owners of the next
 *                   events (SC loads) while they are o, forming a run; one
 *                   CAS on inbox[o].tail reserves as many of the run's slots
 *                   as fit; each slot is written and marked ready, one step
 *                   each; a run that did not fit whole ends the flush, else
 *                   the next run starts with the owner already read;
 *                3. seq[P]++, even (release);
 *              then, if events are left, maybe one retry of 1-3 (the C code
 *              retries up to FULL_TRIES times), and what is still left goes
 *              by mely__flush_locked_with (postpath.h): for each event in
 *              order, lock its owner (read owner, lock, re-check, retry if it
 *              moved), drain that inbox whole (mely__deliver_all: every
 *              position reserved before, waiting for slots still being
 *              written) and queue the event directly; the outbox is then
 *              empty.
 *   foreign()  a thread that is not a worker, posting the chain F (NF events
 *              to C) by mely__deliver_foreign: read owner[C] = o, take o's
 *              foreign lock, re-check the owner (else unlock, retry), reserve
 *              one slot, write it, unlock; if the inbox was full, post_now:
 *              lock the owner (with the re-check), drain it whole, queue.
 *   own()      with NL > 0: worker W1's thread posting the chain L (NL
 *              events to C), as post.c's post_from_worker does: it reads
 *              owner[C] (one load); if it is not W1 the event is staged;
 *              if it is W1, the outbox is flushed (steps 1-3, as the
 *              posters') and the event goes by post_now: lock the owner
 *              (read, lock, re-check), drain that inbox whole, queue
 *              directly. The color may have moved away between the read
 *              and the lock, and the flush put the staged event in the new
 *              owner's inbox: the drain must come first there too. At the
 *              chain's end (its handler's end) the outbox is flushed.
 *   mover()    a steal / mely_color_move by a thread that is not a poster
 *              (so step b checks both posters), NMOVES moves of C, each
 *              holding both workers' locks (mely__color_handoff):
 *                a. owner[C] = to (SC store);
 *                b. for each poster p (A first, as a lower worker index
 *                   would be): s = seq[p] (SC load); if s is odd, wait until
 *                   seq[p] != s; then take and drop from's foreign lock
 *                   (modeled as waiting until it is free: the same);
 *                c. until = inbox[from].tail, read once; drain inbox[from]:
 *                   every position before `until`, waiting for slots still
 *                   being written, and the ready ones after it, stopping at
 *                   the first position at or past `until` not ready;
 *                d. C's queue, with what step c added, now lives on `to`.
 *
 * MEMORY MODEL. Promela interleaves whole statements, so its executions are
 * sequentially consistent. That matches the protocol: the operations the
 * argument rests on (the seq RMWs and step b's load, the owner store and the
 * flush's owner loads, the tail CAS) are memory_order_seq_cst in the C code,
 * and the rest are release/acquire pairs (a slot's ready mark and its
 * reader, step 3 and step b's re-reads, the locks) that only publish what
 * they order, which SC orders too. Each atomic / d_step block holds at most
 * one access to state another process can see at that moment, or is one
 * atomic operation of the C code (a CAS, a lock acquisition), or is work
 * done under a lock; where two of the C code's steps are merged into one,
 * a comment says why no other process can tell.
 *
 * PROPERTIES (assertions, and SPIN's invalid-end-state check):
 *  - an event is queued on worker w only if w holds its color's queue and
 *    owns the color, or is the worker a move is taking the color from
 *    (steps a-d: the ghost moving_from): no event of C is ever queued on a
 *    worker that is not C's owner once the move's step d is done;
 *  - each chain's events (G, D_, F) are queued in the order they were
 *    posted, each exactly once (number == last queued + 1). A color-queue is
 *    FIFO, runs on the worker holding it and moves whole, so that is the
 *    order they run in, on C's current owner; the queues' contents and the
 *    runs themselves need not be modeled;
 *  - nothing is lost and no wait is endless: the owners leave only once
 *    every event has been queued, the posters and the mover once done, so a
 *    lost event or a step-b, step-c or drain wait that never ends is an
 *    invalid end state.
 *
 * ABSTRACTIONS. Memory is not modeled (events, a drain's allocation failure,
 * step c's reserve); positions do not wrap; seq counts modulo 4 (a mover
 * that misses two whole flushes of a poster waits longer, never less: the
 * odd value it saw cannot come back before that flush's step 3); handlers,
 * runs, priorities, head posts, wake-ups and parking are left out (a run
 * only pops the head of a queue, and a running color is never moved); a
 * worker's drain takes every ready slot in one step (one that stopped
 * earlier is the same as one made earlier); a worker's own posts to its own
 * colors are modeled only for W1 and the chain L (NL > 0). A worker's posting and
 * its owning are separate processes here (more interleavings than one
 * thread has), which is why the mover is a thread of its own: in the C code
 * a mover skips its own seq in step b, which is sound only because it is
 * never inside a flush.
 *
 * SWITCHES (spin -DNAME=value ...). Sizes: CAP, NG (G's events, default 3),
 * ND (1), NF (1), NMOVES (2); HOP=0: G stays on B; PER_EVENT: each event is
 * its own run, its owner read just before its reservation (the protocol as
 * the design notes word step 2).
 * Broken variants (check-move.sh requires SPIN to catch each, so that the
 * model is known not to be vacuous):
 *  SKIP_B       the mover does not wait for flushes in progress;
 *  SKIP_FLOCK   step b does not take from's foreign lock;
 *  SHORT_C      step c stops at the first slot not yet written;
 *  SHORT_ALL    the locked paths' whole drain stops at the first slot not
 *               yet written (what a drain that fails to allocate does);
 *  STAY_STAGED  a flush stops at a full inbox and the rest stays staged,
 *               retried by a later flush of the same thread, with no locked
 *               fallback (an earlier design): with HOP it loses G's order
 *               (with HOP=0 each thread's own order holds);
 *  OWN_NODRAIN  (with NL > 0) a post to a color the poster read as its own
 *               drains the owner's inbox only if the owner is still the
 *               poster (the code before issue 26): L's order is lost.
 * Trails: every printf starts with "@ ", so `spin -T -t <flags> move.pml |
 * grep '^@'` tells a counterexample step by step.
 */

#ifndef CAP
#define CAP 2          /* slots per inbox */
#endif
#ifndef NG
#define NG 3           /* G's events (to C) */
#endif
#ifndef ND
#define ND 1           /* D_'s events (to D) */
#endif
#ifndef NF
#define NF 1           /* F's events (to C) */
#endif
#ifndef NMOVES
#define NMOVES 2       /* moves of C: W0 -> W1, W1 -> W0, ... */
#endif
#ifndef HOP
#define HOP 1          /* G may be stolen between its handlers */
#endif
#ifndef NL
#define NL 0           /* L's events (to C, by W1's own thread) */
#endif

#define NEV (NG + ND + NF + NL)
#define NONE 255
#define C 0            /* the color that moves */
#define D 1            /* the color that stays on W0 */
#define A 0            /* the poster threads; A's seq is checked first */
#define B 1
#define T_L 2          /* W1's own thread, posting L (its seq) */
#define OWN 1          /* the worker whose thread posts L */
#define OBMAX 4        /* outbox capacity */

/* An event: chain * 8 + number (from 1); chains 0 = G, 1 = D_, 2 = F, 3 = L. */
#define EV(ch, n) ((ch) * 8 + (n))
#define CH(e) ((e) / 8)
#define NUM(e) ((e) % 8)
#define COL(e) (CH(e) == 1 -> D : C)

/* The inboxes: inbox w's slot for position pos is slot_*[w * CAP + pos % CAP]. */
byte slot_ev[2 * CAP];
bool slot_ready[2 * CAP];
byte tail[2], head[2];      /* free-running positions */
#define SLOT(w, pos) ((w) * CAP + (pos) % CAP)
#define READY(w) (head[w] != tail[w] && slot_ready[SLOT(w, head[w])])

bool lock[2];               /* the workers' locks */
bool flock[2];              /* the workers' foreign locks */
byte owner[2];              /* color -> owner (both start on W0) */
byte loc[2];                /* color -> the worker holding its color-queue */
byte moving_from[2] = NONE; /* ghost: during steps a-d, the worker C leaves */
byte seq[3];                /* the posting threads' counters, modulo 4 */

byte g_host = B;            /* the thread G's next handler runs on */
byte g_next = 1;            /* G's next event number */
byte d_next = 1;            /* D_'s next event number */
byte last_q[4];             /* per chain: the last number queued */
byte queued = 0;            /* events queued on color-queues */

/* Under w's lock (or its mover's): queue event e on its color's queue,
 * which must be on w, and w must own the color or be losing it to the move
 * in progress; e must come right after its chain's last queued event (so
 * nothing is lost, duplicated or reordered). A color-queue is FIFO and
 * moves whole, so that is the order its events run in: the queues' contents
 * need not be kept. */
#define NAME(e) (CH(e) == 0 -> 'G' : (CH(e) == 1 -> 'D' : (CH(e) == 2 -> 'F' : 'L')))
/* Who queues (for the trails): a posting thread (A, B, T_L), or these. */
#define BY_F 3
#define BY_M 4
#define BY_W 5
#define BYNAME(by) (by == A -> 'A' : (by == B -> 'B' : (by == T_L -> 'L' : (by == BY_F -> 'F' : 'M'))))
inline enqueue(w, e, by) {
    if
    :: by == BY_W -> printf("@ W%d: drains %c%d into its queues\n", w, NAME(e), NUM(e))
    :: else -> printf("@ %c: queues %c%d on W%d\n", BYNAME(by), NAME(e), NUM(e), w)
    fi;
    assert(loc[COL(e)] == w && (owner[COL(e)] == w || moving_from[COL(e)] == w));
    assert(NUM(e) == last_q[CH(e)] + 1);
    last_q[CH(e)] = NUM(e);
    queued++
}

/* Under w's lock: take the (ready) post at head into its color's queue;
 * `by`: who drains (BY_W: w itself, BY_M: the mover, else a poster). */
inline take_one(w, by) {
    e = slot_ev[SLOT(w, head[w])];
    enqueue(w, e, by);
    slot_ev[SLOT(w, head[w])] = 0;
    slot_ready[SLOT(w, head[w])] = false;
    head[w]++;
    e = 0
}

/* Under w's lock: drain w's inbox whole: every position before `until`
 * (the loop blocks at a slot not yet written: that is the wait) and the
 * ready ones after it, stopping at the first position at or past `until`
 * that is not ready (C: (int32_t)(until - h) <= 0). With `stopshort` (the
 * broken variants), stop at the first slot not ready, as an ordinary drain
 * does. */
inline drain_whole(w, until, by, stopshort) {
    do
    :: d_step { READY(w) -> take_one(w, by) }
    :: !READY(w) && (stopshort || head[w] >= until) -> break
    od
}

/* mely__lock_owner then mely__deliver_all's read of tail: read the owner;
 * take its lock, re-check it (only that lock's holders can change whether
 * it is w) and read tail (a reservation commutes with a lock acquisition):
 * one step; retry if the color moved; then drain w whole. */
#ifdef SHORT_ALL
#define SHORT_L true
#else
#define SHORT_L false
#endif
inline lock_owner_drain(col, w, until, by) {
    do
    :: w = owner[col];
       atomic {
           !lock[w] -> lock[w] = true;
           if
           :: owner[col] == w -> until = tail[w]; break
           :: else -> lock[w] = false; w = 0
           fi
       }
    od;
    drain_whole(w, until, by, SHORT_L)
}

/* The poster's outbox (a local FIFO): drop its first n events. */
inline ob_shift(n) {
    i = 0;
    do
    :: i + n < ob_n -> ob[i] = ob[i + n]; i++
    :: else -> break
    od;
    do
    :: i < ob_n -> ob[i] = 0; i++
    :: else -> break
    od;
    ob_n = ob_n - n;
    i = 0
}

inline stage(ev) {
    assert(ob_n < OBMAX);
    ob[ob_n] = ev;
    ob_n++
}

/* Step 1, deliver.c's publish(), its first statement. The callers do it in one step
 * with the handler's staging (the outbox is the thread's own; g_next and
 * g_host are bookkeeping that the protocol's other parties do not read). */
inline step1(t) {
    seq[t] = (seq[t] + 1) % 4;
    printf("@ %c: step 1, seq=%d\n", BYNAME(t), seq[t])
}

/* deliver.c's publish() after step 1: steps 2 and 3. Each step below
 * has at most one access to shared state (plus local work). */
inline flush_inboxes(t) {
    atomic {                                                    /* 2 */
        o = owner[COL(ob[0])];                                  /* SC load */
        printf("@ %c: reads owner of %c%d: W%d\n", BYNAME(t), NAME(ob[0]), NUM(ob[0]), o);
        k = 1;
        nxt = NONE
    }
    do
#ifndef PER_EVENT
    :: atomic {     /* the run: the following events with the same owner */
           n + k < ob_n && nxt == NONE ->
           nxt = owner[COL(ob[n + k])];                          /* SC load */
           printf("@ %c: reads owner of %c%d: W%d\n", BYNAME(t), NAME(ob[n + k]), NUM(ob[n + k]), nxt);
           if
           :: nxt == o -> k++; nxt = NONE
           :: else -> skip
           fi
       }
#endif
    :: atomic {     /* the CAS: as many of the run's slots as fit */
#ifdef PER_EVENT
           n < ob_n ->
#else
           n < ob_n && (n + k == ob_n || nxt != NONE) ->
#endif
           got = CAP - (tail[o] - head[o]);
           if
           :: got > k -> got = k
           :: else -> skip
           fi;
           pos = tail[o];
           tail[o] = tail[o] + got;
           if
           :: got == 0 -> printf("@ %c: inbox W%d full\n", BYNAME(t), o)
           :: else -> printf("@ %c: reserves %d of %d in inbox W%d at %d\n", BYNAME(t), got, k, o, pos)
           fi;
           j = 0
       };
       do           /* write each slot and mark it ready */
       :: d_step {
              j < got ->
              slot_ev[SLOT(o, pos + j)] = ob[n + j];
              slot_ready[SLOT(o, pos + j)] = true;
              printf("@ %c: writes %c%d at W%d:%d\n", BYNAME(t),
                     NAME(ob[n + j]), NUM(ob[n + j]), o, pos + j);
              j++
          }
       :: j == got -> break
       od;
       if
       :: got < k -> break                      /* full: the flush stops */
#ifdef PER_EVENT
       :: atomic {
              got == k && n + got < ob_n ->
              n = n + got; got = 0; j = 0; pos = 0;
              o = owner[COL(ob[n])];                             /* SC load */
              printf("@ %c: reads owner of %c%d: W%d\n", BYNAME(t), NAME(ob[n]), NUM(ob[n]), o)
          }
       :: got == k && n + got == ob_n -> n = n + got; got = 0; break
#else
       :: d_step { got == k -> n = n + got; o = nxt; k = 1; nxt = NONE; j = 0; got = 0; pos = 0 }
#endif
       fi
    :: n == ob_n -> break
    od;
    atomic {                                                    /* 3 */
        n = n + got;
        seq[t] = (seq[t] + 1) % 4;
        printf("@ %c: step 3, seq=%d, %d left staged\n", BYNAME(t), seq[t], ob_n - n);
        ob_shift(n);
        n = 0; o = 0; nxt = 0; j = 0; got = 0; pos = 0; k = 0
    }
}

/* mely__flush_locked_with (postpath.h): each event in order under its
 * owner's lock, after draining that owner's inbox whole, queued directly. */
inline flush_locked(t) {
    do
    :: ob_n > 0 ->
        if
        :: atomic { w != NONE && owner[COL(ob[0])] == w -> skip }
        :: atomic { w != NONE && owner[COL(ob[0])] != w -> lock[w] = false; w = NONE }
        :: w == NONE -> skip
        fi;
        if
        :: w == NONE -> lock_owner_drain(COL(ob[0]), w, until, t)
        :: else -> skip
        fi;
        atomic {
            e = ob[0];
            enqueue(w, e, t);
            ob_shift(1);
            e = 0;
            until = 0;
            if
            :: ob_n == 0 -> lock[w] = false; w = 0
            :: else -> skip
            fi
        }
    :: ob_n == 0 -> break
    od
}

/* mely__deliver_flush: steps 1-3 (step 1 done by the caller); one retry
 * (the C code: up to FULL_TRIES); what is left goes under the owners'
 * locks. STAY_STAGED: what is left stays staged. */
inline flush(t) {
    flush_inboxes(t);
#ifndef STAY_STAGED
    if
    :: ob_n > 0 -> d_step { step1(t) }; flush_inboxes(t)         /* a retry */
    :: true -> skip
    fi;
    if
    :: atomic { ob_n > 0 -> w = NONE }; flush_locked(t)
    :: else -> skip
    fi
#endif
}

proctype poster(byte t) {
    byte ob[OBMAX], ob_n;
    byte e, i, j, k, n, o, nxt, pos, got, w, until;
    do
    :: atomic {                 /* a handler of G: one or two posts */
           g_host == t && g_next <= NG ->
           stage(EV(0, g_next));
           g_next++;
           if
           :: g_next <= NG -> stage(EV(0, g_next)); g_next++
           :: true -> skip
           fi;
           step1(t)
       };
       flush(t);
#if HOP
       if
       :: g_next <= NG -> g_host = 1 - t;       /* G is stolen */
          printf("@ G moves to thread %c\n", 'A' + 1 - t)
       :: true -> skip
       fi
#endif
    :: atomic {                 /* a handler of D_: one post */
           t == A && d_next <= ND ->
           stage(EV(1, d_next));
           d_next++;
           step1(t)
       };
       flush(t)
#ifdef STAY_STAGED
    :: atomic { ob_n > 0 -> step1(t) };        /* retry what stayed */
       flush(t)
#endif
    :: g_next > NG && (t != A || d_next > ND) && ob_n == 0 -> break
    od
}

/* The foreign thread: mely__deliver_foreign, else post_now. */
proctype foreign() {
    byte e, w, until, o, pos, f = 1;
    bool room;
    do
    :: f <= NF ->
        do
        :: atomic { o = owner[C]; printf("@ F: reads owner of F%d: W%d\n", f, o) };
           /* take o's foreign lock and re-check the owner: one step, as
            * taking the lock commutes with the owner's store (step a) */
           atomic {
               !flock[o] ->
               if
               :: owner[C] == o -> flock[o] = true;
                  printf("@ F: holds W%d's foreign lock, owner re-checked\n", o);
                  break
               :: else -> o = 0
               fi
           }
        od;
        atomic {                                       /* reserve */
            room = (tail[o] - head[o] < CAP);
            if
            :: room -> pos = tail[o]; tail[o]++;
               printf("@ F: reserves W%d:%d for F%d\n", o, pos, f)
            :: else -> printf("@ F: inbox W%d full\n", o)
            fi
        };
        if
        :: room ->      /* write, mark ready, unlock: one step, since
                         * only the lock's takers read the lock */
            d_step {
                slot_ev[SLOT(o, pos)] = EV(2, f);
                slot_ready[SLOT(o, pos)] = true;
                printf("@ F: writes F%d at W%d:%d\n", f, o, pos);
                flock[o] = false;
                o = 0; pos = 0; room = false;
                f++
            }
        :: else ->      /* post_now: under the owner's lock */
            d_step { flock[o] = false; o = 0 };
            lock_owner_drain(C, w, until, BY_F);
            atomic {
                e = EV(2, f);
                enqueue(w, e, BY_F);
                lock[w] = false;
                e = 0; w = 0; until = 0;
                f++
            }
        fi
    :: else -> break
    od
}

#if NL > 0
#ifdef OWN_NODRAIN
#define OWN_DRAINS(w) (w == OWN)
#else
#define OWN_DRAINS(w) true
#endif
/* W1's thread: the chain L, each event staged or, when W1 reads itself as
 * C's owner, posted by post_now after a flush of what is staged. */
proctype own() {
    byte ob[OBMAX], ob_n;
    byte e, i, j, k, n, o, nxt, pos, got, w, until, l = 1, mine;
    do
    :: l <= NL ->
        atomic {
            mine = owner[C];                                    /* one load */
            printf("@ L: reads owner of L%d: W%d\n", l, mine)
        };
        if
        :: mine != OWN -> d_step { stage(EV(3, l)); l++; mine = 0 }
        :: else ->
            if
            :: ob_n > 0 -> d_step { step1(T_L) }; flush(T_L)
            :: else -> skip
            fi;
            /* post_now: lock the owner (read, lock, re-check) */
            do
            :: w = owner[C];
               atomic {
                   !lock[w] -> lock[w] = true;
                   if
                   :: owner[C] == w -> until = tail[w]; break
                   :: else -> lock[w] = false; w = 0
                   fi
               }
            od;
            if
            :: OWN_DRAINS(w) -> drain_whole(w, until, T_L, SHORT_L)
            :: else -> printf("@ L: W%d is not W1 now: no drain\n", w)
            fi;
            atomic {
                e = EV(3, l);
                enqueue(w, e, T_L);
                lock[w] = false;
                e = 0; w = 0; until = 0; mine = 0;
                l++
            }
        fi
    :: l > NL && ob_n > 0 -> d_step { step1(T_L) }; flush(T_L)   /* the handler's end */
    :: l > NL && ob_n == 0 -> break
    od
}
#endif

/* An owner: each lock hold drains the ready prefix of its inbox. */
proctype worker(byte w) {
    byte e;
    do
    :: queued == NEV -> break
    :: d_step {
           !lock[w] && READY(w) ->
           do
           :: READY(w) -> take_one(w, BY_W)
           :: else -> break
           od
       }
    od
}

/* Step b for poster p: an SC load; if odd, wait until it changes. */
inline wait_poster(p) {
    d_step {
        s = seq[p];
        printf("@ M: step b reads seq[%c]=%d\n", BYNAME(p), s);
        if
        :: s % 2 == 0 -> s = 0
        :: else -> skip
        fi
    };
    if
    :: s != 0 -> atomic { seq[p] != s -> s = 0 }
    :: else -> skip
    fi
}

proctype mover() {
    byte from = 0, to = 1, m = 0, until, s, e;
    do
    :: m < NMOVES ->
        /* both locks (nothing else takes two) and step a: one step, as
         * only the locks' takers can tell the difference */
        atomic {
            !lock[0] && !lock[1] ->
            lock[0] = true;
            lock[1] = true;
            owner[C] = to;                                      /* a */
            moving_from[C] = from;
            printf("@ M: step a, owner[C]=W%d\n", to)
        };
#ifndef SKIP_B
        wait_poster(A);                                         /* b */
        wait_poster(B);
#if NL > 0
        wait_poster(T_L);
#endif
#endif
#ifdef SKIP_FLOCK
        atomic {
            until = tail[from];                                 /* c */
            printf("@ M: step c, until=%d\n", until)
        };
#else
        /* b: take and drop from's foreign lock; c: read tail. One step: a
         * foreign poster reserves only while holding that lock (and after
         * it, re-checks and finds the new owner); a worker's reservation
         * commutes with the lock. */
        atomic {
            !flock[from] ->
            printf("@ M: step b: W%d's foreign lock is free\n", from);
            until = tail[from];                                 /* c */
            printf("@ M: step c, until=%d\n", until)
        };
#endif
#ifdef SHORT_C
        drain_whole(from, until, BY_M, true);
#else
        drain_whole(from, until, BY_M, false);
#endif
        atomic {                                                /* d */
            loc[C] = to;
            moving_from[C] = NONE;
            lock[1] = false;
            lock[0] = false;
            printf("@ M: step d, C's queue now on W%d\n", to);
            from = 1 - from;
            to = 1 - to;
            until = 0;
            m++
        }
    :: else -> break
    od
}

init {
    atomic {
        run worker(0);
        run worker(1);
        run poster(A);
        run poster(B);
        run foreign();
#if NL > 0
        run own();
#endif
        run mover()
    }
}
