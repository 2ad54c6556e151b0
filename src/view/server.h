/* server.h: the viewer's HTTP server (`memscope view`): libmicrohttpd on 127.0.0.1, the
 * embedded front end (assets.h) and the JSON queries (api.h), behind a random token. */
#ifndef MS_VIEW_SERVER_H
#define MS_VIEW_SERVER_H

#include "api.h"

#include <signal.h>

struct ms_view_server_opts {
    int port;                                     /* 0: a free port the kernel picks */
    const volatile sig_atomic_t *stop;            /* serve until it becomes nonzero */
    void (*on_ready)(const char *url, void *ctx); /* called once listening, with the URL */
    void *ctx;
};

/* Serves v until *o->stop. Returns 0, or a negative code with a reason in err (the port taken,
 * no libmicrohttpd in this build: MS_ENOTSUP). */
int ms_view_serve(struct ms_view *v, const struct ms_view_server_opts *o, char *err, size_t errlen);

#endif
