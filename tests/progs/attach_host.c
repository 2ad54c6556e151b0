/* attach_host: a C stand-in for the Python package's memscope.start()/stop(): starts recording
 * inside a running process with dlopen + memscope__attach (no LD_PRELOAD), with known blocks.
 *
 *   attach_host AGENT|- TRACE_DIR [global]
 *
 * AGENT is libmemscope.so ("-": run without it, for comparing output and status); TRACE_DIR
 * receives the trace; "global" dlopens the agent with RTLD_GLOBAL instead of RTLD_LOCAL.
 * Before attaching: 3 x malloc(1111), freed after attaching (unmatched frees; their addresses
 * go to stderr as "pre 0x..."), and 1 x 30001 through libms_attach_early (freed: unrecorded).
 * While attached (tests/integration/test_attach.sh checks these exactly):
 *   malloc 10001 x2 (1 freed); calloc(3, 1001) freed; malloc 20001 realloc'ed to 40001, freed;
 *   posix_memalign 5001 freed; aligned_alloc 7040 freed; reallocarray 10 x 801 freed;
 *   strdup of a 20-character string (21 bytes, the C library's own malloc call) freed;
 *   early library (loaded before attach): 30001 x2, one freed by the library, one by main;
 *   late library (dlopened by the early one after attach, by bare name): 50001 x3, 2 freed;
 *   a thread: malloc 12345 x8, all freed; mmap anonymous 1 MiB, munmapped.
 * Then memscope__detach, malloc 70001 freed (not recorded: the slots are restored), then
 * memscope__stop, malloc 60001 freed (not recorded). Prints "attach_host ok" and exits 0; on
 * an agent error, the reason on stderr and exit 3. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void *ms_attach_early_alloc(size_t n);
void ms_attach_early_free(void *p);
void *ms_attach_early_load(void);

static void *thread_main(void *arg)
{
    (void)arg;
    void *p[8];
    for (int i = 0; i < 8; i++)
        p[i] = malloc(12345);
    for (int i = 0; i < 8; i++)
        free(p[i]);
    return NULL;
}

static int call(void *h, const char *name)
{
    if (!h)
        return 0;
    int (*fn)(void) = (int (*)(void))dlsym(h, name);
    int rc = fn ? fn() : -1000;
    if (rc != 0)
        fprintf(stderr, "attach_host: %s returned %d\n", name, rc);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int use_agent = strcmp(argv[1], "-") != 0;
    int global = argc > 3 && !strcmp(argv[3], "global");

    void *pre[3];
    for (int i = 0; i < 3; i++)
        pre[i] = malloc(1111);
    free(ms_attach_early_alloc(30001));

    void *h = NULL;
    if (use_agent) {
        setenv("MEMSCOPE_TRACE_DIR", argv[2], 1);
        setenv("MEMSCOPE_DEPTH", "16", 1);
        h = dlopen(argv[1], RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
        if (!h) {
            fprintf(stderr, "attach_host: %s\n", dlerror());
            return 3;
        }
        if (call(h, "memscope__attach") != 0)
            return 3;
    }
    for (int i = 0; i < 3; i++) {
        fprintf(stderr, "pre %p\n", pre[i]);
        free(pre[i]);
    }

    void *a = malloc(10001), *b = malloc(10001);
    free(a);
    void *c = calloc(3, 1001);
    free(c);
    void *r = malloc(20001);
    r = realloc(r, 40001);
    free(r);
    void *pm = NULL;
    if (posix_memalign(&pm, 64, 5001) != 0)
        return 1;
    free(pm);
    void *al = aligned_alloc(128, 7040);
    free(al);
    void *ra = reallocarray(NULL, 10, 801);
    free(ra);
    char *s = strdup("memscope attach test");
    free(s);

    void *e1 = ms_attach_early_alloc(30001), *e2 = ms_attach_early_alloc(30001);
    ms_attach_early_free(e1);
    free(e2);

    void *late = ms_attach_early_load();
    if (!late)
        return 1;
    void *(*late_alloc)(size_t) = (void *(*)(size_t))dlsym(late, "ms_attach_late_alloc");
    void (*late_free)(void *) = (void (*)(void *))dlsym(late, "ms_attach_late_free");
    if (!late_alloc || !late_free)
        return 1;
    void *l[3];
    for (int i = 0; i < 3; i++)
        l[i] = late_alloc(50001);
    late_free(l[0]);
    late_free(l[1]);

    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    void *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 1;
    munmap(m, 1 << 20);

    if (call(h, "memscope__detach") != 0)
        return 3;
    free(malloc(70001));
    if (call(h, "memscope__stop") != 0)
        return 3;
    free(malloc(60001));

    (void)b;
    printf("attach_host ok\n");
    return 0;
}
