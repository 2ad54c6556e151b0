/* names: names chosen by the program, for the outputs that show them (issue 37: CSV formula
 * injection). names NAME...: for each NAME, a mark and a range of that name around one 8-byte
 * malloc and free. Prints "names ok N". */
#include "memscope.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        memscope_mark(argv[i]);
        memscope_range_push(argv[i]);
        free(malloc(8));
        memscope_range_pop();
    }
    printf("names ok %d\n", argc - 1);
    return 0;
}
