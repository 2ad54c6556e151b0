/* listen.h: the viewer's listening sockets: one port on 127.0.0.1 and on ::1 (listen.c). */
#ifndef MS_VIEW_LISTEN_H
#define MS_VIEW_LISTEN_H

#include <stddef.h>

struct ms_view_listen {
    int fd4, fd6;  /* listening sockets; fd6 -1 where the machine has no ::1 */
    unsigned port; /* the port both listen on */
};

/* Listens on 127.0.0.1:port and [::1]:port (port 0: one the kernel picks, free on both).
 * Returns 0, or a negative code with a reason in err: the port taken on either address (on
 * ::1 by another program, which a browser could reach for localhost). The caller closes the
 * sockets with ms_view_listen_release, or hands them over. */
int ms_view_listen(struct ms_view_listen *l, int port, char *err, size_t errlen);
void ms_view_listen_release(struct ms_view_listen *l);

#endif
