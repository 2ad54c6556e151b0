// cxx_inline: a known-answer program for inlined frames (issue 14 item 3), built -O2 -g as C++
// is: std::vector::push_back inlines allocator code into main, several levels deep. Run by
// tests/integration/test_cxx.sh, which compares each frame's inline chain with what binutils'
// addr2line -i prints for the same address. Prints "cxx_inline ok N".
#include <cstdio>
#include <vector>

std::vector<int> *volatile cxx_inline_keep;

int main()
{
    std::vector<int> v;
    for (int i = 0; i < 100; i++)
        v.push_back(i);
    cxx_inline_keep = new std::vector<int>(v);
    std::printf("cxx_inline ok %zu\n", cxx_inline_keep->size());
    delete cxx_inline_keep;
    return 0;
}
