/* assets.h: the viewer's front end (web/dist: the page, its script bundle and style), embedded
 * into the binary at build time by cmake/embed.cmake, so that building memscope needs no node
 * and serving it reads no file. */
#ifndef MS_VIEW_ASSETS_H
#define MS_VIEW_ASSETS_H

#include <stddef.h>

struct ms_asset {
    const char *path; /* "/index.html", "/app.js", ... */
    const char *type; /* Content-Type */
    const unsigned char *data;
    size_t len;
};

extern const struct ms_asset ms_view_assets[]; /* terminated by {NULL} */

/* The asset at path, or NULL. */
const struct ms_asset *ms_asset_find(const char *path);

#endif
