/* SPDX-License-Identifier: MIT */
/*
 * backoff.cpp: tmoq (backoff.h), libasync's retransmission queue, on the
 * compat timers. All in one run of about 7 seconds (the queue counts whole
 * seconds): sends spaced 1, 2 then 4 seconds apart before timeout(); an
 * object removed after its second send hears nothing more; keeptrying()
 * after a timeout sends once more and times out again; start() twice keeps
 * one entry; a queue used from color 5 sends from color 5 (its timers have
 * that color); a destroyed queue sends nothing more.
 */
#include "async.h"
#include "backoff.h"

#include <vector>

#include "ctest.h"

struct req {
    const char *name;
    std::vector<int> sends;   /* the n of each xmit(n) */
    std::vector<double> when; /* and its time (ms) */
    int timeouts = 0;
    double timeout_at = 0;
    int color = -100;
    bool remove_after_second = false;
    int keeptrying = 0; /* how many times to call keeptrying on timeout */
    tmoq_entry<req> tlink;

    explicit req(const char *n) : name(n) {}
    void xmit(int n);
    void timeout();
};

static tmoq<req, &req::tlink, 1, 3> q3; /* sends at 0, +1, +2, timeout +4 */
static tmoq<req, &req::tlink, 1, 2> q2; /* sends at 0, +1, timeout +2 */
static tmoq<req, &req::tlink, 1, 3> q5; /* used from color 5 only */
static tmoq<req, &req::tlink, 1, 3> *qdead = new tmoq<req, &req::tlink, 1, 3>;

static req A("A"), B("B"), C("C"), D("D"), E("E"), F("F");

/* The timeouts of A, C, D, E and B's removal (colors 0 and 5). */
static std::atomic<int> g_pending_atomic{5};
static void check_all();
/* Once all five happened, two more seconds for anything that should not. */
static void one_done()
{
    if (g_pending_atomic.fetch_sub(1) == 1)
        delaycb(2, wrap(check_all));
}

void req::xmit(int n)
{
    sends.push_back(n);
    when.push_back(ct_now_ms());
    color = get_current_color();
    CHECK(this != &F || n == 0); /* F's queue was destroyed */
    if (remove_after_second && n == 1) {
        q3.remove(this);
        q3.remove(this); /* twice: nothing */
        one_done();
    }
}

void req::timeout()
{
    timeouts++;
    timeout_at = ct_now_ms();
    CHECK(this != &B);
    if (keeptrying > 0) {
        keeptrying--;
        q2.keeptrying(this);
        return;
    }
    one_done();
}

static void start_colored()
{
    CHECK(get_current_color() == 5);
    q5.start(&E);
}

static void check_all()
{
    CHECK(get_current_color() == 0);
    /* A: 0, 1, 2, then a timeout; whole-second deadlines: gaps of (0, 1],
     * (1, 2] and (3, 4] seconds (upper bounds widened for a loaded machine). */
    CHECK(A.sends == std::vector<int>({0, 1, 2}) && A.timeouts == 1);
    double g1 = A.when[1] - A.when[0], g2 = A.when[2] - A.when[1], g3 = A.timeout_at - A.when[2];
    if (!(g1 >= 0 && g1 <= 2500 && g2 >= 950 && g2 <= 3500 && g3 >= 2950 && g3 <= 5500))
        fprintf(stderr, "gaps %.0f %.0f %.0f ms\n", g1, g2, g3);
    CHECK(g1 >= 0 && g1 <= 2500);
    CHECK(g2 >= 950 && g2 <= 3500);
    CHECK(g3 >= 2950 && g3 <= 5500);
    /* B was removed after its second send */
    CHECK(B.sends == std::vector<int>({0, 1}) && B.timeouts == 0);
    /* C: 0, 1, timeout, keeptrying: 1 again, timeout */
    CHECK(C.sends == std::vector<int>({0, 1, 1}) && C.timeouts == 2);
    CHECK(C.timeout_at - C.when[2] >= 950);
    /* D was started twice at once: one entry, so one of each later send */
    CHECK(D.sends == std::vector<int>({0, 0, 1, 2}) && D.timeouts == 1);
    /* E lived on color 5 */
    CHECK(E.sends == std::vector<int>({0, 1, 2}) && E.timeouts == 1 && E.color == 5);
    /* F's queue was deleted after its first send */
    CHECK(F.sends == std::vector<int>({0}) && F.timeouts == 0);
    printf("compat backoff: ok\n");
    fflush(stdout);
    exit(0);
}

int main()
{
    ct_watchdog(60);
    B.remove_after_second = true;
    C.keeptrying = 1;
    q3.start(&A);
    q3.start(&B);
    q2.start(&C);
    q3.start(&D);
    q3.start(&D);
    cpucb(cwrap(start_colored, 5));
    qdead->start(&F);
    delete qdead; /* cancels its timer */
    amain();
}
