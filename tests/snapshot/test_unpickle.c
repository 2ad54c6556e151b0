/* test_unpickle.c: unit tests of the data-only unpickler, the JSON reader and the snapshot
 * model on hand-made inputs. Optional argv[1]: a good fixture pickle whose prefixes must all
 * fail cleanly (truncation). Prints one line per failed check; exit status 1 on failure. */
#include "error.h"
#include "json.h"
#include "snapshot.h"
#include "unpickle.h"

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

int main(int argc, char **argv)
{
    test_scalars();
    test_memo_sharing();
    test_refusals();
    test_caps();
    test_truncation(argc > 1 ? argv[1] : NULL);
    test_json();
    test_model();
    if (failures)
        fprintf(stderr, "test_unpickle: %d checks failed\n", failures);
    else
        printf("test_unpickle: all checks passed\n");
    return failures ? 1 : 0;
}
