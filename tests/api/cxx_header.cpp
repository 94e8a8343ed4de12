/* SPDX-License-Identifier: MIT */
/*
 * cxx_header.cpp: mely.h compiles as strict C++ (-pedantic-errors) and its
 * macros work there: MELY_TO builds the target it names.
 */
#include <mely/mely.h>

#include <cstdio>

static void nop(void *) {}

int main()
{
    mely_t m = {};
    const mely_to_t to = MELY_TO(70000 % MELY_COLORS);
    if (to.color != 70000 % MELY_COLORS || to.prio != MELY_PRIO_DEFAULT || to.handler) {
        std::fprintf(stderr, "cxx-header: MELY_TO gave color %u prio %d\n", to.color, to.prio);
        return 1;
    }
    if (mely_init(&m, nullptr) != 0 || mely_timer_after(&m, 1000, MELY_TO(3), nop, nullptr,
                                                        nullptr) != 0) {
        std::fprintf(stderr, "cxx-header: init or timer failed\n");
        return 1;
    }
    return mely_shutdown(&m) == 0 ? 0 : 1;
}
