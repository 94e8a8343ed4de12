/* SPDX-License-Identifier: MIT */
/* hello.c: the README's example. Colors 1..8 run in parallel; each color's
 * events run in order. Built by `make check`, run under valgrind by CI. */
#include <stdio.h>

#include <mely/mely.h>

static mely_t rt;
static _Atomic int left = 8 * 4;

static void hello(void *arg)
{
    printf("%s on worker %d, color %d\n", (const char *)arg, mely_current_worker(),
           mely_current_color());
    if (--left == 0)
        mely_stop(&rt);
}

int main(void)
{
    static const char *words[] = {"one", "two", "three", "four"};
    int err = mely_init(&rt, NULL); /* one worker per usable CPU */

    if (err) {
        fprintf(stderr, "mely_init: %s\n", mely_strerror(err));
        return 1;
    }
    for (mely_color_t color = 1; color <= 8; color++)
        for (int i = 0; i < 4; i++)
            if ((err = mely_post(&rt, color, hello, (void *)words[i])) != 0)
                fprintf(stderr, "mely_post: %s\n", mely_strerror(err));
    err = mely_run(&rt); /* this thread becomes worker 0 */
    if (err)
        fprintf(stderr, "mely_run: %s\n", mely_strerror(err));
    return mely_shutdown(&rt) == 0 && err == 0 ? 0 : 1;
}
