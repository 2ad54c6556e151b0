/* metrics_http.h: the live monitor's HTTP server (docs/monitor.md): one listening socket, one
 * request per connection, `GET /metrics` answered with a body the caller renders, 404 for every
 * other path, 405 for every other method. Served from the memscope process, never from inside
 * the traced program. */
#ifndef MS_CLI_METRICS_HTTP_H
#define MS_CLI_METRICS_HTTP_H

#include <stddef.h>

#define MHTTP_MAX_REQUEST 8192 /* bytes of request head read; more is a 431 */
#define MHTTP_DEADLINE_MS 2000 /* a connection gets this long to send its request and read */

/* Parses addr ("HOST:PORT", "[IPV6]:PORT", ":PORT" or "PORT" for 127.0.0.1; HOST a numeric
 * address or a name that resolves; PORT 0 lets the kernel choose) and listens there. Returns
 * the listening socket (non-blocking, close-on-exec), or -1 with a one-line reason in err ("port
 * 9400 of 127.0.0.1 is in use", "malformed address ..."). bound gets "HOST:PORT" as bound. */
int mhttp_listen(const char *addr, char *bound, size_t blen, char *err, size_t errlen);

/* Produces the body of /metrics into a buffer the server frees with free(). Returns 0, or a
 * negative code (the server answers 500). */
typedef int (*mhttp_render_fn)(void *ctx, char **body, size_t *len);

/* Accepts one waiting connection on lfd (if any) and answers its request within
 * MHTTP_DEADLINE_MS. Returns 1 when a /metrics body was served, 0 when another answer (or
 * none: a client that went away or was too slow) was given, -1 when no connection waited. */
int mhttp_serve_one(int lfd, mhttp_render_fn render, void *ctx);

/* Splits "HOST:PORT" into host and port (the same syntax as mhttp_listen; an empty host is
 * 127.0.0.1). Returns 0 or -1. */
int mhttp_split(const char *addr, char *host, size_t hlen, char *port, size_t plen);

/* GETs http://addr/metrics into *body (malloc'd, NUL-terminated; at most cap bytes) within
 * timeout_ms. Returns 0, or -1 with a one-line reason in err ("connection refused"). */
int mhttp_get(const char *addr, size_t cap, int timeout_ms, char **body, char *err, size_t errlen);

#endif
