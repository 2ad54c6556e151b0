/* test_store.c: the store module: ms_store_convert() on a small synthetic trace directory built
 * with encode.h (two processes, two threads in one of them, a realloc chain, a free of an unknown
 * address, a second allocation at a live address, an mmap with a partial munmap, ties across
 * threads and files), checked row by row, then the CSV export byte for byte; plus bad inputs,
 * damaged traces, real symbolization of this binary, and the live-address hash map. */
#include "tracegen.h"
#include "test.h"

#include "common/u64map.h"
#include "common/ms_error.h"
#include "trace/reader.h"
#include "store/store.h"

#include <dirent.h>
#include <link.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#define R 1700000000000000000ull /* process A's real clock at its agent start */
#define MA 1000000000ull         /* process A's monotonic clock at the same moment */
#define MB 5000000000ull         /* process B's; B started 150 ns after A */

static char dir[64];
static char db[128];

static void write_file(const char *name, struct tg *g)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    CHECK_EQ(tg_write(g, path), 0);
}

/* Process A (pid 100): thread serial 1 (tid 100) and 2 (tid 101). */
static void build_a(struct tg *g)
{
    struct tg_chunk c;
    static const uint64_t s1[] = {0x555555555123, 0x7ffff7001000}, s2[] = {0x1234};
    static const char lib[] = "/nonexistent/lib\"q.so";
    tg_init(g, 100, 1, MA, R);
    tg_chunk_begin(g, &c, 100, 1, 0, MA, 4096);
    c.p = ms_enc_process(c.p, 1, "/usr/bin/app", 12, "app\0--fast\0", 11);
    c.p = ms_enc_module(c.p, 0x555555554000, 0x555555554000, 0x555555560000, "/nonexistent/app",
                        16);
    c.p = ms_enc_module(c.p, 0x7ffff7000000, 0x7ffff7000000, 0x7ffff7010000, lib, strlen(lib));
    c.p = ms_enc_stack(c.p, 1, s1, 2);
    c.p = ms_enc_stack(c.p, 2, s2, 1);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, MA + 100, 0x1000, 16, 1);
    c.p = ms_enc_free(c.p, &c.st, MA + 300, 0x1000); /* realloc: free, then the new block */
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_REALLOC, MA + 300, 0x2000, 32, 2);
    tg_chunk_end(g, &c);

    tg_chunk_begin(g, &c, 101, 2, 0, MA + 150, 4096);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_MMAP_ALLOC + MS_FN_MMAP, MA + 200, 0x7f0000000000,
                       3 * 4096, 2);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_CALLOC, MA + 300, 0x4000, 64, 0);
    c.p = ms_enc_munmap(c.p, &c.st, MA + 400, 0x7f0000001000, 4096); /* middle: no block start */
    c.p = ms_enc_munmap(c.p, &c.st, MA + 800, 0x7f0000000000, 4096); /* head: ends the block */
    c.p = ms_enc_free(c.p, &c.st, MA + 900, 0x4000);
    tg_chunk_end(g, &c);

    tg_zero_pages(g, 4096); /* a chunk reserved by a writer that died */

    tg_chunk_begin(g, &c, 100, 1, 1, MA + 450, 4096);
    c.p = ms_enc_free(c.p, &c.st, MA + 500, 0xdead0);                 /* never allocated */
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, MA + 600, 0x3000, 8, 1);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, MA + 700, 0x3000, 24, 0);
    tg_chunk_end(g, &c);
}

/* Process B (pid 200, child of A): one thread; its stack id 1 is not A's stack 1. */
static void build_b(struct tg *g)
{
    struct tg_chunk c;
    static const uint64_t s1[] = {0x400500};
    tg_init(g, 200, 100, MB, R + 150);
    tg_header(g)->lost_events = 5;
    tg_header(g)->stopped_errno = 28;
    tg_chunk_begin(g, &c, 200, 1, 0, MB, 4096);
    c.p = ms_enc_process(c.p, 100, "/usr/bin/child", 14, "child\0", 6);
    c.p = ms_enc_stack(c.p, 1, s1, 1);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, MB + 100, 0x1000, 100, 1);
    c.p = ms_enc_free(c.p, &c.st, MB + 150, 0x1000);
    c.p = ms_enc_lost(c.p, &c.st, MB + 160, 2);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, MB + 1000, 0x5000, 7, 1);
    tg_chunk_end(g, &c);
}

/* Runs sql; returns its rows as "a|b|c\n" lines (NULL as "NULL"). Caller frees. */
static char *query(const char *path, const char *sql)
{
    sqlite3 *d;
    sqlite3_stmt *st;
    CHECK_EQ(sqlite3_open_v2(path, &d, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    if (sqlite3_prepare_v2(d, sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "query failed: %s: %s\n", sql, sqlite3_errmsg(d));
        exit(1);
    }
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    out[0] = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        for (int i = 0; i < sqlite3_column_count(st); i++) {
            const char *v = (const char *)sqlite3_column_text(st, i);
            len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "|" : "", v ? v : "NULL");
        }
        len += (size_t)snprintf(out + len, cap - len, "\n");
        CHECK(len < cap - 1);
    }
    sqlite3_finalize(st);
    sqlite3_close(d);
    return out;
}

static void check_query(const char *sql, const char *want)
{
    char *got = query(db, sql);
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "query: %s\n", sql);
        CHECK_STREQ(got, want);
    }
    free(got);
}

static int convert(const char *trace_dir, int symbolize, struct ms_store_result *res, char *err)
{
    struct ms_store_options o = {.trace_dir = trace_dir, .db_path = db, .exit_status = -1,
                                 .symbolize = symbolize};
    return ms_store_convert(&o, res, err, 256);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

#define T(n) "17000000000000" #n
static const char want_csv[] =
    "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,"
    "Call Stack(Python),Call Stack(C)\n"
    "1,MALLOC,HOST,N/A," T(00100) ",100,100,cpu,0x0000000000001000,"
    "\"{allocation_id:1,addr:0x0000000000001000,size:16,func:malloc}\",,"
    "\"?? (app+0x1123)\n?? (lib\"\"q.so+0x1000)\"\n"
    "2,MALLOC,MMAP,N/A," T(00200) ",100,101,cpu,0x00007f0000000000,"
    "\"{allocation_id:2,addr:0x00007f0000000000,size:12288,func:mmap}\",,\"?? (0x1234)\"\n"
    "3,MALLOC,HOST,N/A," T(00250) ",200,200,cpu,0x0000000000001000,"
    "\"{allocation_id:3,addr:0x0000000000001000,size:100,func:malloc}\",,\"?? (0x400500)\"\n"
    "4,FREE,HOST,N/A," T(00300) ",100,100,cpu,0x0000000000001000,"
    "\"{allocation_id:1,addr:0x0000000000001000,size:16,func:free}\",,\n"
    "5,MALLOC,HOST,N/A," T(00300) ",100,100,cpu,0x0000000000002000,"
    "\"{allocation_id:4,addr:0x0000000000002000,size:32,func:realloc}\",,\"?? (0x1234)\"\n"
    "6,MALLOC,HOST,N/A," T(00300) ",100,101,cpu,0x0000000000004000,"
    "\"{allocation_id:5,addr:0x0000000000004000,size:64,func:calloc}\",,\n"
    "7,FREE,HOST,N/A," T(00300) ",200,200,cpu,0x0000000000001000,"
    "\"{allocation_id:3,addr:0x0000000000001000,size:100,func:free}\",,\n"
    "8,FREE,MMAP,N/A," T(00400) ",100,101,cpu,0x00007f0000001000,"
    "\"{addr:0x00007f0000001000,size:4096,func:munmap}\",,\n"
    "9,FREE,HOST,N/A," T(00500) ",100,100,cpu,0x00000000000dead0,"
    "\"{addr:0x00000000000dead0,func:free}\",,\n"
    "10,MALLOC,HOST,N/A," T(00600) ",100,100,cpu,0x0000000000003000,"
    "\"{allocation_id:6,addr:0x0000000000003000,size:8,func:malloc}\",,"
    "\"?? (app+0x1123)\n?? (lib\"\"q.so+0x1000)\"\n"
    "11,MALLOC,HOST,N/A," T(00700) ",100,100,cpu,0x0000000000003000,"
    "\"{allocation_id:7,addr:0x0000000000003000,size:24,func:malloc}\",,\n"
    "12,FREE,MMAP,N/A," T(00800) ",100,101,cpu,0x00007f0000000000,"
    "\"{allocation_id:2,addr:0x00007f0000000000,size:12288,func:munmap}\",,\n"
    "13,FREE,HOST,N/A," T(00900) ",100,101,cpu,0x0000000000004000,"
    "\"{allocation_id:5,addr:0x0000000000004000,size:64,func:free}\",,\n"
    "14,MALLOC,HOST,N/A," T(01150) ",200,200,cpu,0x0000000000005000,"
    "\"{allocation_id:8,addr:0x0000000000005000,size:7,func:malloc}\",,\"?? (0x400500)\"\n";

static void check_rows(void)
{
    check_query("SELECT id, ts_ns - " T(00000) ", kind, layer, process_id, thread_id, addr, size,"
                " func, stack_id, allocation_id FROM events ORDER BY id",
                "1|100|1|1|1|1|4096|16|malloc|1|1\n"
                "2|200|1|2|1|2|139637976727552|12288|mmap|2|2\n"
                "3|250|1|1|2|3|4096|100|malloc|3|3\n"
                "4|300|2|1|1|1|4096|16|free|NULL|1\n"
                "5|300|1|1|1|1|8192|32|realloc|2|4\n"
                "6|300|1|1|1|2|16384|64|calloc|NULL|5\n"
                "7|300|2|1|2|3|4096|100|free|NULL|3\n"
                "8|400|2|2|1|2|139637976731648|4096|munmap|NULL|NULL\n"
                "9|500|2|1|1|1|912080|NULL|free|NULL|NULL\n"
                "10|600|1|1|1|1|12288|8|malloc|1|6\n"
                "11|700|1|1|1|1|12288|24|malloc|NULL|7\n"
                "12|800|2|2|1|2|139637976727552|12288|munmap|NULL|2\n"
                "13|900|2|1|1|2|16384|64|free|NULL|5\n"
                "14|1150|1|1|2|3|20480|7|malloc|3|8\n");
    check_query("SELECT allocation_id, layer, process_id, thread_id, addr, size, func,"
                " alloc_ns - " T(00000) ", free_ns - " T(00000) ", alloc_event_id, free_event_id,"
                " stack_id FROM blocks ORDER BY allocation_id",
                "1|1|1|1|4096|16|malloc|100|300|1|4|1\n"
                "2|2|1|2|139637976727552|12288|mmap|200|800|2|12|2\n"
                "3|1|2|3|4096|100|malloc|250|300|3|7|3\n"
                "4|1|1|1|8192|32|realloc|300|NULL|5|NULL|2\n"
                "5|1|1|2|16384|64|calloc|300|900|6|13|NULL\n"
                "6|1|1|1|12288|8|malloc|600|700|10|NULL|1\n"
                "7|1|1|1|12288|24|malloc|700|NULL|11|NULL|NULL\n"
                "8|1|2|3|20480|7|malloc|1150|NULL|14|NULL|3\n");
    check_query("SELECT process_id, layer, allocs, frees, alloc_bytes, peak_bytes,"
                " peak_ns - " T(00000) ", live_bytes, live_blocks, unmatched_frees"
                " FROM process_stats ORDER BY process_id, layer",
                "1|1|5|2|144|120|700|56|2|1\n"
                "1|2|1|1|12288|12288|200|0|0|1\n"
                "2|1|2|1|107|100|250|7|1|0\n"
                "2|2|0|0|0|0|NULL|0|0|0\n");
    check_query("SELECT id, pid, ppid, image_seq, exe, cmdline, start_ns - " T(00000) ","
                " end_ns - " T(00000) ", substr(trace_file, -10), lost_events, stopped_errno,"
                " damage FROM processes ORDER BY id",
                "1|100|1|0|/usr/bin/app|app --fast|100|900|/100.0.mst|0|0|NULL\n"
                "2|200|100|0|/usr/bin/child|child|250|1150|/200.0.mst|7|28|NULL\n");
    check_query("SELECT id, process_id, tid, first_ns - " T(00000) ", last_ns - " T(00000) ","
                " events FROM threads ORDER BY id",
                "1|1|100|100|700|6\n2|1|101|200|900|5\n3|2|200|250|1150|3\n");
    check_query("SELECT id, process_id, depth, replace(c_text, char(10), '/') FROM stacks",
                "1|1|2|?? (app+0x1123)/?? (lib\"q.so+0x1000)\n2|1|1|?? (0x1234)\n"
                "3|2|1|?? (0x400500)\n");
    check_query("SELECT s.stack_id, s.position, f.module_id, f.pc, f.inline_depth, f.function_id,"
                " f.file_id, f.line FROM stack_frames s JOIN frames f ON f.id = s.frame_id"
                " ORDER BY 1, 2",
                "1|0|1|93824992235811|0|NULL|NULL|NULL\n"
                "1|1|2|140737337364480|0|NULL|NULL|NULL\n"
                "2|0|NULL|4660|0|NULL|NULL|NULL\n"
                "3|0|NULL|4195584|0|NULL|NULL|NULL\n");
    check_query("SELECT process_id, path, bias, lo, hi FROM modules ORDER BY id",
                "1|/nonexistent/app|93824992231424|93824992231424|93824992280576\n"
                "1|/nonexistent/lib\"q.so|140737337360384|140737337360384|140737337425920\n");
    check_query("SELECT key, value FROM meta WHERE key NOT IN ('cwd', 'hostname', 'trace_dir',"
                " 'memscope_version') ORDER BY key",
                "all_peak_bytes|12484\nall_peak_event_id|6\nall_peak_ns|" T(00300) "\n"
                "call_stack_c|64\ncommand_line|[\"app\",\"--fast\"]\nend_time_ns|" T(01150) "\n"
                "event_count|14\nevents|NULL\nexit_status|NULL\nfinal_live_bytes|63\n"
                "first_event_ns|" T(00100) "\nformat_version|2\n"
                "last_event_ns|" T(01150) "\nmax_live_bytes|12484\nstart_time_ns|" T(00000) "\n");
    check_query("SELECT * FROM event_kinds", "1|MALLOC\n2|FREE\n4|STEP\n5|MARK\n"
                                            "6|RANGE_START\n7|RANGE_END\n8|ACCESS\n9|OOM\n10|KERNEL_LAUNCH\n"
                "11|OOM_RECENT_ALLOC\n12|OOM_TOP_ALLOC\n13|DEVICE_USAGE\n");
    check_query("SELECT * FROM layers", "0|annotation|N/A|NULL\n1|heap|HOST|cpu\n2|mmap|MMAP|cpu\n");
    check_query("SELECT * FROM memscope_dump WHERE ID IN (1, 8, 9)",
                "1|MALLOC|HOST|N/A|" T(00100) "|100|100|cpu|0x0000000000001000|"
                "{\"allocation_id\":\"1\",\"addr\":\"0x0000000000001000\",\"size\":\"16\","
                "\"func\":\"malloc\"}||?? (app+0x1123)\n?? (lib\"q.so+0x1000)\n"
                "8|FREE|MMAP|N/A|" T(00400) "|100|101|cpu|0x00007f0000001000|"
                "{\"addr\":\"0x00007f0000001000\",\"size\":\"4096\",\"func\":\"munmap\"}||\n"
                "9|FREE|HOST|N/A|" T(00500) "|100|100|cpu|0x00000000000dead0|"
                "{\"addr\":\"0x00000000000dead0\",\"func\":\"free\"}||\n");
    check_query("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name NOT LIKE "
                "'sqlite_%'", "4\n");
}

static void check_csv(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    char err[256];
    CHECK(f != NULL);
    CHECK_EQ(ms_store_export_csv(db, f, err, sizeof err), 0);
    fclose(f);
    CHECK_STREQ(buf, want_csv);
    free(buf);
}

static void test_convert(void)
{
    struct tg a, b;
    build_a(&a);
    build_b(&b);
    write_file("100.0.mst", &a);
    write_file("200.0.mst", &b);
    write_file("notes.txt", &a); /* not *.mst: ignored */
    struct ms_store_result res;
    char err[256];
    FILE *old = fopen(db, "w"); /* an existing file is replaced */
    fputs("old", old);
    fclose(old);
    int rc = convert(dir, 1, &res, err);
    if (rc)
        fprintf(stderr, "convert: %s\n", err);
    CHECK_EQ(rc, 0);
    CHECK_EQ(res.events, 14);
    CHECK_EQ(res.processes, 2);
    CHECK_EQ(res.lost_events, 7);
    CHECK_EQ(res.damaged_chunks, 0);
    CHECK_STREQ(res.warning, "");
    check_rows();
    check_csv();

    /* Without symbolization the frames and c_text are the same (these modules have no file). */
    CHECK_EQ(convert(dir, 0, &res, err), 0);
    check_query("SELECT id, process_id, depth, replace(c_text, char(10), '/') FROM stacks",
                "1|1|2|?? (app+0x1123)/?? (lib\"q.so+0x1000)\n2|1|1|?? (0x1234)\n"
                "3|2|1|?? (0x400500)\n");
    check_csv();

    /* Damage: a malformed record in thread 1's second chunk loses that chunk's rest only. */
    a.buf[4096 * 4 + MS_TRACE_CHUNK_HEADER_SIZE] = 0x07;
    write_file("100.0.mst", &a);
    CHECK_EQ(convert(dir, 1, &res, err), 0);
    CHECK_EQ(res.events, 11);
    CHECK_EQ(res.damaged_chunks, 1);
    CHECK(strstr(res.warning, "100.0.mst: malformed record in chunk") != NULL);
    check_query("SELECT id, damage IS NOT NULL FROM processes", "1|1\n2|0\n");
    tg_release(&a);
    tg_release(&b);
}

static void test_bad_input(void)
{
    struct ms_store_result res;
    char err[256], tmp[160], sub[128];
    snprintf(tmp, sizeof tmp, "%s.tmp", db);
    unlink(db);

    CHECK(convert("/nonexistent/memscope-traces", 1, &res, err) < 0);
    CHECK(strstr(err, "/nonexistent/memscope-traces") != NULL);
    CHECK(!exists(db) && !exists(tmp));

    snprintf(sub, sizeof sub, "%s/empty", dir);
    CHECK_EQ(mkdir(sub, 0700), 0);
    CHECK_EQ(convert(sub, 1, &res, err), MS_ENOTFOUND);
    CHECK(strstr(err, "no trace files") != NULL);
    CHECK(!exists(db) && !exists(tmp));

    char path[256];
    snprintf(path, sizeof path, "%s/1.0.mst", sub);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 200; i++)
        fputs("not a trace ", f);
    fclose(f);
    CHECK_EQ(convert(sub, 1, &res, err), MS_EFORMAT);
    CHECK(strstr(err, "1.0.mst: not a memscope trace") != NULL);
    CHECK(!strchr(err, '\n'));
    CHECK(!exists(db) && !exists(tmp));

    struct tg g;
    build_b(&g);
    tg_header(&g)->version = MS_TRACE_MAX_VERSION + 1;
    CHECK_EQ(tg_write(&g, path), 0);
    CHECK_EQ(convert(sub, 1, &res, err), MS_EVERSION);
    CHECK(strstr(err, "written by trace format version 3; this memscope reads version 2 or older") != NULL);
    CHECK(!exists(db) && !exists(tmp));
    tg_release(&g);

    /* A file too short for a header is skipped with a warning when others are readable. */
    build_b(&g);
    CHECK_EQ(tg_write(&g, path), 0);
    snprintf(path, sizeof path, "%s/2.0.mst", sub);
    f = fopen(path, "w");
    fclose(f);
    CHECK_EQ(convert(sub, 1, &res, err), 0);
    CHECK_EQ(res.processes, 1);
    CHECK(strstr(res.warning, "2.0.mst") != NULL);
    tg_release(&g);

    CHECK(ms_store_export_csv("/nonexistent/x.db", stdout, err, sizeof err) < 0);
    sqlite3 *d;
    CHECK_EQ(sqlite3_open(db, &d), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(d, "UPDATE meta SET value = '3' WHERE key = 'format_version'", NULL,
                          NULL, NULL), SQLITE_OK);
    sqlite3_close(d);
    CHECK_EQ(ms_store_export_csv(db, stdout, err, sizeof err), MS_EVERSION);
}

/* ---- Real symbolization of this program ---- */

__attribute__((noinline)) int marker_function(int x)
{
    return x * 3 + 1;
}

static int find_main(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uint64_t *out = data;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uint64_t s = info->dlpi_addr + ph->p_vaddr;
        if (s < lo)
            lo = s;
        if (s + ph->p_memsz > hi)
            hi = s + ph->p_memsz;
    }
    out[0] = info->dlpi_addr;
    out[1] = lo;
    out[2] = hi;
    return 1; /* the first entry is the main program */
}

static void test_symbolize(void)
{
    char sub[128], path[256], exe[4096];
    snprintf(sub, sizeof sub, "%s/sym", dir);
    CHECK_EQ(mkdir(sub, 0700), 0);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CHECK(n > 0);
    exe[n] = 0;
    uint64_t m[3];
    dl_iterate_phdr(find_main, m);
    uint64_t pcs[2] = {(uint64_t)(uintptr_t)marker_function + 1, 0x10};
    struct tg g;
    struct tg_chunk c;
    tg_init(&g, 300, 1, MA, R);
    tg_chunk_begin(&g, &c, 300, 1, 0, MA, 8192);
    c.p = ms_enc_module(c.p, m[0], m[1], m[2], exe, (size_t)n);
    c.p = ms_enc_stack(c.p, 1, pcs, 2);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC, MA + 1, 0x1000, 1, 1);
    tg_chunk_end(&g, &c);
    snprintf(path, sizeof path, "%s/300.0.mst", sub);
    CHECK_EQ(tg_write(&g, path), 0);
    tg_release(&g);
    struct ms_store_result res;
    char err[256];
    CHECK_EQ(convert(sub, 1, &res, err), 0);
    char *text = query(db, "SELECT c_text FROM stacks");
    if (strncmp(text, "marker_function (", 17) != 0 || !strstr(text, "test_store.c:") ||
        !strstr(text, "\n?? (0x10)")) {
        fprintf(stderr, "c_text: %s\n", text);
        CHECK(0);
    }
    free(text);
    check_query("SELECT s.text FROM frames f JOIN strings s ON s.id = f.function_id",
                "marker_function\n");
    check_query("SELECT line > 0, module_id FROM frames WHERE function_id IS NOT NULL", "1|1\n");
    CHECK_EQ(marker_function(1), 4);
}

/* ---- The one hash map (common/u64map.h) against a plain array ---- */

static void test_u64map(void)
{
    enum { N = 5000 };
    static uint32_t ref[N]; /* key i*16 -> ref[i], 0 = absent */
    struct ms_u64map m;
    ms_u64map_init(&m, sizeof(uint32_t), N);
    uint64_t x = 88172645463325252ull;
    for (int step = 0; step < 400000; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint32_t i = (uint32_t)(x % N), v;
        uint64_t key = (uint64_t)i * 16;
        if ((x >> 32) % 3) {
            CHECK_EQ(ms_u64map_set32(&m, key, step + 1), 0);
            ref[i] = (uint32_t)step + 1;
        } else {
            CHECK_EQ(ms_u64map_del(&m, key, &v), ref[i] != 0);
            if (ref[i])
                CHECK_EQ(v, ref[i]);
            ref[i] = 0;
        }
        if (step % 50000 == 0) {
            size_t count = 0;
            for (uint32_t k = 0; k < N; k++) {
                int have = ms_u64map_get32(&m, (uint64_t)k * 16, &v);
                CHECK_EQ(have, ref[k] != 0);
                if (have) {
                    CHECK_EQ(v, ref[k]);
                    count++;
                }
            }
            CHECK_EQ(count, m.count);
            size_t seen = 0, pos = 0;
            uint64_t key;
            while (ms_u64map_next32(&m, &pos, &key, &v)) {
                CHECK_EQ(key % 16, 0);
                CHECK_EQ(v, ref[key / 16]);
                seen++;
            }
            CHECK_EQ(seen, m.count);
        }
    }
    /* Wide values, key 0 among them, moved by growth and by backward shifts. */
    struct wide {
        uint64_t a, b, c;
    };
    struct ms_u64map w;
    ms_u64map_init(&w, sizeof(struct wide), MS_U64MAP_MAX);
    for (uint64_t k = 0; k < 3000; k++) {
        int isnew = 0;
        struct wide *p = ms_u64map_put(&w, k << 12, &isnew);
        CHECK(p && isnew && !p->a && !p->b && !p->c);
        *p = (struct wide){k, ~k, k * 3};
    }
    for (uint64_t k = 0; k < 3000; k += 2)
        CHECK_EQ(ms_u64map_del(&w, k << 12, NULL), 1);
    for (uint64_t k = 0; k < 3000; k++) {
        const struct wide *p = ms_u64map_get(&w, k << 12);
        CHECK_EQ(p != NULL, k % 2);
        if (p)
            CHECK(p->a == k && p->b == ~k && p->c == k * 3);
    }
    CHECK_EQ(w.count, 1500);
    ms_u64map_release(&w);
    /* The cap holds. */
    struct ms_u64map small;
    ms_u64map_init(&small, sizeof(uint32_t), 2);
    CHECK_EQ(ms_u64map_set32(&small, 1, 1), 0);
    CHECK_EQ(ms_u64map_set32(&small, 0, 2), 0);
    CHECK_EQ(ms_u64map_set32(&small, 0, 3), 0);
    CHECK_EQ(ms_u64map_set32(&small, 5, 1), MS_ENOMEM);
    ms_u64map_release(&small);
    /* cleared: empty, its table kept, refilled without growing */
    size_t mask = m.mask;
    ms_u64map_clear(&m);
    CHECK_EQ(m.count, 0);
    CHECK(ms_u64map_get(&m, 0) == NULL);
    CHECK(ms_u64map_get(&m, 16) == NULL);
    for (uint64_t k = 0; k < 1000; k++)
        CHECK_EQ(ms_u64map_set32(&m, k * 16, (uint32_t)k), 0);
    uint32_t got = 0;
    CHECK(ms_u64map_get32(&m, 999 * 16, &got) && got == 999);
    CHECK(ms_u64map_get32(&m, 0, &got) && got == 0);
    CHECK_EQ(m.count, 1000);
    CHECK_EQ(m.mask, mask); /* the table kept: no growth, no new allocation */
    ms_u64map_release(&m);
}

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char sub[512];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        remove_tree(sub);
    }
    closedir(d);
    rmdir(path);
}

/* More allocations than the store's window of blocks rows awaiting their turn (65536 ids,
 * convert.c): a block live across all of them (its row passed over, then written out of
 * order), one live at exit, 70000 short-lived ones between (written in order), and row counts
 * that are not multiples of the store's multi-row INSERT. Every row is there, with its values. */
static void test_many_blocks(void)
{
    char sub[128];
    snprintf(sub, sizeof sub, "%s/many", dir);
    CHECK_EQ(mkdir(sub, 0755), 0);
    struct tg g;
    struct tg_chunk c;
    tg_init(&g, 300, 1, MA, R);
    tg_chunk_begin(&g, &c, 300, 1, 0, MA, 4u << 20);
    uint64_t t = MA;
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, t += 10, 0x10000000, 1000, 0);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, t += 10, 0x10001000, 2000, 0);
    for (int i = 0; i < 70000; i++) {
        c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, t += 10, 0x20000000,
                           16 + (uint64_t)(i % 50), 0);
        c.p = ms_enc_free(c.p, &c.st, t += 10, 0x20000000);
    }
    c.p = ms_enc_free(c.p, &c.st, t += 10, 0x10000000);
    tg_chunk_end(&g, &c);
    char path[256];
    snprintf(path, sizeof path, "%s/300.0.mst", sub);
    CHECK_EQ(tg_write(&g, path), 0);
    tg_release(&g);
    struct ms_store_result res;
    char err[256];
    CHECK_EQ(convert(sub, 0, &res, err), 0);
    CHECK_EQ(res.events, 140003);
    /* sizes: 1000 + 2000 + 70000 * 16 + 1400 * (0 + 1 + ... + 49) */
    check_query("SELECT count(*), min(allocation_id), max(allocation_id), sum(size), count(free_ns) "
                "FROM blocks", "70002|1|70002|2838000|70001\n");
    check_query("SELECT allocation_id, size, free_ns - alloc_ns, free_event_id FROM blocks "
                "WHERE allocation_id IN (1, 2, 3, 70002) ORDER BY 1",
                "1|1000|1400020|140003\n2|2000|NULL|NULL\n3|16|10|4\n70002|65|10|140002\n");
    check_query("SELECT count(*), sum(free_event_id = alloc_event_id + 1) FROM blocks",
                "70002|70000\n");
    remove_tree(sub);
}

/* Sampling mode (docs/production.md, "Sampling"): a trace whose header says it was sampled at
 * 1000 bytes. Each recorded heap block gets S / (1 - exp(-S/1000)) bytes (1000 B: 1581.98,
 * 10 B: 1005.008, 100000 B: 100000), the mmap layer keeps its sizes, a free of a block that was
 * not recorded is dropped, and meta holds the header's exact counts. */
static void test_sampled(void)
{
    char sub[128];
    snprintf(sub, sizeof sub, "%s/sampled", dir);
    CHECK_EQ(mkdir(sub, 0755), 0);
    struct tg g;
    struct tg_chunk c;
    tg_init(&g, 400, 1, MA, R);
    struct ms_trace_file_header *h = tg_header(&g);
    h->sample_bytes = 1000;
    h->heap_allocs = 500;
    h->heap_bytes = 123456;
    h->heap_frees = 400;
    tg_chunk_begin(&g, &c, 400, 1, 0, MA, 4096);
    uint64_t t = MA;
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, t += 10, 0x1000, 1000, 0);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, t += 10, 0x20000, 100000, 0);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_CALLOC, t += 10, 0x3000, 10, 0);
    c.p = ms_enc_free(c.p, &c.st, t += 10, 0x9000); /* not sampled: no row */
    c.p = ms_enc_free(c.p, &c.st, t += 10, 0x1000);
    c.p =
        ms_enc_alloc(c.p, &c.st, MS_REC_MMAP_ALLOC + MS_FN_MMAP, t += 10, 0x7f0000000000, 4096, 0);
    tg_chunk_end(&g, &c);
    char path[256];
    snprintf(path, sizeof path, "%s/400.0.mst", sub);
    CHECK_EQ(tg_write(&g, path), 0);
    tg_release(&g);
    struct ms_store_result res;
    char err[256];
    CHECK_EQ(convert(sub, 0, &res, err), 0);
    CHECK_EQ(res.events, 5);
    check_query("SELECT layer, size, free_ns IS NOT NULL FROM blocks ORDER BY allocation_id",
                "1|1582|1\n1|100000|0\n1|1005|0\n2|4096|0\n");
    check_query("SELECT count(*) FROM events WHERE kind = 2", "1\n");
    check_query("SELECT allocs, alloc_bytes, frees, unmatched_frees FROM process_stats "
                "WHERE layer = 1",
                "3|102587|1|0\n");
    check_query("SELECT key, value FROM meta WHERE key LIKE 'sampling%' OR key LIKE '%exact' "
                "ORDER BY key",
                "heap_alloc_bytes_exact|123456\nheap_allocs_exact|500\nheap_frees_exact|400\n"
                "sampling_bytes|1000\n");
    remove_tree(sub);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/memscope-test-store-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(db, sizeof db, "%s/run.db", dir);
    test_u64map();
    test_convert();
    test_bad_input();
    test_symbolize();
    test_many_blocks();
    test_sampled();
    remove_tree(dir);
    puts("test_store: ok");
    return 0;
}
