/* json.h: a bounded JSON reader that builds the same values as the unpickler (unpickle.h), so
 * the snapshot model reads the JSON form of a snapshot (what MemoryViz.js also accepts) with
 * the same code. Called by snapshot.c. Workload: the JSON dump of a snapshot, which is tens of
 * times larger than the pickle because JSON has no memo. */
#ifndef MS_SNAPSHOT_JSON_H
#define MS_SNAPSHOT_JSON_H

#include "unpickle.h"

/* Parses len bytes at buf (which must outlive u's values) into u->root, under u's caps
 * (max_depth for nesting, max_items, max_bytes, max_memory, max_stack for pending items).
 * u must be freshly init'ed. Returns 0, or MS_EFORMAT / MS_ETRUNC / MS_ELIMIT / MS_ENOMEM
 * with u->err and u->err_offset set. Strings without escapes point into buf. */
int ms_json_load(struct ms_unpickle *u, const void *buf, size_t len);

#endif
