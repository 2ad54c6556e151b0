/* server.c: `memscope view`'s HTTP server. libmicrohttpd answers on 127.0.0.1 only, on one
 * internal thread (requests are short: the model answers from memory), so the model and its
 * caches need no lock. Every request must carry the token printed in the URL (the page's first
 * load turns it into a same-site cookie) and a Host header naming 127.0.0.1 or localhost with
 * our port (a page of another site that rebinds a DNS name to 127.0.0.1 sends its own name).
 * Only the embedded assets and the JSON queries are served: no request path reaches the file
 * system. */
#include "server.h"

#include "assets.h"
#include "common/ms_error.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TOKEN_BYTES 16

struct srv {
    struct ms_view *v;
    char token[2 * TOKEN_BYTES + 1];
    unsigned port;
};

/* Equal strings, in time that does not depend on where they differ. */
static int same_secret(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = la != lb;
    for (size_t i = 0; i < la && i < lb; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return !d;
}

static int make_token(char *out)
{
    unsigned char r[TOKEN_BYTES];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t got = read(fd, r, sizeof r);
    close(fd);
    if (got != (ssize_t)sizeof r)
        return MS_EIO;
    for (int i = 0; i < TOKEN_BYTES; i++)
        sprintf(out + 2 * i, "%02x", r[i]);
    return 0;
}

/* 1 when the Host header names this server: 127.0.0.1 or localhost, with our port. */
static int host_ok(const struct srv *s, const char *host)
{
    if (!host)
        return 0;
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%u", s->port);
    if (!strcmp(host, want))
        return 1;
    snprintf(want, sizeof want, "localhost:%u", s->port);
    return !strcmp(host, want);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             void *body, size_t len, enum MHD_ResponseMemoryMode mode,
                             const char *cookie)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' "
                            "data:; frame-ancestors 'none'");
    if (cookie)
        MHD_add_response_header(r, "Set-Cookie", cookie);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result text_reply(struct MHD_Connection *c, unsigned status, const char *msg)
{
    return reply(c, status, "text/plain; charset=utf-8", (void *)msg, strlen(msg),
                 MHD_RESPMEM_PERSISTENT, NULL);
}

static const char *get_param(void *ctx, const char *name)
{
    return MHD_lookup_connection_value(ctx, MHD_GET_ARGUMENT_KIND, name);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **req_cls)
{
    (void)version, (void)upload, (void)req_cls;
    struct srv *s = cls;
    if (*upload_size)
        return text_reply(c, 413, "request bodies are not accepted\n");
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return text_reply(c, 405, "only GET\n");
    if (!host_ok(s, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host")))
        return text_reply(c, 403, "foreign Host header: open the URL memscope printed\n");
    const char *qt = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token");
    const char *ct = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, "memscope_token");
    if (!qt && !ct)
        return text_reply(c, 401, "no token: open the URL memscope printed\n");
    if (!(qt && same_secret(qt, s->token)) && !(ct && same_secret(ct, s->token)))
        return text_reply(c, 403, "wrong token: open the URL memscope printed\n");
    if (!strncmp(url, "/api/", 5)) {
        char *body;
        size_t len;
        int status = ms_view_api(s->v, url, get_param, c, &body, &len);
        if (!body)
            return text_reply(c, 500, "out of memory\n");
        return reply(c, (unsigned)status, "application/json", body, len, MHD_RESPMEM_MUST_FREE,
                     NULL);
    }
    const struct ms_asset *a = ms_asset_find(!strcmp(url, "/") ? "/index.html" : url);
    if (!a)
        return text_reply(c, 404, "not found\n");
    char cookie[128];
    snprintf(cookie, sizeof cookie, "memscope_token=%s; Path=/; HttpOnly; SameSite=Strict",
             s->token);
    return reply(c, 200, a->type, (void *)a->data, a->len, MHD_RESPMEM_PERSISTENT,
                 qt ? cookie : NULL);
}

int ms_view_serve(struct ms_view *v, const struct ms_view_server_opts *o, char *err, size_t errlen)
{
    struct srv s = {.v = v};
    int rc = make_token(s.token);
    if (rc < 0) {
        snprintf(err, errlen, "no random token: %s", ms_strerror(rc));
        return rc;
    }
    if (o->port < 0 || o->port > 65535) {
        snprintf(err, errlen, "port %d: expected 0 to 65535", o->port);
        return MS_EINVAL;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, (uint16_t)o->port, NULL, NULL, handle, &s,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT, 64u,
        MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
    if (!d) {
        snprintf(err, errlen, "cannot listen on 127.0.0.1:%d (port in use?)", o->port);
        return MS_EIO;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    s.port = info ? info->port : (unsigned)o->port;
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/?token=%s", s.port, s.token);
    if (o->on_ready)
        o->on_ready(url, o->ctx);
    while (!*o->stop) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(d);
    return 0;
}
