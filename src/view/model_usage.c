/* model_usage.c: the usage monitor's part of the viewer's model (model.h): each process's RSS,
 * PSS and USS from usage_samples, and each CUDA device's memory used from usage_devices
 * (docs/usage.md), which the memory chart draws beside live bytes (api_usage.c). Called once by
 * ms_view_model_load; a few thousand samples per process, a few rows per step per device. */
#include "model.h"

#include "analyze/analyze.h"
#include "common/grow.h"
#include "common/ms_error.h"

#include <stdlib.h>
#include <string.h>

/* The usage monitor's samples (none in a database without them). 0 or a negative code. */
static int read_usage(struct ms_view_model *m)
{
    if (!ms__has_column(m->db, "usage_samples", "rss_anon"))
        return 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(m->db,
                           "SELECT u.process_id, p.pid, u.ts_ns, "
                           "u.rss_anon + u.rss_file + u.rss_shmem, u.pss, u.uss "
                           "FROM usage_samples u JOIN processes p ON p.id = u.process_id "
                           "WHERE u.rss_anon IS NOT NULL ORDER BY u.process_id, u.ts_ns",
                           -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    size_t cap = 0;
    int rc = 0, step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t proc = sqlite3_column_int64(st, 0);
        if (!m->nusage || m->usage[m->nusage - 1].process_id != proc) {
            if (m->nusage == MS_VIEW_MAX_USAGE)
                break;
            if (ms_grow((void **)&m->usage, &cap, m->nusage, sizeof *m->usage, 4,
                        MS_VIEW_MAX_USAGE) < 0) {
                rc = MS_ENOMEM;
                break;
            }
            m->usage[m->nusage++] =
                (struct ms_vusage){.process_id = proc, .pid = sqlite3_column_int64(st, 1)};
        }
        struct ms_vusage *u = &m->usage[m->nusage - 1];
        if (ms_grow((void **)&u->p, &u->cap, u->n, sizeof *u->p, 64, MS_GROW_MAX) < 0) {
            rc = MS_ENOMEM;
            break;
        }
        struct ms_vusage_point *q = &u->p[u->n++];
        q->ts = sqlite3_column_int64(st, 2);
        q->rss = sqlite3_column_int64(st, 3);
        q->pss = sqlite3_column_type(st, 4) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 4);
        q->uss = sqlite3_column_type(st, 5) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 5);
    }
    if (rc == 0 && step != SQLITE_DONE && step != SQLITE_ROW)
        rc = MS_EDB;
    sqlite3_finalize(st);
    return rc;
}

/* NVML's memory used of each device (none in a database without NVML figures): every row of
 * usage_devices, whichever process read it, in time order per device. 0 or a negative code. */
static int read_devices(struct ms_view_model *m)
{
    if (!ms__has_column(m->db, "usage_devices", "device_used"))
        return 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(m->db,
                           "SELECT device, ts_ns, device_used FROM usage_devices "
                           "ORDER BY device, ts_ns",
                           -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    size_t cap = 0;
    int rc = 0, step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t dev = sqlite3_column_int64(st, 0);
        if (!m->ndevices || m->devices[m->ndevices - 1].device != dev) {
            if (m->ndevices == MS_VIEW_MAX_DEVICES)
                break;
            if (ms_grow((void **)&m->devices, &cap, m->ndevices, sizeof *m->devices, 4,
                        MS_VIEW_MAX_DEVICES) < 0) {
                rc = MS_ENOMEM;
                break;
            }
            m->devices[m->ndevices++] = (struct ms_vdevice){.device = dev};
        }
        struct ms_vdevice *d = &m->devices[m->ndevices - 1];
        if (ms_grow((void **)&d->p, &d->cap, d->n, sizeof *d->p, 64, MS_GROW_MAX) < 0) {
            rc = MS_ENOMEM;
            break;
        }
        d->p[d->n++] =
            (struct ms_vdevice_point){sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2)};
    }
    if (rc == 0 && step != SQLITE_DONE && step != SQLITE_ROW)
        rc = MS_EDB;
    sqlite3_finalize(st);
    return rc;
}

int ms__vmodel_read_usage(struct ms_view_model *m)
{
    int rc = read_usage(m);
    return rc < 0 ? rc : read_devices(m);
}

void ms__vmodel_usage_release(struct ms_view_model *m)
{
    for (size_t i = 0; i < m->nusage; i++)
        free(m->usage[i].p);
    free(m->usage);
    for (size_t i = 0; i < m->ndevices; i++)
        free(m->devices[i].p);
    free(m->devices);
    m->usage = NULL;
    m->devices = NULL;
    m->nusage = m->ndevices = 0;
}
