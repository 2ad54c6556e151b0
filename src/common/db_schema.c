/* db_schema.c: the DDL of the memscope database, exactly as docs/database.md states it. A
 * change here is a change to that contract: update the page and meta.format_version with it. */
#include "db_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char ms_schema_sql[] =
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;\n"
    "CREATE TABLE processes (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  pid INTEGER NOT NULL, ppid INTEGER, image_seq INTEGER,\n"
    "  exe TEXT, cmdline TEXT,\n"
    "  start_ns INTEGER, end_ns INTEGER,\n"
    "  trace_file TEXT,\n"
    "  lost_events INTEGER DEFAULT 0,\n"
    "  stopped_errno INTEGER DEFAULT 0,\n"
    "  damage TEXT\n"
    ");\n"
    "CREATE TABLE untraced (\n"
    "  id INTEGER PRIMARY KEY, process_id INTEGER NOT NULL, pid INTEGER NOT NULL,\n"
    "  ts_ns INTEGER NOT NULL, path TEXT NOT NULL, reason TEXT NOT NULL\n"
    ");\n"
    "CREATE TABLE threads (\n"
    "  id INTEGER PRIMARY KEY, process_id INTEGER NOT NULL, tid INTEGER NOT NULL,\n"
    "  first_ns INTEGER, last_ns INTEGER, events INTEGER\n"
    ");\n"
    "CREATE TABLE strings (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);\n"
    "CREATE TABLE modules (\n"
    "  id INTEGER PRIMARY KEY, process_id INTEGER NOT NULL, path TEXT NOT NULL,\n"
    "  bias INTEGER, lo INTEGER, hi INTEGER\n"
    ");\n"
    "CREATE TABLE frames (\n"
    "  id INTEGER PRIMARY KEY, module_id INTEGER, pc INTEGER NOT NULL,\n"
    "  inline_depth INTEGER NOT NULL,\n"
    "  function_id INTEGER, file_id INTEGER, line INTEGER,\n"
    "  linkage_id INTEGER\n"
    ");\n"
    "CREATE TABLE stacks (\n"
    "  id INTEGER PRIMARY KEY, process_id INTEGER NOT NULL, depth INTEGER NOT NULL,\n"
    "  c_text TEXT, py_text TEXT, node_id INTEGER, py_node_id INTEGER\n"
    ");\n"
    "CREATE TABLE stack_nodes (\n"
    "  id INTEGER PRIMARY KEY, parent INTEGER, frame_id INTEGER NOT NULL\n"
    ");\n"
    "CREATE VIEW stack_frames (stack_id, position, frame_id) AS\n"
    "  WITH RECURSIVE w(stack_id, position, node) AS (\n"
    "    SELECT id, 0, node_id FROM stacks WHERE node_id IS NOT NULL\n"
    "    UNION ALL SELECT w.stack_id, w.position + 1, n.parent FROM w\n"
    "      JOIN stack_nodes n ON n.id = w.node WHERE n.parent IS NOT NULL AND w.position < 4095)\n"
    "  SELECT w.stack_id, w.position, n.frame_id FROM w JOIN stack_nodes n ON n.id = w.node;\n"
    "CREATE TABLE event_kinds (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n"
    "CREATE TABLE layers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, event_type TEXT NOT NULL,\n"
    "  device TEXT);\n"
    "CREATE TABLE events (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  ts_ns INTEGER NOT NULL, kind INTEGER NOT NULL, layer INTEGER NOT NULL,\n"
    "  process_id INTEGER NOT NULL, thread_id INTEGER NOT NULL,\n"
    "  addr INTEGER, size INTEGER,\n"
    "  func TEXT,\n"
    "  stack_id INTEGER,\n"
    "  allocation_id INTEGER,\n"
    "  name TEXT,\n"
    "  flags INTEGER,\n"
    "  attr TEXT\n"
    ");\n"
    "CREATE TABLE blocks (\n"
    "  allocation_id INTEGER PRIMARY KEY,\n"
    "  layer INTEGER NOT NULL, process_id INTEGER NOT NULL, thread_id INTEGER NOT NULL,\n"
    "  addr INTEGER NOT NULL, size INTEGER NOT NULL, func TEXT,\n"
    "  alloc_ns INTEGER NOT NULL, free_ns INTEGER,\n"
    "  alloc_event_id INTEGER NOT NULL, free_event_id INTEGER, stack_id INTEGER,\n"
    "  owner_id INTEGER, step INTEGER\n"
    ");\n"
    "CREATE TABLE owners (id INTEGER PRIMARY KEY, label TEXT NOT NULL UNIQUE);\n"
    "CREATE TABLE python_trace (\n"
    "  \"FuncInfo\" TEXT, \"StartTime(ns)\" INTEGER, \"EndTime(ns)\" INTEGER,\n"
    "  \"Thread Id\" INTEGER, \"Process Id\" INTEGER, depth INTEGER\n"
    ");\n"
    "CREATE TABLE inefficient (allocation_id INTEGER NOT NULL, type TEXT NOT NULL,\n"
    "  PRIMARY KEY (allocation_id, type)) WITHOUT ROWID;\n"
    "CREATE TABLE steps (\n"
    "  process_id INTEGER NOT NULL, step INTEGER NOT NULL,\n"
    "  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, end_event_id INTEGER,\n"
    "  PRIMARY KEY (process_id, step)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE ranges (\n"
    "  id INTEGER PRIMARY KEY, process_id INTEGER NOT NULL, thread_id INTEGER NOT NULL,\n"
    "  name TEXT NOT NULL, depth INTEGER NOT NULL, parent_id INTEGER,\n"
    "  start_ns INTEGER NOT NULL, end_ns INTEGER,\n"
    "  start_event_id INTEGER NOT NULL, end_event_id INTEGER\n"
    ");\n"
    "CREATE TABLE pools (\n"
    "  id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,\n"
    "  layer INTEGER NOT NULL, reserve_layer INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE process_stats (\n"
    "  process_id INTEGER NOT NULL, layer INTEGER NOT NULL,\n"
    "  allocs INTEGER, frees INTEGER, alloc_bytes INTEGER,\n"
    "  peak_bytes INTEGER, peak_ns INTEGER,\n"
    "  live_bytes INTEGER, live_blocks INTEGER,\n"
    "  unmatched_frees INTEGER,\n"
    "  peak_event_id INTEGER, peak_allocation_id INTEGER,\n"
    "  PRIMARY KEY (process_id, layer)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE host_peaks (process_id INTEGER PRIMARY KEY, peak_bytes INTEGER NOT NULL,\n"
    "  peak_ns INTEGER, peak_event_id INTEGER, peak_allocation_id INTEGER);\n"
    "CREATE TABLE site_stats (\n"
    "  process_id INTEGER NOT NULL, layer INTEGER NOT NULL, stack_id INTEGER,\n"
    "  owner_id INTEGER, step INTEGER NOT NULL,\n"
    "  allocs INTEGER NOT NULL, alloc_bytes INTEGER NOT NULL,\n"
    "  temporary INTEGER NOT NULL, temporary_bytes INTEGER NOT NULL,\n"
    "  live_blocks INTEGER NOT NULL, live_bytes INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE live_samples (k INTEGER PRIMARY KEY, live_bytes INTEGER NOT NULL);\n"
    "CREATE TABLE step_live (\n"
    "  event_id INTEGER PRIMARY KEY, process_id INTEGER NOT NULL, step INTEGER NOT NULL,\n"
    "  live_bytes INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE decompose_points (\n"
    "  point INTEGER PRIMARY KEY, kind INTEGER NOT NULL, process_id INTEGER, step INTEGER,\n"
    "  ts_ns INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE decompose_live (\n"
    "  point INTEGER NOT NULL, owner_id INTEGER NOT NULL, live_bytes INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE owner_peaks (owner_id INTEGER PRIMARY KEY, peak_bytes INTEGER NOT NULL);\n"
    "CREATE TABLE usage_samples (\n"
    "  process_id INTEGER NOT NULL, ts_ns INTEGER NOT NULL,\n"
    "  rss_anon INTEGER, rss_file INTEGER, rss_shmem INTEGER, stack INTEGER, swap INTEGER,\n"
    "  pss INTEGER, uss INTEGER, threads INTEGER, cgroup_current INTEGER, cgroup_max INTEGER,\n"
    "  live_bytes INTEGER NOT NULL, exited INTEGER NOT NULL, private_anon INTEGER\n"
    ");\n"
    "CREATE TABLE usage_cow (       -- copy-on-write: a forked image's walk with the most private pages\n"
    "  process_id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL, fork_ns INTEGER NOT NULL,\n"
    "  ts_ns INTEGER NOT NULL, private_bytes INTEGER NOT NULL, cow_bytes INTEGER NOT NULL,\n"
    "  blocks INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE usage_devices (   -- what NVML reported at the agent's steps and exit\n"
    "  process_id INTEGER NOT NULL, ts_ns INTEGER NOT NULL, device INTEGER NOT NULL,\n"
    "  process_used INTEGER NOT NULL, device_used INTEGER NOT NULL,\n"
    "  device_total INTEGER NOT NULL, hooked_bytes INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE usage_cow_stacks ( -- its cow_bytes by the parent's blocks' stack and owner\n"
    "  process_id INTEGER NOT NULL, stack_id INTEGER, owner_id INTEGER,\n"
    "  blocks INTEGER NOT NULL, bytes INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE trace_files (\n"
    "  id INTEGER PRIMARY KEY, name TEXT NOT NULL, part INTEGER NOT NULL, data BLOB NOT NULL\n"
    ");\n"
    "INSERT INTO event_kinds VALUES (1, 'MALLOC'), (2, 'FREE'), (4, 'STEP'), (5, 'MARK'),\n"
    "  (6, 'RANGE_START'), (7, 'RANGE_END'), (8, 'ACCESS'), (9, 'OOM'), (10, 'KERNEL_LAUNCH'),\n"
    "  (11, 'OOM_RECENT_ALLOC'), (12, 'OOM_TOP_ALLOC'),\n"
    "  (13, 'DEVICE_USAGE');\n"
    "INSERT INTO layers VALUES (0, 'annotation', 'N/A', NULL), (1, 'heap', 'HOST', 'cpu'),\n"
    "  (2, 'mmap', 'MMAP', 'cpu');\n";

/* Only the indexes that queries cannot do without: events.id and blocks.allocation_id are
 * already in time order (binary-search them by id), and the analyses scan whole tables. */
const char ms_schema_index_sql[] =
    "CREATE INDEX events_annotation ON events(kind, ts_ns) WHERE kind >= 4;\n"
    "CREATE INDEX events_access ON events(allocation_id) WHERE kind = 8;\n"
    "CREATE INDEX ranges_process ON ranges(process_id, start_ns);\n"
    "CREATE INDEX frames_pc ON frames(pc);\n";

/* msMemScope's table (its DUMP_RECORD_TABLE_SQL, with "ID" the row id): a real table, since
 * MindStudio Insight and msMemScope's analyzers look it up with type = 'table'. */
const char ms_dump_ddl[] =
    "CREATE TABLE memscope_dump (\"ID\" INTEGER PRIMARY KEY, \"Event\" TEXT, \"Event Type\" TEXT,\n"
    "  \"Name\" TEXT, \"Timestamp(ns)\" INTEGER, \"Process Id\" INTEGER, \"Thread Id\" INTEGER,\n"
    "  \"Device Id\" TEXT, \"Ptr\" TEXT, \"Attr\" TEXT, \"Call Stack(Python)\" TEXT,\n"
    "  \"Call Stack(C)\" TEXT);\n";

/* memscope_dump's Attr of a MALLOC, FREE or ACCESS row: JSON, every value a string, the members
 * whose value is NULL left out (allocation_id of a free of an unknown address, as in the CSV
 * export), then events.attr's members (json_patch). Written out by concatenation: json_object()
 * and json_patch() for every row cost 5 s per 4M rows, this 1 s. Numbers need no escaping; text
 * goes through json_quote(). */
/* clang-format off: the SQL reads best as written, one clause a line. */
#define MS_SQL_DUMP_ATTR_OWN                                                                     \
    "('{' || substr(CASE WHEN e.allocation_id IS NULL THEN '' ELSE ',\"allocation_id\":\"' ||"   \
    " e.allocation_id || '\"' END || ',\"addr\":\"' || printf('0x%016x', e.addr) || '\"' ||"     \
    " CASE WHEN e.size IS NULL THEN '' ELSE ',\"size\":\"' || e.size || '\"' END ||"             \
    " CASE WHEN e.kind = " MS_SQL_ACCESS                                                         \
    " THEN ',\"type\":' || json_quote(l.event_type) ELSE '' END ||"                              \
    " CASE WHEN e.kind = " MS_SQL_ACCESS                                                         \
    " OR e.func IS NULL THEN '' ELSE ',\"func\":' || json_quote(e.func)"                         \
    " END || CASE WHEN e.kind = " MS_SQL_MALLOC " AND o.label IS NOT NULL THEN ',\"owner\":' ||" \
    " json_quote(o.label) ELSE '' END || CASE WHEN e.kind != " MS_SQL_MALLOC                     \
    " THEN '' ELSE COALESCE((SELECT"                                                             \
    " ',\"inefficient_type\":' || json_quote(group_concat(i.type, ',')) FROM inefficient i"      \
    " WHERE i.allocation_id = e.allocation_id HAVING count(*)), '') END, 2) || '}')"
#define MS_SQL_DUMP_ATTR                                                                           \
    "CASE WHEN e.attr IS NULL THEN " MS_SQL_DUMP_ATTR_OWN " ELSE json_patch(" MS_SQL_DUMP_ATTR_OWN \
    ", e.attr) END"
#define MS_SQL_DUMP_RANGE "e.kind IN (" MS_SQL_RANGE_START ", " MS_SQL_RANGE_END ")"

/* Its rows, from events (docs/database.md "memscope_dump"); callers add "AND ..." and order. */
const char ms_dump_select[] =
    "SELECT\n"
    "  e.id AS \"ID\",\n"
    "  CASE WHEN " MS_SQL_DUMP_RANGE " AND " MS_SQL_ATEN_RANGE(
        e.name) " THEN 'OP_LAUNCH'\n"
                "    ELSE CASE e.kind WHEN " MS_SQL_STEP " THEN 'SYSTEM' WHEN " MS_SQL_MARK
                " THEN 'MSTX' WHEN " MS_SQL_RANGE_START " THEN 'MSTX'\n"
                "    WHEN " MS_SQL_RANGE_END " THEN 'MSTX'\n"
                "    WHEN " MS_SQL_OOM " THEN 'OOM_DETAIL' WHEN " MS_SQL_OOM_RECENT
                " THEN 'OOM_DETAIL'\n"
                "    WHEN " MS_SQL_OOM_TOP " THEN 'OOM_DETAIL' WHEN " MS_SQL_DEVICE_USAGE
                " THEN 'SYSTEM' ELSE k.name END END AS \"Event\",\n"
                "  CASE e.kind WHEN " MS_SQL_STEP " THEN 'STEP' WHEN " MS_SQL_MARK " THEN 'Mark'\n"
                "    WHEN " MS_SQL_RANGE_START " THEN CASE WHEN " MS_SQL_ATEN_RANGE(
                    e.name) " THEN 'ATEN_START'\n"
                            "      ELSE 'Range_start' END\n"
                            "    WHEN " MS_SQL_RANGE_END " THEN CASE WHEN " MS_SQL_ATEN_RANGE(
                                e.name) " THEN 'ATEN_END'\n"
                                        "      ELSE 'Range_end' END\n"
                                        "    WHEN " MS_SQL_OOM
                                        " THEN 'OOM_TRIGGER' WHEN " MS_SQL_KERNEL_LAUNCH
                                        " THEN 'KERNEL_LAUNCH'\n"
                                        "    WHEN " MS_SQL_OOM_RECENT
                                        " THEN 'OOM_RECENT_ALLOC' WHEN " MS_SQL_OOM_TOP
                                        " THEN 'OOM_TOP_ALLOC'\n"
                                        "    WHEN " MS_SQL_DEVICE_USAGE " THEN 'DEVICE_USAGE'\n"
                                        "    WHEN " MS_SQL_ACCESS
                                        " THEN CASE WHEN e.flags & 2 THEN 'WRITE' WHEN e.flags & 1 THEN 'READ'\n"
                                        "      ELSE 'UNKNOWN' END\n"
                                        "    ELSE l.event_type END AS \"Event Type\",\n"
                                        "  CASE WHEN " MS_SQL_DUMP_RANGE " AND " MS_SQL_ATEN_RANGE(
                                            e.name) "\n"
                                                    "    THEN " MS_SQL_ATEN_NAME(
                                                        e.name) "\n"
                                                                "    ELSE COALESCE(e.name, 'N/A') END AS \"Name\",\n"
                                                                "  e.ts_ns AS \"Timestamp(ns)\", p.pid AS \"Process Id\", t.tid AS \"Thread Id\",\n"
                                                                "  COALESCE(l.device, 'N/A') AS \"Device Id\",\n"
                                                                "  CASE WHEN e.kind IN (" MS_SQL_STEP
                                                                ", " MS_SQL_MARK
                                                                ", " MS_SQL_RANGE_START
                                                                ", " MS_SQL_RANGE_END
                                                                ", " MS_SQL_OOM
                                                                ", " MS_SQL_KERNEL_LAUNCH
                                                                ", " MS_SQL_OOM_RECENT
                                                                ", " MS_SQL_OOM_TOP
                                                                ", " MS_SQL_DEVICE_USAGE
                                                                ") THEN 'N/A'\n"
                                                                "    ELSE printf('0x%016x', e.addr) END AS \"Ptr\",\n"
                                                                "  CASE WHEN e.kind IN (" MS_SQL_STEP
                                                                ", " MS_SQL_MARK
                                                                ", " MS_SQL_RANGE_START
                                                                ", " MS_SQL_RANGE_END
                                                                ") THEN '{}'\n"
                                                                "    WHEN e.kind >= " MS_SQL_OOM
                                                                " THEN COALESCE(e.attr, '{}') ELSE\n"
                                                                "  " MS_SQL_DUMP_ATTR "\n"
                                                                "  END AS \"Attr\",\n"
                                                                "  COALESCE(s.py_text, '') AS \"Call Stack(Python)\",\n"
                                                                "  COALESCE(s.c_text, '') AS \"Call Stack(C)\"\n"
                                                                "FROM events e JOIN event_kinds k ON k.id = e.kind JOIN layers l ON l.id = e.layer\n"
                                                                "  JOIN processes p ON p.id = e.process_id JOIN threads t ON t.id = e.thread_id\n"
                                                                "  LEFT JOIN stacks s ON s.id = e.stack_id\n"
                                                                "  LEFT JOIN blocks b ON e.kind = " MS_SQL_MALLOC
                                                                " AND b.allocation_id = e.allocation_id\n"
                                                                "  LEFT JOIN owners o ON o.id = b.owner_id\n"
                                                                /* A device's address reservations and mappings, and PyTorch's segments (the driver layer
     * has them as HAL rows already), and the host's reserved address space (MMAP_RESERVE, no
     * memory), stay in memscope's own tables: Insight's breakdown refuses MALLOC rows of event
     * types outside its vocabulary (docs/cuda.md). */
                                                                "WHERE NOT (l.device IS NOT NULL\n"
                                                                "    AND l.event_type IN ('VMM_RESERVE', 'VMM_MAP', 'PTA_SEGMENT', 'MMAP_RESERVE'))\n"
                                                                /* memscope's own marks (owner tags, the module log) are not the user's MSTX rows */
                                                                "  AND NOT (e.kind = " MS_SQL_MARK
                                                                " AND " MS_SQL_OWN_MARK(
                                                                    e.name) ")\n";
/* clang-format on */

char *ms_dump_create_sql(void)
{
    const char *head = "INSERT INTO memscope_dump ", *tail = " ORDER BY e.id;\n";
    size_t n = strlen(ms_dump_ddl) + strlen(head) + strlen(ms_dump_select) + strlen(tail) + 1;
    char *sql = malloc(n);
    if (sql)
        snprintf(sql, n, "%s%s%s%s", ms_dump_ddl, head, ms_dump_select, tail);
    return sql;
}
