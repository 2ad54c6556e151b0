/* pystack_sim: a test double of the memscope Python extension, for the agent's Python stacks.
 *
 *   pystack_sim [own]
 *
 * It reports Python frames and calls to the agent exactly as the extension's profile hook does
 * (memscope__py_frame / _py_call / _py_line / _py_return), without Python: frame 1 is
 * "train.py" main (line 1), frame 2 "model.py" forward (line 10). Allocations: 111 bytes in
 * main at line 5; 222 bytes in forward at line 12 called from main line 7; 333 bytes in main
 * at line 9 after forward returned. The tracer is on around main, so python_trace gets the
 * calls of main and forward. Run by tests/integration/test_pystacks.sh with
 * --call-stack=c:8,python:8. Without the agent it does the same allocations. With `own`, frame 2
 * is memscope's own (its import hook's file and function) instead of model.py's forward. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int memscope__py_frame(uint32_t id, const char *file, const char *func, int firstline)
    __attribute__((weak));
void memscope__py_call(uint32_t id, int caller_line, int line) __attribute__((weak));
void memscope__py_return(void) __attribute__((weak));
void memscope__py_line(int line) __attribute__((weak));
void memscope__py_trace(int on) __attribute__((weak));

__attribute__((noinline)) static void *ms_progs_py_alloc(size_t n)
{
    return malloc(n);
}

int main(int argc, char **argv)
{
    int agent = memscope__py_frame != NULL;
    int own = argc > 1 && !strcmp(argv[1], "own");
    if (agent) {
        memscope__py_frame(1, "train.py", "main", 1);
        if (own)
            memscope__py_frame(2, "/usr/lib/python3/dist-packages/memscope/torch/__init__.py",
                               "_TorchFinder.exec_module", 10);
        else
            memscope__py_frame(2, "model.py", "forward", 10);
        memscope__py_trace(1); /* the tracer sees main and forward */
        memscope__py_call(1, 0, 1);
        memscope__py_line(5);
    }
    void *a = ms_progs_py_alloc(111);
    if (agent)
        memscope__py_call(2, 7, 12);
    void *b = ms_progs_py_alloc(222);
    if (agent) {
        memscope__py_return();
        memscope__py_line(9);
    }
    void *c = ms_progs_py_alloc(333);
    if (agent) {
        memscope__py_return();
        memscope__py_trace(0);
    }
    printf("pystack_sim ok %d\n", agent);
    free(a);
    free(b);
    free(c);
    return 0;
}
