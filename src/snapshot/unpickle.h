/* unpickle.h: a data-only pickle reader (protocols 2 to 5) for PyTorch memory snapshots.
 *
 * Design. The input is hostile. The reader is a stack machine over the opcodes that build
 * plain data (None, bool, int of any width, float, str, bytes, list, tuple, dict, set) and
 * refuses every opcode that would import a name or call something (GLOBAL, STACK_GLOBAL,
 * REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, PERSID, BINPERSID, EXT1/2/4) with MS_EREFUSED
 * and a message naming the opcode and its byte offset. Nothing in the input is ever executed.
 *
 * Values are 8-byte tagged words (ms_pv). Small ints, None/bools, memo references and short
 * strings (a slice of the input: offset and length) live in the word itself; containers,
 * floats, wide ints and long strings are objects in an arena owned by the reader. Memo sharing
 * is kept as sharing: BINGET pushes a reference to the memo slot, never a copy, so a frame
 * list referenced 700,000 times is one object and memory stays proportional to the input.
 * Lists and tuples whose items are all memo references store them as 32-bit slot numbers;
 * dicts whose keys are all memo references share their keys (a "shape") and store only their
 * values.
 * A memo slot is written once (a second PUT to the same slot is refused), so a reference
 * always means what it meant when it was taken. Containers may be cyclic or shared: walkers
 * must follow a fixed schema or bound their depth and the nodes they visit.
 *
 * Caps (struct ms_unpickle_caps, set at init): nesting of unfinished containers (the mark
 * stack), value stack entries, bytes of one str/bytes/int, items of one container, memo
 * slots (also at most the input length) and bytes of arena memory. Lengths are 32-bit: the
 * item and byte caps are clamped to 2^32 - 1. Every declared length is
 * checked against the bytes present before it is used. Work is linear in the input.
 *
 * Callers: snapshot.c (and json.c, which builds the same values from JSON text), the fuzz
 * target. Workload: snapshot pickles from kilobytes to several gigabytes. */
#ifndef MS_SNAPSHOT_UNPICKLE_H
#define MS_SNAPSHOT_UNPICKLE_H

#include <stddef.h>
#include <stdint.h>

typedef uint64_t ms_pv;

enum ms_pv_type {
    MS_PV_ABSENT = 0, /* "no value" (a missing dict key, an index out of range) */
    MS_PV_NONE,
    MS_PV_BOOL,
    MS_PV_INT,    /* fits in int64 */
    MS_PV_BIGINT, /* wider than int64: raw little-endian two's complement bytes */
    MS_PV_FLOAT,
    MS_PV_STR, /* UTF-8 */
    MS_PV_BYTES,
    MS_PV_LIST,
    MS_PV_TUPLE,
    MS_PV_DICT,
    MS_PV_SET,
};

/* The absent value (also what a zeroed ms_pv is). */
#define MS_PV_ABSENT_VALUE ((ms_pv)0x7)

struct ms_unpickle_caps {
    uint32_t max_depth;  /* unfinished containers (MARKs) open at once; default 1000 */
    uint64_t max_stack;  /* value stack entries; default 1 << 26 */
    uint64_t max_bytes;  /* bytes of one str, bytes or int; default 1 << 30 */
    uint64_t max_items;  /* items of one container; default 1 << 30 */
    uint64_t max_memo;   /* memo slots (also capped by the input length); default 1 << 31 */
    uint64_t max_memory; /* arena bytes; default 64 GiB (0 in a field means the default) */
};

struct ms_pv_arena_chunk;
struct ms_pv_shape;

/* One reader and the values it built. The caller owns the struct; values stay valid until
 * ms_unpickle_release(). The input bytes are not copied: they must outlive the values. */
struct ms_unpickle {
    struct ms_unpickle_caps caps;
    const unsigned char *buf; /* the input (pickle or JSON text) */
    size_t len;
    int protocol;    /* from PROTO; 0 when the stream had none; -1 for JSON */
    ms_pv root;      /* the loaded value after a successful load */
    int drop_behind; /* set by the caller when buf is a private read-only file
                               * mapping: parsed pages are dropped (MADV_DONTNEED) as the
                               * reader moves on, so the file does not stay resident; pages
                               * touched again later are re-read from the file */

    /* internals */
    ms_pv *memo;
    uint64_t memo_len;
    size_t memo_cap;
    ms_pv *stack;
    uint64_t stack_len;
    size_t stack_cap;
    uint64_t *marks;
    uint32_t marks_len;
    size_t marks_cap;
    struct ms_pv_shape **shapes; /* dict key shapes (unpickle.c) */
    uint32_t nshapes, shape_slots_cap;
    size_t shapes_cap;
    uint32_t *shape_slots;
    struct ms_pv_arena_chunk *chunks;
    unsigned char *cur, *end; /* free space in the current chunk */
    uint64_t mem_used;

    char err[256]; /* why the last load failed, "" after success */
    uint64_t err_offset;
};

/* Prepares u with caps (NULL: defaults; zero fields: their defaults). Never fails. */
void ms_unpickle_init(struct ms_unpickle *u, const struct ms_unpickle_caps *caps);

/* Loads one pickle from len bytes at buf (which must outlive u's values) into u->root.
 * Returns 0, or MS_EREFUSED (an opcode that imports or calls), MS_EFORMAT (bad or unknown
 * opcode, bad UTF-8, type errors such as APPENDS on a non-list), MS_ETRUNC (input ends
 * early), MS_EVERSION (protocol above 5), MS_ELIMIT (a cap) or MS_ENOMEM; u->err then says
 * why and u->err_offset where (byte offset of the opcode). May be called once per init. */
int ms_unpickle_load(struct ms_unpickle *u, const void *buf, size_t len);

/* Frees every value and internal buffer; u may be init'ed again. Accepts a zeroed struct. */
void ms_unpickle_release(struct ms_unpickle *u);

/* --- Reading values. All accept any ms_pv, including references and ABSENT. --- */

enum ms_pv_type ms_pv_type(const struct ms_unpickle *u, ms_pv v);

/* Integer value of an INT (or a BIGINT that fits, or a bool as 0/1). Returns 0 and sets *out,
 * or -1 when v is not an integer or does not fit int64. */
int ms_pv_int(const struct ms_unpickle *u, ms_pv v, int64_t *out);

/* Float value of a FLOAT or integer. Returns 0 or -1. */
int ms_pv_float(const struct ms_unpickle *u, ms_pv v, double *out);

/* Truth of a bool (ints: nonzero). Returns 0/1, or -1 when v is neither. */
int ms_pv_bool(const struct ms_unpickle *u, ms_pv v);

/* Bytes of a STR or BYTES (not NUL-terminated; valid while u is); NULL for other types.
 * BIGINT: its raw bytes. */
const char *ms_pv_str(const struct ms_unpickle *u, ms_pv v, size_t *len);

/* 1 if v is a STR equal to the NUL-terminated s. */
int ms_pv_str_eq(const struct ms_unpickle *u, ms_pv v, const char *s);

/* Number of items of a LIST, TUPLE, SET or DICT (pairs); 0 for other types. */
uint64_t ms_pv_len(const struct ms_unpickle *u, ms_pv v);

/* Item i of a LIST, TUPLE or SET; ABSENT when out of range or not a sequence. */
ms_pv ms_pv_item(const struct ms_unpickle *u, ms_pv v, uint64_t i);

/* Key and value of pair i of a DICT (insertion order, duplicates kept). */
ms_pv ms_pv_dict_key(const struct ms_unpickle *u, ms_pv v, uint64_t i);
ms_pv ms_pv_dict_value(const struct ms_unpickle *u, ms_pv v, uint64_t i);

/* The value of the last pair whose key is the STR key; ABSENT if none or v is no DICT. */
ms_pv ms_pv_dict_get(const struct ms_unpickle *u, ms_pv v, const char *key);

/* A 32-bit word inside a container object that the caller may use as a cache (initially 0);
 * NULL for values that are not container objects. */
uint32_t *ms_pv_user(const struct ms_unpickle *u, ms_pv v);

/* A number shared by the dicts whose keys are the same memo references in the same order
 * (1-based), 0 for dicts that keep their own keys and for other values. Readers of many
 * dicts of one kind use it to match keys once per shape. */
uint32_t ms_pv_dict_shape(const struct ms_unpickle *u, ms_pv v);

/* out[i] = ms_pv_dict_value(u, v, at[i]) for i < n; ABSENT where at[i] < 0 or out of range. */
void ms_pv_dict_values(const struct ms_unpickle *u, ms_pv v, const int32_t *at, int n, ms_pv *out);

/* For each item i of the LIST, TUPLE or SET v, writes to out[i] the item's user word
 * (ms_pv_user()) if it is a DICT, else 0; out holds ms_pv_len() words. Nothing for other
 * values. */
void ms_pv_seq_users(const struct ms_unpickle *u, ms_pv v, uint32_t *out);

/* Identity of a container (equal for the same shared object), 0 for non-containers. */
uintptr_t ms_pv_identity(const struct ms_unpickle *u, ms_pv v);

/* --- Building values (used by the JSON reader; u must be init'ed, buf set). --- */

/* Allocates n bytes in u's arena (8-aligned). NULL when over caps.max_memory or out of
 * memory. */
void *ms_pv_alloc(struct ms_unpickle *u, size_t n);
ms_pv ms_pv_make_int(struct ms_unpickle *u, int64_t i);  /* ABSENT on ENOMEM */
ms_pv ms_pv_make_float(struct ms_unpickle *u, double f); /* ABSENT on ENOMEM */
ms_pv ms_pv_make_special(enum ms_pv_type t, int truth);  /* NONE or BOOL */
/* A STR over n bytes at p, which must lie in u->buf or in u's arena. ABSENT on ENOMEM. */
ms_pv ms_pv_make_str(struct ms_unpickle *u, const char *p, size_t n);
/* A LIST (or TUPLE) or DICT from n values (DICT: n/2 pairs, key then value) copied from
 * items. ABSENT on ENOMEM. */
ms_pv ms_pv_make_seq(struct ms_unpickle *u, enum ms_pv_type t, const ms_pv *items, uint64_t n);

/* Internal: 0 if n bytes at s are UTF-8 as Python's 'surrogatepass' decoder accepts, else -1. */
int ms__utf8_check(const unsigned char *s, size_t n);

#endif
