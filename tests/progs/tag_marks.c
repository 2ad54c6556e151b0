/* tag_marks: owner tags after the fact, as the Python package writes them (MARK messages the
 * store applies; docs/database.md "Owner tags").
 *
 *   tag_marks
 *
 * Block A (1111 bytes) is allocated under owner "model" and later tagged with
 * "describe addr=... owner=w1" then "describe addr=... owner=w2": its owner ends as model@w2.
 * Block B (2222 bytes, no owner) is tagged "memscope-tag:ptr=...;size=2222;owner=PTA@weight":
 * its owner becomes PTA@weight. A tag of an address that is not a live block changes nothing.
 * Run by tests/integration/test_annotations.sh. */
#include "memscope.h"

#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    char msg[128];
    memscope_owner_push("model");
    void *a = malloc(1111);
    memscope_owner_pop();
    void *b = malloc(2222);
    snprintf(msg, sizeof msg, "describe addr=%p owner=w1", a);
    memscope_mark(msg);
    snprintf(msg, sizeof msg, "describe addr=%p owner=w2", a);
    memscope_mark(msg);
    snprintf(msg, sizeof msg, "memscope-tag:ptr=%p;size=2222;owner=PTA@weight", b);
    memscope_mark(msg);
    memscope_mark("memscope-tag:ptr=0x10;size=1;owner=nobody");
    printf("tag_marks ok\n");
    free(a);
    free(b);
    return 0;
}
