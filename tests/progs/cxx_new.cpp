// cxx_new: C++ new/delete, which memscope sees through the malloc/free they call.
//
// Run by tests/integration/test_cxx.sh. new char[90001] x 4 and new Big (90017 bytes) x 2, all
// deleted; new char[33333] once, never deleted (the only bytes live at exit: libstdc++'s
// emergency pool is handed back at exit). Prints "cxx_new ok" and exits 0.
#include <cstdio>
#include <cstring>

struct Big {
    char bytes[90017];
};

__attribute__((noinline)) char *ms_progs_cxx_new_array(std::size_t n)
{
    return new char[n];
}

__attribute__((noinline)) Big *ms_progs_cxx_new_object()
{
    return new Big;
}

char *ms_progs_cxx_leaked;

int main()
{
    ms_progs_cxx_leaked = ms_progs_cxx_new_array(33333);
    char *a[4];
    Big *b[2];
    for (auto &p : a) {
        p = ms_progs_cxx_new_array(90001);
        std::memset(p, 1, 90001);
    }
    for (auto &p : b) {
        p = ms_progs_cxx_new_object();
        std::memset(p->bytes, 2, sizeof p->bytes);
    }
    for (auto p : a)
        delete[] p;
    for (auto p : b)
        delete p;
    std::puts("cxx_new ok");
    return 0;
}
