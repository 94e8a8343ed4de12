/* SPDX-License-Identifier: MIT */
/*
 * init.cpp: init.h on its own: INITFN runs before main, EXITFN at exit,
 * INIT's start once before main and stop at exit.
 */
#include "init.h"

#include "ctest.h"

static int g_init_runs;
static int g_started, g_stopped;

INITFN(set_up);
static void set_up()
{
    g_init_runs++;
}

class counted_init;
INIT(counted_init);
int counted_init::count;
void counted_init::start()
{
    g_started++;
}
void counted_init::stop()
{
    g_stopped++;
    if (g_started != 1 || g_stopped != 1)
        _Exit(3);
    /* stop runs after main returned: report by the exit status */
    _Exit(0);
}

EXITFN(at_exit);
static void at_exit()
{
    if (g_init_runs != 1)
        _Exit(2);
    printf("compat init: exit functions ran\n");
    fflush(stdout);
}

int main()
{
    ct_watchdog(60);
    CHECK(g_init_runs == 1);
    CHECK(g_started == 1 && g_stopped == 0);
    printf("compat init: ok\n");
    fflush(stdout);
    /* EXITFN and INIT's stop: at exit (destroyed in reverse order: at_exit
     * first, then counted_init's stop, which ends the process with 0). */
    return 1;
}
