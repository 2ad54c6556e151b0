/* an_leak_steps: a known-answer program for `memscope analyze leaks` (tests/analyze).
 *
 * Six steps (memscope_step() is called six times, so step 7 is the unfinished last one). Every
 * step allocates and frees scratch memory (an_scratch_work). Blocks that stay live:
 *   step 1: 30000 bytes (an_warmup_keep)       warm-up: never flagged
 *   step 3: 49152 bytes (an_leak_at_step, owner "model@layer1")   flagged at the end of step 4
 *   step 4: 81920 bytes (an_leak_at_step, owner "model@layer2")   flagged at the end of step 5
 *   step 5: 12345 bytes (an_late_free), freed during step 6       live at one step end: not flagged
 *   step 2: 7000 bytes (an_late_free), freed during step 3         not flagged
 *   step 6: 5000 bytes (an_last_step_keep)     live at exit, but no later step ends: not flagged
 * Prints "an_leak_steps ok" and exits 0, with or without the agent. */
#include "memscope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static void an_scratch_work(int step)
{
    for (int i = 0; i < 4; i++) {
        char *p = malloc(256 + (size_t)i);
        memset(p, step, 256);
        free(p);
    }
}

__attribute__((noinline)) static void *an_warmup_keep(void)
{
    return malloc(30000);
}

__attribute__((noinline)) static void *an_leak_at_step(size_t n)
{
    void *p = malloc(n);
    memset(p, 1, n);
    return p;
}

__attribute__((noinline)) static void *an_late_free(size_t n)
{
    return malloc(n);
}

__attribute__((noinline)) static void *an_last_step_keep(void)
{
    return malloc(5000);
}

static void *volatile sink[8];

int main(void)
{
    void *late2 = NULL, *late5 = NULL;
    for (int step = 1; step <= 6; step++) {
        an_scratch_work(step);
        switch (step) {
        case 1:
            sink[0] = an_warmup_keep();
            break;
        case 2:
            late2 = an_late_free(7000);
            break;
        case 3:
            free(late2);
            memscope_owner_push("model");
            memscope_owner_push("layer1");
            sink[1] = an_leak_at_step(49152);
            memscope_owner_pop();
            memscope_owner_pop();
            break;
        case 4:
            memscope_owner_push("model");
            memscope_owner_push("layer2");
            sink[2] = an_leak_at_step(81920);
            memscope_owner_pop();
            memscope_owner_pop();
            break;
        case 5:
            late5 = an_late_free(12345);
            break;
        case 6:
            free(late5);
            sink[3] = an_last_step_keep();
            break;
        }
        memscope_step();
    }
    puts("an_leak_steps ok");
    return 0;
}
