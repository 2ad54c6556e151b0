/* stack_text.h: a stack's frames and its text, read from the database's stack tree.
 *
 * The database stores each frame once (frames, strings, modules) and each stack as a path in a
 * tree (stack_nodes: a node is a caller node and a frame; stacks.node_id is the node of the
 * innermost frame, stacks.py_node_id that of the innermost Python frame: a Python frame is a
 * frames row without a module, its function, file and line), as heaptrack and pprof do (docs/database.md, "Stacks"). The text of a
 * stack (memscope_dump's "Call Stack(C)", the viewer's frames, a decompose by stack) is made
 * here, on demand, by the one rule that formats a frame: "function (file:line)", else
 * "function (module+0xoffset)", else "function (0xpc)", "??" for an unknown function.
 *
 * Readers: the viewer (a stack's text), decompose --by-stack, the analyses' call sites (a
 * stack's frames), the full database (stacks.c_text materialized for memscope_dump). Workload:
 * a few stacks to every stack of a run (hundreds of thousands, 50 frames each): the nodes are
 * read one by one at first and all at once when many are asked for; each frame's line is made
 * once. A database of format version 1 (c_text stored, a stack_frames table) reads the same.
 * The database is hostile input: every walk is bounded. */
#ifndef MS_STORE_STACK_TEXT_H
#define MS_STORE_STACK_TEXT_H

#include "common/u64map.h"

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

/* The most frames one stack reads as (inline frames included); a longer chain (a cycle in a
 * damaged database) ends there. */
#define MS_STACK_MAX_FRAMES 4096

/* One frame of a stack, as the database holds it. Strings are owned by the reader and valid
 * until ms_stack_text_release; NULL where the database has NULL. */
struct ms_stack_frame {
    const char *function; /* demangled */
    const char *linkage;  /* a C++ function's mangled name */
    const char *file;
    int line;           /* 0: unknown */
    const char *module; /* the module's path; NULL: the pc is in no module */
    uint64_t offset;    /* pc - the module's bias (with a module) */
    uint64_t pc;
    const char *text; /* the frame's line of c_text (of py_text for a Python frame) */
    int64_t id;       /* the frames row */
    int inline_depth; /* frames.inline_depth: 1, 2 ... the inlined functions of pc, 0 the
                         function that contains them (frames of one pc come innermost first) */
};

struct ms_stack_node {
    int64_t parent, frame;
};

struct ms_stack_text {
    sqlite3 *db;
    int tree; /* the database has stack_nodes (format version 2) */
    sqlite3_stmt *stack, *node, *frame, *old_frames;
    /* nodes: id -> index in node_parent/node_frame; all loaded once many are asked for */
    struct ms_u64map nodes;
    struct ms_stack_node *node_v; /* parent (0: none) and frame id */
    size_t nnodes, anodes, node_reads;
    int all_nodes;
    /* frames: id -> index in fr */
    struct ms_u64map frames;
    struct ms_stack_frame *fr;
    size_t nfr, afr;
    /* the last stack's frame indexes, frames and text */
    uint32_t *walk;
    size_t nwalk, awalk;
    struct ms_stack_frame *out;
    size_t aout;
    char *buf;
    size_t buflen, bufcap;
};

/* Prepares a query over the frames of one stack: `tail` is a SELECT that reads the common table
 * sf(position, frame_id) (position 0 = innermost; inline frames their own positions), with the
 * stack id bound as ?1, e.g. "SELECT f.pc FROM sf JOIN frames f ON f.id = sf.frame_id ORDER BY
 * sf.position". sf walks the stack tree (format version 2) or reads the stack_frames table
 * (version 1). For callers that read a few stacks; ms_stack_text reads many. Returns 0 or MS_EDB
 * (*st NULL). */
int ms_stack_frames_prepare(sqlite3 *db, const char *tail, sqlite3_stmt **st);

/* Starts a reader of db (which must outlive it). Returns 0 or MS_EDB (db is not a memscope
 * database with stacks). */
int ms_stack_text_init(struct ms_stack_text *t, sqlite3 *db);

/* Frees what the reader holds. Accepts NULL. */
void ms_stack_text_release(struct ms_stack_text *t);

/* The frames of stack id, innermost first, in *frames (n of them; valid until the next call on
 * t). A stack without native frames (or an unknown id) has none. Returns 0, MS_ENOMEM or
 * MS_EDB. */
int ms_stack_text_frames(struct ms_stack_text *t, int64_t id, const struct ms_stack_frame **frames,
                         size_t *n);

/* The frames of the Python part of stack id, innermost first, as ms_stack_text_frames gives the
 * native ones (function, file, line; text is the py_text line). None for a stack without a
 * Python part, or whose Python text is stored without frames (a snapshot's stacks). */
int ms_stack_text_py_frames(struct ms_stack_text *t, int64_t id,
                            const struct ms_stack_frame **frames, size_t *n);

/* The native text of stack id (stacks.c_text where the database stores it, else made from its
 * frames): one frame a line, innermost first; "" when it has none. Valid until the next call on
 * t. Returns NULL when out of memory or on a database error. */
const char *ms_stack_text_c(struct ms_stack_text *t, int64_t id);

/* The Python text of stack id (stacks.py_text where the database stores it, else made from the
 * path of its Python part): "file(line): function" a line, innermost first; "" when it has
 * none. Valid until the next call on t; NULL when out of memory or on a database error. */
const char *ms_stack_text_py(struct ms_stack_text *t, int64_t id);

/* Writes stacks.c_text of every stack whose c_text is NULL, and py_text of every stack with a
 * Python part and no py_text (the full database: memscope_dump's
 * "Call Stack(C)" and readers of the table see text). Returns 0 or a negative code with a reason
 * in err. */
int ms_stack_text_fill(sqlite3 *db, char *err, size_t errlen);

#endif
