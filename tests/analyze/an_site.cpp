/* an_site: a known-answer program for the call-site rule (tests/analyze/test_site.sh), built
 * twice: without debug information or frame pointers (-O2 -g0 -fomit-frame-pointer, as
 * distribution packages are) and with it (-O2 -g).
 *
 * Live at the peak (before the frees at the end), by the function that asks for the memory:
 *   site_new        3 x new Big (4096 B: operator new(unsigned long))        12288 B, 3 blocks
 *   site_new_array  5 x new char[700] (operator new[](unsigned long))         3500 B, 5 blocks
 *                   2 x new (std::nothrow) char[150] (the nothrow overload)    300 B, 2 blocks
 *   site_aligned    2 x new Aligned (256 B, alignas(64): the align_val_t one)   512 B, 2 blocks
 *   site_wrap_a     4 x my_xmalloc(300) (the program's own wrapper)           1200 B, 4 blocks
 *   site_wrap_b     2 x my_xmalloc(200)                                        400 B, 2 blocks
 * Then site_new's blocks are deleted: never freed are the other five sites' 5912 B.
 * my_xmalloc is the site of site_wrap_a's and site_wrap_b's blocks (1600 B, 6 blocks) unless
 * --site-skip=my_xmalloc names it. Prints "an_site ok" and exits 0, with or without the agent. */
#include <cstdio>
#include <cstdlib>
#include <new>

struct Big {
    char b[4096];
};
struct alignas(64) Aligned {
    char b[256];
};

/* Keeps the pointers where the compiler cannot prove them unused. */
void *volatile keep[32];
static int nkeep;

extern "C++" __attribute__((noinline)) void *my_xmalloc(std::size_t n)
{
    void *p = std::malloc(n);
    if (!p) {
        std::fputs("out of memory\n", stderr);
        std::abort();
    }
    return p;
}

__attribute__((noinline)) void site_new()
{
    for (int i = 0; i < 3; i++)
        keep[nkeep++] = new Big;
}

__attribute__((noinline)) void site_new_array()
{
    for (int i = 0; i < 5; i++)
        keep[nkeep++] = new char[700];
    for (int i = 0; i < 2; i++)
        keep[nkeep++] = new (std::nothrow) char[150];
}

__attribute__((noinline)) void site_aligned()
{
    for (int i = 0; i < 2; i++)
        keep[nkeep++] = new Aligned;
}

__attribute__((noinline)) void site_wrap_a()
{
    for (int i = 0; i < 4; i++)
        keep[nkeep++] = my_xmalloc(300);
}

__attribute__((noinline)) void site_wrap_b()
{
    for (int i = 0; i < 2; i++)
        keep[nkeep++] = my_xmalloc(200);
}

int main()
{
    std::puts("an_site start"); /* stdout's buffer: allocated before the sites */
    site_new();
    site_new_array();
    site_aligned();
    site_wrap_a();
    site_wrap_b();
    for (int i = 0; i < 3; i++)
        delete static_cast<Big *>(keep[i]);
    std::puts("an_site ok");
    return 0;
}
