/* server.c: `memscope view`'s HTTP server. libmicrohttpd answers on 127.0.0.1 and ::1 (the
 * same port on both: listen.c), driven from this one thread (requests are short: the model
 * answers from memory), so the model and its caches need no lock. Every request must carry the
 * token printed in the URL as its `token` parameter (the page asks with it, and the page's own
 * references to its script and style carry it: no cookie, which every port of 127.0.0.1 would
 * receive), exactly one Host header naming 127.0.0.1, localhost or [::1] with our port (a page
 * of another site that rebinds a DNS name to 127.0.0.1 sends its own name), and a path without
 * %00 or control characters. Only the embedded assets and the JSON queries are served: no
 * request path reaches the file system.
 *
 * Connection slots: a connection waiting for a request (just accepted, or idle after a
 * response) must send the request's whole header within REQUEST_DEADLINE_S, and an answer must
 * be taken within ANSWER_DEADLINE_S, whatever the client's pace (libmicrohttpd's own timeout
 * only counts inactivity: a header line every few seconds would hold a slot for ever); and at
 * most MAX_WAITING connections wait at once, the oldest shut when another comes. A slow client
 * holds a few slots for a few seconds; the page's own requests, which arrive whole at once,
 * always find one. */
#include "server.h"

#include "assets.h"
#include "common/ms_error.h"
#include "listen.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TOKEN_BYTES 16
#define REQUEST_DEADLINE_S 10 /* from accept (or the last answer) to the request's whole header */
#define ANSWER_DEADLINE_S 60  /* from the request to its answer taken whole */
#define INACTIVITY_S 30       /* libmicrohttpd's own limit: no byte either way */
#define MAX_WAITING 32        /* connections waiting for a request at once */
#define MAX_CONNECTIONS 256   /* libmicrohttpd's limit, per address: waiting + answering */
#define NS 1000000000LL

/* One connection, from libmicrohttpd's notice that it started to the one that it closed. */
struct slot {
    struct slot *prev, *next; /* srv's list, oldest first */
    int fd;
    int busy;      /* a request is being answered */
    int closing;   /* shut by the sweep: no longer counted */
    int64_t since; /* when it began waiting (busy: when its request came), CLOCK_MONOTONIC ns */
};

struct srv {
    struct ms_view *v;
    char token[2 * TOKEN_BYTES + 1];
    unsigned port;
    char *index; /* the page, its script and style references carrying the token */
    size_t index_len;
    struct slot *first, *last;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

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

/* The embedded page with "uplot.css" and "app.js" as "uplot.css?token=T" and "app.js?token=T"
 * (its only references: report.c replaces the same two tags): the browser fetches them with
 * the token, as the page's queries carry it. 0 or MS_ENOMEM / MS_EFORMAT. */
static int make_index(struct srv *s)
{
    const struct ms_asset *page = ms_asset_find("/index.html");
    static const char *const refs[] = {"href=\"uplot.css", "src=\"app.js"};
    const char *html = (const char *)page->data;
    size_t cap = page->len + 2 * (sizeof s->token + 8) + 1, n = 0;
    if (!(s->index = malloc(cap)))
        return MS_ENOMEM;
    const char *at = html;
    for (size_t i = 0; i < 2; i++) {
        const char *r = strstr(at, refs[i]);
        if (!r)
            return MS_EFORMAT;
        r += strlen(refs[i]);
        memcpy(s->index + n, at, (size_t)(r - at));
        n += (size_t)(r - at);
        n += (size_t)sprintf(s->index + n, "?token=%s", s->token);
        at = r;
    }
    size_t rest = page->len - (size_t)(at - html);
    memcpy(s->index + n, at, rest);
    s->index_len = n + rest;
    return 0;
}

/* ---- Connection slots ------------------------------------------------------------------- */

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct srv *s = cls;
    struct slot *sl = *socket_context;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci || !(sl = calloc(1, sizeof *sl)))
            return; /* untracked: only libmicrohttpd's own timeout applies */
        sl->fd = ci->connect_fd;
        sl->since = now_ns();
        sl->prev = s->last;
        if (s->last)
            s->last->next = sl;
        else
            s->first = sl;
        s->last = sl;
        *socket_context = sl;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && sl) {
        if (sl->prev)
            sl->prev->next = sl->next;
        else
            s->first = sl->next;
        if (sl->next)
            sl->next->prev = sl->prev;
        else
            s->last = sl->prev;
        free(sl);
        *socket_context = NULL;
    }
}

static struct slot *slot_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* An answer was sent (or given up): the connection waits for its next request from now. */
static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode why)
{
    (void)cls, (void)req_cls, (void)why;
    struct slot *sl = slot_of(c);
    if (sl) {
        sl->busy = 0;
        sl->since = now_ns();
    }
}

/* Shuts a connection: libmicrohttpd sees its end on its next run and closes it. */
static void shut(struct slot *sl)
{
    shutdown(sl->fd, SHUT_RDWR);
    sl->closing = 1;
}

/* Shuts the connections past their deadline, then the waiting ones over MAX_WAITING, those
 * accepted first (a slow client's are soon the oldest; the page's new ones the newest). */
static void sweep(struct srv *s)
{
    int64_t now = now_ns();
    size_t waiting = 0;
    for (struct slot *sl = s->last; sl; sl = sl->prev) { /* the last accepted first */
        if (sl->closing)
            continue;
        int64_t limit = (sl->busy ? ANSWER_DEADLINE_S : REQUEST_DEADLINE_S) * NS;
        if (now - sl->since > limit || (!sl->busy && ++waiting > MAX_WAITING))
            shut(sl);
    }
}

/* ---- Requests --------------------------------------------------------------------------- */

/* 1 when the Host header names this server: 127.0.0.1, localhost or [::1], with our port. */
static int host_ok(const struct srv *s, const char *host)
{
    if (!host)
        return 0;
    static const char *const names[] = {"127.0.0.1", "localhost", "[::1]"};
    char want[64];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(want, sizeof want, "%s:%u", names[i], s->port);
        if (!strcmp(host, want))
            return 1;
    }
    return 0;
}

static enum MHD_Result count_host(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    (void)kind, (void)value;
    if (!strcasecmp(key, "Host"))
        ++*(int *)cls;
    return MHD_YES;
}

/* Decodes %XX escapes in place (libmicrohttpd's unescaping, for the path and each parameter),
 * except in a string where one would decode to a NUL byte, which C strings would cut there
 * ("/app.js%00.x" read as "/app.js"): that one is left as it is, and its '%' refused. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *str)
{
    (void)cls, (void)c;
    if (strstr(str, "%00"))
        return strlen(str);
    return MHD_http_unescape(str);
}

/* 1 when a decoded path holds nothing but printable ASCII and no '%' (left escaped: a NUL). */
static int path_ok(const char *url)
{
    for (const unsigned char *p = (const unsigned char *)url; *p; p++)
        if (*p <= 0x20 || *p >= 0x7f || *p == '%' || *p == '\\')
            return 0;
    return 1;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             void *body, size_t len, enum MHD_ResponseMemoryMode mode)
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
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' "
                            "data:; frame-ancestors 'none'");
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result text_reply(struct MHD_Connection *c, unsigned status, const char *msg)
{
    return reply(c, status, "text/plain; charset=utf-8", (void *)msg, strlen(msg),
                 MHD_RESPMEM_PERSISTENT);
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
    struct slot *sl = slot_of(c);
    if (sl && !sl->busy) { /* the request's header is in: its answer's deadline starts */
        sl->busy = 1;
        sl->since = now_ns();
    }
    if (*upload_size)
        return text_reply(c, 413, "request bodies are not accepted\n");
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return text_reply(c, 405, "only GET\n");
    int hosts = 0;
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_host, &hosts);
    if (hosts != 1)
        return text_reply(c, 400, "one Host header expected\n");
    if (!host_ok(s, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host")))
        return text_reply(c, 403, "foreign Host header: open the URL memscope printed\n");
    if (!path_ok(url))
        return text_reply(c, 400, "malformed path\n");
    const char *qt = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token");
    if (!qt)
        return text_reply(c, 401, "no token: open the URL memscope printed\n");
    if (!same_secret(qt, s->token))
        return text_reply(c, 403, "wrong token: open the URL memscope printed\n");
    if (!strncmp(url, "/api/", 5)) {
        char *body;
        size_t len;
        int status = ms_view_api(s->v, url, get_param, c, &body, &len);
        if (!body)
            return text_reply(c, 500, "out of memory\n");
        return reply(c, (unsigned)status, "application/json", body, len, MHD_RESPMEM_MUST_FREE);
    }
    if (!strcmp(url, "/") || !strcmp(url, "/index.html"))
        return reply(c, 200, "text/html; charset=utf-8", s->index, s->index_len,
                     MHD_RESPMEM_PERSISTENT);
    const struct ms_asset *a = ms_asset_find(url);
    if (!a)
        return text_reply(c, 404, "not found\n");
    return reply(c, 200, a->type, (void *)a->data, a->len, MHD_RESPMEM_PERSISTENT);
}

/* ---- The daemons ------------------------------------------------------------------------ */

/* A daemon serving the listening socket fd, run by serve_loop's calls; NULL on failure. */
static struct MHD_Daemon *start(struct srv *s, int fd)
{
    return MHD_start_daemon(MHD_USE_EPOLL, 0, NULL, NULL, handle, s, MHD_OPTION_LISTEN_SOCKET, fd,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)INACTIVITY_S,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_UNESCAPE_CALLBACK, unescape, s, MHD_OPTION_END);
}

/* Runs the daemons from this thread until *stop: waits on their epoll descriptors (at most
 * 100 ms, so that the sweep and the stop flag are looked at), runs them, sweeps. */
static void serve_loop(struct srv *s, struct MHD_Daemon **d, int nd,
                       const volatile sig_atomic_t *stop)
{
    struct pollfd p[2];
    for (int i = 0; i < nd; i++) {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(d[i], MHD_DAEMON_INFO_EPOLL_FD);
        p[i] = (struct pollfd){.fd = info ? info->epoll_fd : -1, .events = POLLIN};
    }
    while (!*stop) {
        int wait_ms = 100;
        for (int i = 0; i < nd; i++) {
            MHD_UNSIGNED_LONG_LONG t;
            if (MHD_get_timeout(d[i], &t) == MHD_YES && t < (MHD_UNSIGNED_LONG_LONG)wait_ms)
                wait_ms = (int)t;
        }
        poll(p, (nfds_t)nd, wait_ms); /* EINTR (Ctrl-C): the flag is looked at below */
        for (int i = 0; i < nd; i++)
            MHD_run(d[i]);
        sweep(s);
    }
}

int ms_view_serve(struct ms_view *v, const struct ms_view_server_opts *o, char *err, size_t errlen)
{
    struct srv s = {.v = v};
    int rc = make_token(s.token);
    if (rc < 0) {
        return ms_errf(err, errlen, rc, "no random token: %s", ms_strerror(rc));
    }
    if (o->port < 0 || o->port > 65535) {
        return ms_errf(err, errlen, MS_EINVAL, "port %d: expected 0 to 65535", o->port);
    }
    if ((rc = make_index(&s)) < 0) {
        free(s.index);
        return ms_errf(err, errlen, rc, "the embedded page: %s", ms_strerror(rc));
    }
    struct ms_view_listen l;
    if ((rc = ms_view_listen(&l, o->port, err, errlen)) < 0) {
        free(s.index);
        return rc;
    }
    s.port = l.port;
    struct MHD_Daemon *d[2];
    int nd = 0, fds[2] = {l.fd4, l.fd6};
    for (int i = 0; i < 2 && fds[i] >= 0; i++) {
        if (!(d[nd] = start(&s, fds[i])))
            break;
        nd++;
        *(i ? &l.fd6 : &l.fd4) = -1; /* the daemon closes it when it stops */
    }
    if (l.fd4 >= 0 || l.fd6 >= 0) {
        for (int i = 0; i < nd; i++)
            MHD_stop_daemon(d[i]);
        ms_view_listen_release(&l);
        free(s.index);
        return ms_errf(err, errlen, MS_EIO, "cannot start the HTTP server on port %u", s.port);
    }
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/?token=%s", s.port, s.token);
    if (o->on_ready)
        o->on_ready(url, o->ctx);
    serve_loop(&s, d, nd, o->stop);
    for (int i = 0; i < nd; i++)
        MHD_stop_daemon(d[i]);
    free(s.index);
    return 0;
}
