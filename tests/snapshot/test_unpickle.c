/* test_unpickle.c: unit tests of the data-only unpickler, the JSON reader and the snapshot
 * model on hand-made inputs. Optional argv[1]: a good fixture pickle whose prefixes must all
 * fail cleanly (truncation). Prints one line per failed check; exit status 1 on failure. */
#include "common/ms_error.h"
#include "snapshot/json.h"
#include "snapshot/snapshot.h"
#include "snapshot/unpickle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);         \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

static int load(struct ms_unpickle *u, const char *bytes, size_t n)
{
    ms_unpickle_init(u, NULL);
    return ms_unpickle_load(u, bytes, n);
}

static void test_scalars(void)
{
    /* (None, True, False, 1, 300, -5, 2**40, -2**63, 1.5, "héllo", b"xy", 2**70) as a tuple */
    static const char p[] =
        "\x80\x04" "(" "N" "\x88" "\x89" "K\x01" "M\x2c\x01" "J\xfb\xff\xff\xff"
        "\x8a\x06\x00\x00\x00\x00\x00\x01" "\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80"
        "G\x3f\xf8\x00\x00\x00\x00\x00\x00" "\x8c\x06h\xc3\xa9llo" "C\x02xy"
        "\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x40" "t.";
    struct ms_unpickle u;
    CHECK(load(&u, p, sizeof p - 1) == 0);
    ms_pv t = u.root;
    CHECK(ms_pv_type(&u, t) == MS_PV_TUPLE);
    CHECK(ms_pv_len(&u, t) == 12);
    int64_t i;
    double f;
    size_t n;
    CHECK(ms_pv_type(&u, ms_pv_item(&u, t, 0)) == MS_PV_NONE);
    CHECK(ms_pv_bool(&u, ms_pv_item(&u, t, 1)) == 1);
    CHECK(ms_pv_bool(&u, ms_pv_item(&u, t, 2)) == 0);
    CHECK(!ms_pv_int(&u, ms_pv_item(&u, t, 3), &i) && i == 1);
    CHECK(!ms_pv_int(&u, ms_pv_item(&u, t, 4), &i) && i == 300);
    CHECK(!ms_pv_int(&u, ms_pv_item(&u, t, 5), &i) && i == -5);
    CHECK(!ms_pv_int(&u, ms_pv_item(&u, t, 6), &i) && i == ((int64_t)1 << 40));
    CHECK(!ms_pv_int(&u, ms_pv_item(&u, t, 7), &i) && i == INT64_MIN);
    CHECK(!ms_pv_float(&u, ms_pv_item(&u, t, 8), &f) && f == 1.5);
    const char *s = ms_pv_str(&u, ms_pv_item(&u, t, 9), &n);
    CHECK(s && n == 6 && !memcmp(s, "h\xc3\xa9llo", 6));
    CHECK(ms_pv_type(&u, ms_pv_item(&u, t, 10)) == MS_PV_BYTES);
    CHECK(ms_pv_type(&u, ms_pv_item(&u, t, 11)) == MS_PV_BIGINT);
    CHECK(ms_pv_int(&u, ms_pv_item(&u, t, 11), &i) == -1);
    CHECK(ms_pv_type(&u, ms_pv_item(&u, t, 12)) == MS_PV_ABSENT);
    ms_unpickle_release(&u);
}

static void test_memo_sharing(void)
{
    /* outer = [inner, inner], inner = [1, 2]: one inner object, referenced twice. */
    static const char p[] = "\x80\x04]\x94(]\x94(K\x01K\x02" "eh\x01" "e.";
    struct ms_unpickle u;
    CHECK(load(&u, p, sizeof p - 1) == 0);
    CHECK(ms_pv_len(&u, u.root) == 2);
    ms_pv a = ms_pv_item(&u, u.root, 0), b = ms_pv_item(&u, u.root, 1);
    CHECK(ms_pv_identity(&u, a) && ms_pv_identity(&u, a) == ms_pv_identity(&u, b));
    CHECK(ms_pv_len(&u, b) == 2);
    ms_unpickle_release(&u);

    /* A dict whose keys and values come from the memo (protocol 2 BINPUT/BINGET). */
    static const char d[] = "\x80\x02}q\x00(X\x01\x00\x00\x00kq\x01K\x07h\x01h\x01u.";
    CHECK(load(&u, d, sizeof d - 1) == 0);
    int64_t i;
    CHECK(ms_pv_len(&u, u.root) == 2);
    /* Duplicate keys: the last value wins, as in Python. */
    ms_pv v = ms_pv_dict_get(&u, u.root, "k");
    CHECK(ms_pv_type(&u, v) == MS_PV_STR);
    (void)i;
    ms_unpickle_release(&u);

    /* A second write to the same memo slot is refused. */
    static const char twice[] = "\x80\x02Nq\x00Nq\x00.";
    CHECK(load(&u, twice, sizeof twice - 1) == MS_EFORMAT);
    CHECK(strstr(u.err, "written twice") != NULL);
    ms_unpickle_release(&u);
}

static void test_refusals(void)
{
    static const struct {
        unsigned char op;
        const char *name;
    } ops[] = {{'c', "GLOBAL"}, {0x93, "STACK_GLOBAL"}, {'R', "REDUCE"}, {'b', "BUILD"},
               {'i', "INST"}, {'o', "OBJ"}, {0x81, "NEWOBJ"}, {0x92, "NEWOBJ_EX"},
               {'P', "PERSID"}, {'Q', "BINPERSID"}, {0x82, "EXT1"}, {0x83, "EXT2"},
               {0x84, "EXT4"}};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        char p[8] = {(char)0x80, 4, 'N', 'N', (char)ops[k].op, 'x', 'y', '.'};
        struct ms_unpickle u;
        CHECK(load(&u, p, sizeof p) == MS_EREFUSED);
        char want[64];
        snprintf(want, sizeof want, "refused opcode %s ", ops[k].name);
        CHECK(strstr(u.err, want) != NULL);
        CHECK(u.err_offset == 4);
        CHECK(strstr(u.err, "byte offset 4") != NULL);
        ms_unpickle_release(&u);
    }
    /* The classic: GLOBAL posix.system, then REDUCE. Refused at the GLOBAL. */
    static const char evil[] = "\x80\x02" "cposix\nsystem\n" "X\x04\x00\x00\x00true" "\x85R.";
    struct ms_unpickle u;
    CHECK(load(&u, evil, sizeof evil - 1) == MS_EREFUSED);
    CHECK(strstr(u.err, "GLOBAL") != NULL && u.err_offset == 2);
    ms_unpickle_release(&u);
    /* Unknown and protocol-0 opcodes, and protocol 6. */
    CHECK(load(&u, "\x80\x04\xff.", 4) == MS_EFORMAT);
    ms_unpickle_release(&u);
    CHECK(load(&u, "I1\n.", 4) == MS_EFORMAT);
    ms_unpickle_release(&u);
    CHECK(load(&u, "\x80\x06N.", 4) == MS_EVERSION);
    ms_unpickle_release(&u);
}

static void test_caps(void)
{
    struct ms_unpickle u;
    struct ms_unpickle_caps caps = {.max_depth = 3};
    ms_unpickle_init(&u, &caps);
    CHECK(ms_unpickle_load(&u, "\x80\x04((((N.", 8) == MS_ELIMIT);
    ms_unpickle_release(&u);
    caps = (struct ms_unpickle_caps){.max_items = 2};
    ms_unpickle_init(&u, &caps);
    CHECK(ms_unpickle_load(&u, "\x80\x04](NNNe.", 9) == MS_ELIMIT);
    ms_unpickle_release(&u);
    caps = (struct ms_unpickle_caps){.max_bytes = 4};
    ms_unpickle_init(&u, &caps);
    CHECK(ms_unpickle_load(&u, "\x80\x04\x8c\x05hello.", 10) == MS_ELIMIT);
    ms_unpickle_release(&u);
    caps = (struct ms_unpickle_caps){.max_stack = 2};
    ms_unpickle_init(&u, &caps);
    CHECK(ms_unpickle_load(&u, "\x80\x04NNN.", 6) == MS_ELIMIT);
    ms_unpickle_release(&u);
    /* Stack underflow and type confusion are errors, not crashes. */
    CHECK(load(&u, "\x80\x04.", 3) == MS_EFORMAT);
    ms_unpickle_release(&u);
    CHECK(load(&u, "\x80\x04(e.", 5) == MS_EFORMAT);
    ms_unpickle_release(&u);
    CHECK(load(&u, "\x80\x04N(Ne.", 7) == MS_EFORMAT);
    ms_unpickle_release(&u);
    CHECK(load(&u, "\x80\x04}N(Nu.", 8) == MS_EFORMAT);
    ms_unpickle_release(&u);
    CHECK(load(&u, "\x80\x04\x8c\x02\xff\xfe.", 7) == MS_EFORMAT); /* bad UTF-8 */
    ms_unpickle_release(&u);
}

static void test_truncation(const char *path)
{
    /* Every prefix of a small pickle, and a stride of prefixes of a fixture, fails cleanly. */
    static const char p[] = "\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01k\x94"
                            "]\x94(K\x01K\x02" "eu.";
    for (size_t n = 0; n < sizeof p - 1; n++) {
        struct ms_unpickle u;
        int rc = load(&u, p, n);
        CHECK(rc == MS_ETRUNC || rc == MS_EFORMAT);
        ms_unpickle_release(&u);
    }
    if (!path)
        return;
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f)
        return;
    static char buf[1 << 21];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    struct ms_unpickle u;
    CHECK(load(&u, buf, len) == 0);
    ms_unpickle_release(&u);
    for (size_t n = 0; n < len; n += (n + 200 > len ? 1 : 997)) {
        int rc = load(&u, buf, n);
        CHECK(rc != 0);
        ms_unpickle_release(&u);
    }
}

static void test_json(void)
{
    static const char j[] =
        " {\"a\": [1, -2, 3.5e2, true, false, null], \"s\": \"x\\n\\u00e9\\ud83d\\ude00\\\"\","
        " \"big\": 123456789012345678901234567890, \"e\": {}, \"l\": []} ";
    struct ms_unpickle u;
    ms_unpickle_init(&u, NULL);
    CHECK(ms_json_load(&u, j, sizeof j - 1) == 0);
    ms_pv a = ms_pv_dict_get(&u, u.root, "a");
    int64_t i;
    double f;
    CHECK(ms_pv_len(&u, a) == 6);
    CHECK(!ms_pv_int(&u, ms_pv_item(&u, a, 1), &i) && i == -2);
    CHECK(!ms_pv_float(&u, ms_pv_item(&u, a, 2), &f) && f == 350.0);
    CHECK(ms_pv_type(&u, ms_pv_item(&u, a, 5)) == MS_PV_NONE);
    size_t n;
    const char *s = ms_pv_str(&u, ms_pv_dict_get(&u, u.root, "s"), &n);
    CHECK(s && n == 9 && !memcmp(s, "x\n\xc3\xa9\xf0\x9f\x98\x80\"", 9));
    CHECK(ms_pv_type(&u, ms_pv_dict_get(&u, u.root, "big")) == MS_PV_FLOAT);
    ms_unpickle_release(&u);
    static const char *const bad[] = {"[1,", "{\"a\" 1}", "[1 2]", "\"abc", "[tru]", "{} x",
                                      "[\"\\q\"]", "", "-"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ms_unpickle_init(&u, NULL);
        CHECK(ms_json_load(&u, bad[k], strlen(bad[k])) != 0);
        ms_unpickle_release(&u);
    }
}

static void test_model(void)
{
    /* One segment with an allocated and a free block, a trace: alloc, free, alloc. */
    static const char j[] =
        "{\"segments\": [{\"device\": 0, \"address\": 4096, \"total_size\": 2048,"
        "  \"allocated_size\": 512, \"active_size\": 512, \"requested_size\": 500,"
        "  \"stream\": 0, \"segment_type\": \"small\", \"blocks\": ["
        "   {\"address\": 4096, \"size\": 512, \"requested_size\": 500,"
        "    \"state\": \"active_allocated\", \"frames\": [{\"filename\": \"a.py\", \"line\": 3,"
        "    \"name\": \"f\"}]},"
        "   {\"address\": 4608, \"size\": 1536, \"requested_size\": 0, \"state\": \"inactive\"}]}],"
        " \"device_traces\": [[{\"action\": \"segment_alloc\", \"addr\": 4096, \"size\": 2048},"
        "  {\"action\": \"alloc\", \"addr\": 4096, \"size\": 1024},"
        "  {\"action\": \"free_requested\", \"addr\": 4096, \"size\": 1024},"
        "  {\"action\": \"free_completed\", \"addr\": 4096, \"size\": 1024},"
        "  {\"action\": \"alloc\", \"addr\": 4096, \"size\": 512}]]}";
    struct ms_snapshot s;
    ms_snapshot_init(&s, NULL);
    CHECK(ms_snapshot_load_mem(&s, j, sizeof j - 1) == 0);
    CHECK(s.nsegs == 1 && s.nblocks == 2 && s.ntraces == 1 && s.traces[0].nevents == 5);
    CHECK(s.blocks[0].stack != 0 && s.nframes == 2);
    struct ms_snap_state st;
    CHECK(ms_snapshot_state_at(&s, 0, 4, &st) == 0);
    CHECK(st.nsegs == 1 && st.nblocks == 1 && st.blocks[0].size == 512);
    ms_snap_state_release(&st);
    CHECK(ms_snapshot_state_at(&s, 0, 2, &st) == 0);
    CHECK(st.nblocks == 1 && st.blocks[0].state == MS_SB_ACTIVE_PENDING_FREE);
    ms_snap_state_release(&st);
    CHECK(ms_snapshot_state_at(&s, 0, 1, &st) == 0);
    CHECK(st.nblocks == 1 && st.blocks[0].state == MS_SB_ACTIVE_ALLOCATED &&
          st.blocks[0].size == 1024);
    ms_snap_state_release(&st);
    CHECK(ms_snapshot_state_at(&s, 0, -1, &st) == 0);
    CHECK(st.nsegs == 0 && st.nblocks == 0);
    ms_snap_state_release(&st);
    CHECK(ms_snapshot_state_at(&s, 0, 5, &st) == MS_EINVAL);
    CHECK(ms_snapshot_state_at(&s, 7, 0, &st) == MS_EINVAL);
    FILE *null = fopen("/dev/null", "w");
    CHECK(null && ms_snapshot_write_summary(&s, null, 1, 10) == 0);
    if (null)
        fclose(null);
    ms_snapshot_release(&s);

    ms_snapshot_init(&s, NULL);
    const char *bad1 = "{\"x\": 1}";
    CHECK(ms_snapshot_load_mem(&s, bad1, strlen(bad1)) == MS_EFORMAT);
    ms_snapshot_release(&s);
    ms_snapshot_init(&s, NULL);
    const char *bad2 = "{\"segments\": [{\"address\": \"x\"}]}";
    CHECK(ms_snapshot_load_mem(&s, bad2, strlen(bad2)) == MS_EFORMAT);
    ms_snapshot_release(&s);
}

static void test_shapes(void)
{
    /* [{'a': 1, 'b': 2}, {'a': 3, 'b': 4}, {'a': 5, 'b': 6}, {'a': 7, 'a': 8},
     *  {'a': 11, 'b': 12}], then d[1]['c'] = 10 (a key that is no memo reference) and
     * d[2]['a'] = 9, both by SETITEM on a dict that already has its items. The first dict's
     * keys are new strings; the others' are memo references and share key shapes. */
    static const char p[] =
        "\x80\x04]\x94(}\x94(\x8c\x01" "a\x94K\x01\x8c\x01" "b\x94K\x02u"
        "}\x94(h\x02K\x03h\x03K\x04u}\x94(h\x02K\x05h\x03K\x06u}\x94(h\x02K\x07h\x02K\x08u"
        "}\x94(h\x02K\x0bh\x03K\x0cu" "e" "h\x05h\x02K\x09s0" "h\x04\x8c\x01" "cK\x0as0.";
    struct ms_unpickle u;
    CHECK(load(&u, p, sizeof p - 1) == 0);
    CHECK(ms_pv_len(&u, u.root) == 5);
    ms_pv d[5];
    for (int k = 0; k < 5; k++)
        d[k] = ms_pv_item(&u, u.root, (uint64_t)k);
    int64_t i;
    CHECK(ms_pv_dict_shape(&u, d[0]) == 0);
    CHECK(ms_pv_dict_shape(&u, d[4]) != 0);
    CHECK(ms_pv_dict_shape(&u, d[3]) != 0 && ms_pv_dict_shape(&u, d[3]) != ms_pv_dict_shape(&u, d[4]));
    /* The dicts grown by SETITEM keep all their pairs, in order. */
    CHECK(ms_pv_len(&u, d[1]) == 3 && ms_pv_len(&u, d[2]) == 3);
    CHECK(ms_pv_str_eq(&u, ms_pv_dict_key(&u, d[1], 2), "c"));
    CHECK(!ms_pv_int(&u, ms_pv_dict_value(&u, d[1], 2), &i) && i == 10);
    CHECK(!ms_pv_int(&u, ms_pv_dict_get(&u, d[1], "b"), &i) && i == 4);
    CHECK(!ms_pv_int(&u, ms_pv_dict_get(&u, d[2], "a"), &i) && i == 9);
    CHECK(!ms_pv_int(&u, ms_pv_dict_get(&u, d[2], "b"), &i) && i == 6);
    /* Duplicate keys in a shaped dict: the last wins. */
    CHECK(ms_pv_len(&u, d[3]) == 2 && !ms_pv_int(&u, ms_pv_dict_get(&u, d[3], "a"), &i) && i == 8);
    CHECK(ms_pv_str_eq(&u, ms_pv_dict_key(&u, d[4], 1), "b"));
    CHECK(!ms_pv_int(&u, ms_pv_dict_value(&u, d[4], 0), &i) && i == 11);
    CHECK(ms_pv_type(&u, ms_pv_dict_key(&u, d[4], 2)) == MS_PV_ABSENT);
    int32_t at[3] = {1, -1, 7};
    ms_pv out[3];
    ms_pv_dict_values(&u, d[4], at, 3, out);
    CHECK(!ms_pv_int(&u, out[0], &i) && i == 12);
    CHECK(ms_pv_type(&u, out[1]) == MS_PV_ABSENT && ms_pv_type(&u, out[2]) == MS_PV_ABSENT);
    ms_unpickle_release(&u);
}

static void test_stacks(void)
{
    /* d1 = {a.py:1 f}, d2 = {??:0 g}, d3 = {b.cpp:2 h}, L = [d1]; five alloc events with frames
     * [d1, d2, d3, L], L, [d1, d2, d3, L] (another list, same content), [d2, d3], []. L is both
     * a frame (no dict: an empty frame) and a stack. */
    static const unsigned char p[] = {
        0x80, 0x04, 0x95, 0x19, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7d, 0x94, 0x28,
        0x8c, 0x08, 0x73, 0x65, 0x67, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x94, 0x5d, 0x94, 0x8c,
        0x0d, 0x64, 0x65, 0x76, 0x69, 0x63, 0x65, 0x5f, 0x74, 0x72, 0x61, 0x63, 0x65, 0x73,
        0x94, 0x5d, 0x94, 0x5d, 0x94, 0x28, 0x7d, 0x94, 0x28, 0x8c, 0x06, 0x61, 0x63, 0x74,
        0x69, 0x6f, 0x6e, 0x94, 0x8c, 0x05, 0x61, 0x6c, 0x6c, 0x6f, 0x63, 0x94, 0x8c, 0x04,
        0x61, 0x64, 0x64, 0x72, 0x94, 0x4b, 0x00, 0x8c, 0x04, 0x73, 0x69, 0x7a, 0x65, 0x94,
        0x4b, 0x01, 0x8c, 0x06, 0x66, 0x72, 0x61, 0x6d, 0x65, 0x73, 0x94, 0x5d, 0x94, 0x28,
        0x7d, 0x94, 0x28, 0x8c, 0x08, 0x66, 0x69, 0x6c, 0x65, 0x6e, 0x61, 0x6d, 0x65, 0x94,
        0x8c, 0x04, 0x61, 0x2e, 0x70, 0x79, 0x94, 0x8c, 0x04, 0x6c, 0x69, 0x6e, 0x65, 0x94,
        0x4b, 0x01, 0x8c, 0x04, 0x6e, 0x61, 0x6d, 0x65, 0x94, 0x8c, 0x01, 0x66, 0x94, 0x75,
        0x7d, 0x94, 0x28, 0x68, 0x0e, 0x8c, 0x02, 0x3f, 0x3f, 0x94, 0x68, 0x10, 0x4b, 0x00,
        0x68, 0x11, 0x8c, 0x01, 0x67, 0x94, 0x75, 0x7d, 0x94, 0x28, 0x68, 0x0e, 0x8c, 0x05,
        0x62, 0x2e, 0x63, 0x70, 0x70, 0x94, 0x68, 0x10, 0x4b, 0x02, 0x68, 0x11, 0x8c, 0x01,
        0x68, 0x94, 0x75, 0x5d, 0x94, 0x68, 0x0d, 0x61, 0x65, 0x75, 0x7d, 0x94, 0x28, 0x68,
        0x07, 0x68, 0x08, 0x68, 0x09, 0x4b, 0x00, 0x68, 0x0a, 0x4b, 0x01, 0x68, 0x0b, 0x68,
        0x19, 0x75, 0x7d, 0x94, 0x28, 0x68, 0x07, 0x68, 0x08, 0x68, 0x09, 0x4b, 0x00, 0x68,
        0x0a, 0x4b, 0x01, 0x68, 0x0b, 0x5d, 0x94, 0x28, 0x68, 0x0d, 0x68, 0x13, 0x68, 0x16,
        0x68, 0x19, 0x65, 0x75, 0x7d, 0x94, 0x28, 0x68, 0x07, 0x68, 0x08, 0x68, 0x09, 0x4b,
        0x00, 0x68, 0x0a, 0x4b, 0x01, 0x68, 0x0b, 0x5d, 0x94, 0x28, 0x68, 0x13, 0x68, 0x16,
        0x65, 0x75, 0x7d, 0x94, 0x28, 0x68, 0x07, 0x68, 0x08, 0x68, 0x09, 0x4b, 0x00, 0x68,
        0x0a, 0x4b, 0x01, 0x68, 0x0b, 0x5d, 0x94, 0x75, 0x65, 0x61, 0x75, 0x2e};
    struct ms_snapshot s;
    ms_snapshot_init(&s, NULL);
    CHECK(ms_snapshot_load_mem(&s, p, sizeof p) == 0);
    CHECK(s.ntraces == 1 && s.traces[0].nevents == 5);
    if (s.ntraces != 1 || s.traces[0].nevents != 5) {
        ms_snapshot_release(&s);
        return;
    }
    const struct ms_snap_event *e = s.traces[0].events;
    CHECK(e[0].stack != 0 && e[0].stack == e[2].stack);
    CHECK(e[1].stack != 0 && e[1].stack != e[0].stack && e[1].stack < s.nstacks);
    CHECK(e[3].stack != 0 && e[4].stack == 0);
    CHECK(s.nstacks == 4);
    uint32_t a = ms_snapshot_stack_frame(&s, e[0].stack, 0);
    CHECK(a != 0 && a == ms_snapshot_stack_frame(&s, e[1].stack, 0));
    CHECK(s.frames[a].file.n == 4 && !memcmp(s.frames[a].file.p, "a.py", 4));
    CHECK(s.stacks[e[0].stack].depth == 4 && s.stacks[e[0].stack].site == a);
    uint32_t plain = ms_snapshot_stack_frame(&s, e[0].stack, 3);
    CHECK(plain != 0 && s.frames[plain].file.n == 0);
    CHECK(ms_snapshot_stack_frame(&s, e[0].stack, 4) == 0);
    CHECK(ms_snapshot_stack_frame(&s, s.nstacks, 0) == 0);
    uint32_t site = s.stacks[e[3].stack].site;
    CHECK(site && s.frames[site].file.n == 5 && !memcmp(s.frames[site].file.p, "b.cpp", 5));
    CHECK(ms_snapshot_stack_frame(&s, e[3].stack, 1) == site);
    FILE *null = fopen("/dev/null", "w");
    CHECK(null && ms_snapshot_write_summary(&s, null, 1, 10) == 0);
    if (null)
        fclose(null);
    ms_snapshot_release(&s);
}

int main(int argc, char **argv)
{
    test_scalars();
    test_memo_sharing();
    test_refusals();
    test_caps();
    test_truncation(argc > 1 ? argv[1] : NULL);
    test_json();
    test_model();
    test_shapes();
    test_stacks();
    if (failures)
        fprintf(stderr, "test_unpickle: %d checks failed\n", failures);
    else
        printf("test_unpickle: all checks passed\n");
    return failures ? 1 : 0;
}
