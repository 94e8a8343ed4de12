/* SPDX-License-Identifier: MIT */
// legacy_smp.C: a program in libasync-smp style. Many colors; producers on
// several colors post increments of plain (non-atomic) per-color counters to
// random colors in parallel (callbacks of one color never overlap, so no lock
// is needed); cpucb versus cpucb_tail order; negative colors pinned to
// workers; time-left annotations. Prints a summary and exits 0; a broken
// invariant ends it with fatal (exit 1). Run with stealing on and off.
#include "async.h"

#include <stdio.h>
#include <stdlib.h>

enum { NCOLORS = 64, NPRODUCERS = 4, PER_PRODUCER = 4000, FIRST_COLOR = 100 };

static long counts[NCOLORS];       // counts[i] is touched by color FIRST_COLOR+i only
static int busy[NCOLORS];          // 1 while a callback of that color runs
static long expected[NPRODUCERS][NCOLORS];
static std::atomic<long> remaining(NPRODUCERS * PER_PRODUCER);
static std::atomic<int> phases_left(3);
static int order[4];
static int norder;
static unsigned long long pinned_ok[MAX_THREADS];

static void phase_done()
{
    if (--phases_left == 0) {
        printf("libasync-smp style: ok\n");
        exit(0);
    }
}

static void check_counts()
{
    long total = 0;
    for (int c = 0; c < NCOLORS; c++) {
        long want = 0;
        for (int p = 0; p < NPRODUCERS; p++)
            want += expected[p][c];
        if (counts[c] != want)
            fatal << "color " << FIRST_COLOR + c << ": " << counts[c] << " increments, expected "
                  << want << "\n";
        total += counts[c];
    }
    printf("counters: %ld increments on %d colors\n", total, NCOLORS);
    phase_done();
}

static void incr(int i)
{
    if (get_current_color() != FIRST_COLOR + i)
        fatal << "incr ran on color " << get_current_color() << "\n";
    if (busy[i]++)
        fatal << "two callbacks of color " << FIRST_COLOR + i << " at once\n";
    for (volatile int k = 0; k < 50; k++)
        ;
    counts[i]++;
    busy[i]--;
    if (--remaining == 0)
        cpucb_tail(cwrap(check_counts, 1));
}

static void produce(int p, unsigned seed, int left)
{
    // post in slices, re-posting ourselves: the other producers run meanwhile
    for (int k = 0; k < 200 && left > 0; k++, left--) {
        seed = seed * 1103515245u + 12345u;
        int i = (int)((seed >> 16) % NCOLORS);
        expected[p][i]++;
        cpucb_tail(cwrap_timeleft(incr, i, FIRST_COLOR + i, 2000));
    }
    if (left > 0)
        cpucb_tail(cwrap(produce, p, seed, left, 10 + p));
}

static void note(int v)
{
    order[norder++] = v;
}

static void check_order()
{
    // posted by start_order: tail 1, tail 2, head 0 -> 0 1 2; then this one
    if (norder != 3 || order[0] != 0 || order[1] != 1 || order[2] != 2)
        fatal << "cpucb/cpucb_tail order broken: " << order[0] << order[1] << order[2] << "\n";
    printf("order: cpucb before cpucb_tail\n");
    phase_done();
}

static void start_order()
{
    cpucb_tail(cwrap(note, 1, 20));
    cpucb_tail(cwrap(note, 2, 20));
    cpucb(cwrap(note, 0, 20));
    cpucb_tail(cwrap(check_order, 20));
}

static std::atomic<int> pinned_left;
static void on_worker(int w)
{
    if (get_current_proc() != (unsigned)w || get_current_color() != -(w + 1))
        fatal << "pinned color " << -(w + 1) << " ran on worker " << get_current_proc() << "\n";
    pinned_ok[w]++;
    if (--pinned_left == 0) {
        for (int i = 0; i < task_get_nthreads(); i++)
            if (pinned_ok[i] != 10)
                fatal << "worker " << i << " ran " << pinned_ok[i] << " pinned callbacks\n";
        printf("pinned: every worker ran its own colors\n");
        phase_done();
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    setprogname(argv[0]);
    int n = task_get_nthreads();
    if (n < 1 || n > MAX_THREADS)
        fatal << "bad thread count " << n << "\n";
    cbv probe = cpwrap_timeleft(incr, 0, FIRST_COLOR, 1, 2000);
    if (probe->get_timeleft() != 2000 || probe->getprio() != 1)
        fatal << "annotations lost\n";
    for (int p = 0; p < NPRODUCERS; p++)
        cpucb_tail(cwrap(produce, p, 12345u * (p + 1), PER_PRODUCER, 10 + p));
    cpucb_tail(cwrap(start_order, 20));
    pinned_left = 10 * n;
    for (int k = 0; k < 10; k++)
        for (int w = 0; w < n; w++)
            cpucb_tail(cwrap(on_worker, w, -(w + 1)));
    amain();
}
