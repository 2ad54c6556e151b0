/* listen.c: the viewer's listening sockets (listen.h): one port on both loopback addresses,
 * 127.0.0.1 and ::1. A browser given http://localhost:PORT may try [::1]:PORT first (Chromium
 * does): were ::1 left free, another local user could listen there and receive the page's
 * requests, token included. So the server holds both, or does not start. Called once by
 * server.c. */
#include "listen.h"

#include "common/ms_error.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BACKLOG 128
#define PICK_TRIES 32 /* port 0: fresh ports tried while ::1 of the picked one is taken */

/* A listening socket of family fam on the loopback address at port; the socket, or -errno. */
static int listen_on(int fam, uint16_t port)
{
    /* non-blocking: an accept after the client left must not wait (the one thread serves all) */
    int fd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    /* as libmicrohttpd does for its own sockets: a port in TIME_WAIT can be bound again (not
     * SO_REUSEPORT, which would let a socket of the same user share the port) */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc;
    if (fam == AF_INET) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        rc = bind(fd, (struct sockaddr *)&a, sizeof a);
    } else {
        /* ::1 only, never an IPv4-mapped address */
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
        a.sin6_addr = in6addr_loopback;
        rc = bind(fd, (struct sockaddr *)&a, sizeof a);
    }
    if (rc == 0)
        rc = listen(fd, BACKLOG);
    if (rc < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    return fd;
}

static unsigned bound_port(int fd)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    if (getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        return 0;
    return ntohs(a.sin_port);
}

int ms_view_listen(struct ms_view_listen *l, int port, char *err, size_t errlen)
{
    l->fd4 = l->fd6 = -1;
    l->port = 0;
    for (int tries = 0; tries < PICK_TRIES; tries++) {
        int fd4 = listen_on(AF_INET, (uint16_t)port);
        if (fd4 < 0) {
            return ms_errf(err, errlen, fd4, "cannot listen on 127.0.0.1:%d: %s", port,
                           strerror(-fd4));
        }
        unsigned got = bound_port(fd4);
        int fd6 = listen_on(AF_INET6, (uint16_t)got);
        if (fd6 >= 0 || fd6 == -EAFNOSUPPORT || fd6 == -EADDRNOTAVAIL) {
            /* no IPv6 or no ::1 on this machine: nobody else can listen there either */
            l->fd4 = fd4;
            l->fd6 = fd6 >= 0 ? fd6 : -1;
            l->port = got;
            return 0;
        }
        close(fd4);
        if (fd6 == -EADDRINUSE && port == 0)
            continue; /* the kernel's pick: another port */
        if (fd6 == -EADDRINUSE) {
            return ms_errf(
                err, errlen, MS_EIO,
                "[::1]:%u is taken by another program: a browser given localhost:%u could "
                "reach it instead of memscope (pick another --port, or free it)",
                got, got);
        }
        return ms_errf(err, errlen, fd6, "cannot listen on [::1]:%u: %s", got, strerror(-fd6));
    }
    return ms_errf(err, errlen, MS_EIO, "no port free on both 127.0.0.1 and ::1 after %d tries",
                   PICK_TRIES);
}

void ms_view_listen_release(struct ms_view_listen *l)
{
    if (l->fd4 >= 0)
        close(l->fd4);
    if (l->fd6 >= 0)
        close(l->fd6);
    l->fd4 = l->fd6 = -1;
}
