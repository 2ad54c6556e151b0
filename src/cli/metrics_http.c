/* metrics_http.c: the live monitor's small HTTP/1.1 server and client (metrics_http.h).
 *
 * Called by the monitor's thread (monitor.c), which polls the listening socket between its
 * ticks, and by `memscope top --targets` (the client). Workload: a scrape every few seconds per
 * Prometheus server; one connection is served at a time, each with a deadline, so a slow or
 * hostile client costs at most MHTTP_DEADLINE_MS of the monitor's time and never blocks it. */
#include "metrics_http.h"

#include "common/ms_error.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int mhttp_split(const char *addr, char *host, size_t hlen, char *port, size_t plen)
{
    const char *colon;
    size_t hl;
    const char *h = addr;
    if (addr[0] == '[') {
        const char *close = strchr(addr, ']');
        if (!close || close[1] != ':')
            return -1;
        h = addr + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon) { /* a port alone */
            colon = addr - 1;
            hl = 0;
        } else {
            hl = (size_t)(colon - addr);
            if (memchr(addr, ':', hl))
                return -1; /* an IPv6 address without brackets */
        }
    }
    const char *p = colon + 1;
    if (!*p || strlen(p) > 5 || strspn(p, "0123456789") != strlen(p) || atol(p) > 65535)
        return -1;
    if (hl + 1 > hlen || strlen(p) + 1 > plen)
        return -1;
    if (hl == 0)
        snprintf(host, hlen, "127.0.0.1");
    else {
        memcpy(host, h, hl);
        host[hl] = 0;
    }
    snprintf(port, plen, "%s", p);
    return 0;
}

int mhttp_listen(const char *addr, char *bound, size_t blen, char *err, size_t errlen)
{
    char host[256], port[8];
    if (mhttp_split(addr, host, sizeof host, port, sizeof port) < 0) {
        return ms_errf(
            err, errlen, -1,
            "malformed address '%s' (expected HOST:PORT, [IPV6]:PORT or :PORT, port 0-65535)",
            addr);
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | AI_PASSIVE},
                    *res = NULL;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0) {
        return ms_errf(err, errlen, -1, "cannot resolve '%s' of address '%s': %s", host, addr,
                       gai_strerror(g));
    }
    int fd = -1, e = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            e = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 16) < 0) {
            e = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        if (e == EADDRINUSE)
            snprintf(err, errlen, "port %s of %s is in use (choose another with --metrics=%s:PORT)",
                     port, host, host);
        else if (e == EADDRNOTAVAIL)
            snprintf(err, errlen, "cannot listen on %s: no such address on this machine", addr);
        else
            snprintf(err, errlen, "cannot listen on %s: %s", addr, strerror(e));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char h[NI_MAXHOST], s[NI_MAXSERV];
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
        getnameinfo((struct sockaddr *)&ss, sl, h, sizeof h, s, sizeof s,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0)
        snprintf(bound, blen, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", h, s);
    else
        snprintf(bound, blen, "%s", addr);
    return fd;
}

/* Writes all of buf to fd before the deadline; -1 when it could not. */
static int write_all(int fd, const char *buf, size_t n, long long deadline)
{
    while (n) {
        ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
        if (w > 0) {
            buf += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        long long left = deadline - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return -1;
    }
    return 0;
}

static void answer(int fd, const char *status, const char *type, const char *body, size_t len,
                   long long deadline)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, type, len);
    if (write_all(fd, head, (size_t)n, deadline) == 0 && len)
        write_all(fd, body, len, deadline);
}

int mhttp_serve_one(int lfd, mhttp_render_fn render, void *ctx)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return -1;
    long long deadline = now_ms() + MHTTP_DEADLINE_MS;
    char req[MHTTP_MAX_REQUEST + 1];
    size_t n = 0;
    int served = 0;
    while (!memmem(req, n, "\r\n\r\n", 4) && !memmem(req, n, "\n\n", 2)) {
        if (n == MHTTP_MAX_REQUEST) {
            const char *m = "request head too large\n";
            answer(fd, "431 Request Header Fields Too Large", "text/plain", m, strlen(m), deadline);
            goto out;
        }
        ssize_t r = recv(fd, req + n, MHTTP_MAX_REQUEST - n, 0);
        if (r > 0) {
            n += (size_t)r;
            continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EINTR))
            goto out; /* went away */
        long long left = deadline - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            goto out; /* too slow: dropped */
    }
    req[n] = 0;
    char *sp1 = strchr(req, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp1 || !sp2 || !memchr(req, '\n', n) || sp2 > strchr(req, '\n')) {
        const char *m = "malformed request\n";
        answer(fd, "400 Bad Request", "text/plain", m, strlen(m), deadline);
        goto out;
    }
    size_t mlen = (size_t)(sp1 - req), plen = (size_t)(sp2 - sp1 - 1);
    const char *path = sp1 + 1;
    int is_metrics = (plen == 8 && memcmp(path, "/metrics", 8) == 0) ||
                     (plen > 8 && memcmp(path, "/metrics?", 9) == 0);
    if (!is_metrics) {
        const char *m = "not found: this exporter serves /metrics only\n";
        answer(fd, "404 Not Found", "text/plain", m, strlen(m), deadline);
        goto out;
    }
    if (!(mlen == 3 && memcmp(req, "GET", 3) == 0)) {
        const char *m = "method not allowed: GET /metrics\n";
        answer(fd, "405 Method Not Allowed", "text/plain", m, strlen(m), deadline);
        goto out;
    }
    char *body = NULL;
    size_t blen = 0;
    if (render(ctx, &body, &blen) < 0) {
        const char *m = "cannot render the metrics (out of memory)\n";
        answer(fd, "500 Internal Server Error", "text/plain", m, strlen(m), deadline);
    } else {
        answer(fd, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body, blen, deadline);
        served = 1;
    }
    free(body);
out:
    close(fd);
    return served;
}

int mhttp_get(const char *addr, size_t cap, int timeout_ms, char **body, char *err, size_t errlen)
{
    char host[256], port[8];
    *body = NULL;
    if (mhttp_split(addr, host, sizeof host, port, sizeof port) < 0) {
        return ms_errf(err, errlen, -1, "malformed address '%s'", addr);
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV},
                    *res = NULL;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0) {
        return ms_errf(err, errlen, -1, "cannot resolve '%s': %s", host, gai_strerror(g));
    }
    long long deadline = now_ms() + timeout_ms;
    int fd = -1, e = ECONNREFUSED;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
            e = errno;
            close(fd);
            fd = -1;
            continue;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        long long left = deadline - now_ms();
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
            e = ETIMEDOUT;
            close(fd);
            fd = -1;
        } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
            e = soerr ? soerr : errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        return ms_errf(err, errlen, -1, "%s", strerror(e));
    }
    char req[400];
    int rn = snprintf(req, sizeof req,
                      "GET /metrics HTTP/1.1\r\nHost: %s\r\nAccept: text/plain\r\n"
                      "Connection: close\r\n\r\n",
                      addr);
    if (write_all(fd, req, (size_t)rn, deadline) < 0) {
        snprintf(err, errlen, "cannot send the request");
        close(fd);
        return -1;
    }
    char *buf = malloc(cap + 1);
    size_t n = 0;
    if (!buf) {
        snprintf(err, errlen, "out of memory");
        close(fd);
        return -1;
    }
    for (;;) {
        ssize_t r = n < cap ? recv(fd, buf + n, cap - n, 0) : 0;
        if (r > 0) {
            n += (size_t)r;
            continue;
        }
        if (r == 0)
            break;
        if (errno != EAGAIN && errno != EINTR)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        long long left = deadline - now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
            snprintf(err, errlen, "no answer within %d ms", timeout_ms);
            free(buf);
            close(fd);
            return -1;
        }
    }
    close(fd);
    buf[n] = 0;
    if (n < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || memcmp(buf + 9, "200", 3) != 0) {
        char *nl = strpbrk(buf, "\r\n");
        if (nl)
            *nl = 0;
        snprintf(err, errlen, "answered '%.80s'", n ? buf : "nothing");
        free(buf);
        return -1;
    }
    char *b = strstr(buf, "\r\n\r\n");
    b = b ? b + 4 : buf + n;
    memmove(buf, b, strlen(b) + 1);
    *body = buf;
    return 0;
}
