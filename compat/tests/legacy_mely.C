/* SPDX-License-Identifier: MIT */
// legacy_mely.C: a program in the original Mely's style: includes "mely.h",
// uses raw cbv pointers (auto-free, and one reused callback with
// setFlagAutoFree(false)), cwrap/cpwrap, fdcb from a callback ended with
// fdcb_finished, DEBUG_TMP/PANIC, rdtscll, MAX_THREADS-sized arrays and the
// benchmark hooks. Prints a transcript and exits 0.
#include "mely.h"

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static cbv again;          // reused: posted three times
static int again_runs;
static int sock[2];
static int msgs_read;
static unsigned long per_worker[MAX_THREADS];
static unsigned long long t_start;
static std::atomic<int> parts_left(2);

static void part_done()
{
    if (--parts_left == 0) {
        unsigned long long t_end;
        rdtscll(t_end);
        if (t_end <= t_start)
            PANIC("the time-stamp counter went backwards\n");
        save_bench_time((unsigned long)(t_end - t_start));
        stop_hw_counters();
        printf("mely style: ok\n");
        exit(0);
    }
}

static void tick(int n)
{
    again_runs++;
    per_worker[get_current_proc()]++;
    if (get_current_color() != 3)
        PANIC("tick ran on color %d\n", get_current_color());
    DEBUG("tick %d\n", n);
    (void)n; // DEBUG expands to nothing, as in the original
    if (again_runs < 3) {
        delaycb(0, 2000000, again); // the same callback, again
        return;
    }
    printf("reused callback ran %d times\n", again_runs);
    again->setFlagAutoFree(true); // let it go after this run
    part_done();
}

static void reader(int fd)
{
    char buf[64];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return;
    buf[n] = 0;
    for (char *p = buf; *p; p++)
        if (*p == '\n')
            msgs_read++;
    if (strstr(buf, "END")) {
        printf("reader: %d messages, watch finished\n", msgs_read);
        fdcb_finished(true);
        close(fd);
        part_done();
    }
}

static void writer(int k)
{
    char msg[16];
    int len = k < 4 ? snprintf(msg, sizeof msg, "m%d\n", k) : snprintf(msg, sizeof msg, "END\n");
    if (write(sock[1], msg, len) != len)
        PANIC("write failed\n");
    if (k < 4) {
        cbv next = cpwrap(writer, k + 1, 6, 1); // auto-free: dropped after its run
        delaycb(0, 1000000, next);
    } else {
        close(sock[1]);
    }
}

static void start(int arg)
{
    DEBUG_TMP("start(%d) on worker %u\n", arg, get_current_proc());
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sock) < 0)
        PANIC("socketpair\n");
    make_async(sock[0]);
    fdcb(sock[0], selread, cwrap(reader, sock[0], 5)); // from inside a callback
    cpucb(cpwrap(writer, 0, 6, 1));

    again = cwrap(tick, 1, 3);
    again->setFlagAutoFree(false);
    if (again->getFlagAutoFree())
        PANIC("setFlagAutoFree(false) did not stick\n");
    delaycb(0, 1000000, again);
}

int main()
{
    rdtscll(t_start);
    register_task_avg_duration(1000);
    reset_runtime_stats();
    register_EH_name((void *)start, (char *)"start");
    cbv first = cwrap(start, 42, 2);
    cpucb(first);
    amain();
    return 0;
}
