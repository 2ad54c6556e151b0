/* leaky.c: the bundled example for `make example`: a tiny "service" that handles requests,
 * caches some results on purpose and forgets to free one buffer per request. memscope shows
 * the leak with its call site. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cache_entry {
    char *key;
    char *value;
};

static struct cache_entry cache[16];
static size_t served;

static char *format_reply(int id)
{
    char *buf = malloc(256);
    snprintf(buf, 256, "reply to request %d", id);
    return buf;
}

static void handle_request(int id)
{
    char *scratch = calloc(64, 1024);  /* freed: a temporary */
    char *reply = format_reply(id);    /* never freed: the leak */
    snprintf(scratch, 64 * 1024, "%s", reply);
    served += strlen(scratch);
    if (id % 10 == 0) {                /* kept on purpose: a cache */
        struct cache_entry *e = &cache[(id / 10) % 16];
        free(e->key);
        free(e->value);
        e->key = strdup("k");
        e->value = strdup(reply);
    }
    free(scratch);
}

int main(void)
{
    for (int i = 0; i < 200; i++)
        handle_request(i);
    printf("leaky: handled 200 requests, %zu bytes served\n", served);
    return 0;
}
