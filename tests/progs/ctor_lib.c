/* ctor_lib.c: libms_ctor.so for ctor_main: its constructor allocates before memscope's agent
 * has run its own constructor (this library is initialized first), as libselinux's,
 * libstdc++'s and libLLVM's constructors do:
 *   - three blocks of 12345 bytes, through a helper (their stacks: helper, constructor);
 *   - MS_CTOR_MANY blocks of 777 bytes, more than the agent's static room for early events
 *     (4,096), so that the mapped chunks after it are used;
 *   - one block of 1111 bytes grown by realloc to 300,000 (moved: a free and an allocation);
 *   - one block of 4321 bytes from a frame whose rbp points at words that are no return
 *     addresses (a stack canary, a small number), as code built without frame pointers leaves
 *     it: a frame-pointer walk reads them, and memscope must not keep them as frames.
 * ctor_main frees them all. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define MS_CTOR_MANY 10000

__attribute__((visibility("default"))) void *ms_ctor_blocks[3];
__attribute__((visibility("default"))) void *ms_ctor_many[MS_CTOR_MANY];
__attribute__((visibility("default"))) void *ms_ctor_fake;
__attribute__((visibility("default"))) void *ms_ctor_grown;

__attribute__((noinline)) static void *ms_ctor_alloc(size_t n)
{
    return malloc(n);
}

/* Calls malloc(n) with rbp pointing at fake, a chain of two "frames" whose return-address
 * words are 0x8d0a7711716e4b00 and 0xe (what issue 47 found in clang's stacks). The stack is
 * aligned for the call below the red zone; rbx keeps rsp, and [bp] is read after rbx is set:
 * rbx is clobbered, so the compiler does not put bp there. */
__attribute__((visibility("default"), noinline)) void *ms_ctor_fake_frame(size_t n)
{
    volatile uintptr_t fake[4];
    fake[0] = (uintptr_t)&fake[2];
    fake[1] = 0x8d0a7711716e4b00u;
    fake[2] = 0;
    fake[3] = 0xe;
    void *r;
    size_t arg = n;
    __asm__ volatile("sub $128, %%rsp\n\t" /* past the red zone, where fake may lie */
                     "push %%rbp\n\t"
                     "push %%rbx\n\t"
                     "mov %%rsp, %%rbx\n\t"
                     "and $-16, %%rsp\n\t"
                     "mov %[bp], %%rbp\n\t"
                     "call malloc@PLT\n\t"
                     "mov %%rbx, %%rsp\n\t"
                     "pop %%rbx\n\t"
                     "pop %%rbp\n\t"
                     "add $128, %%rsp"
                     : "=a"(r), "+D"(arg)
                     : [bp] "r"(&fake[0])
                     : "rbx", "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "xmm0", "xmm1", "xmm2",
                       "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
                       "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc");
    return r;
}

__attribute__((constructor)) static void ms_ctor_allocate(void)
{
    for (int i = 0; i < 3; i++)
        ms_ctor_blocks[i] = ms_ctor_alloc(12345);
    for (int i = 0; i < MS_CTOR_MANY; i++)
        ms_ctor_many[i] = malloc(777);
    ms_ctor_fake = ms_ctor_fake_frame(4321);
    ms_ctor_grown = realloc(malloc(1111), 300000);
}
