/* stack_table.h: the agent's table of every distinct stack of the process (stack_table.c): a
 * 64-bit hash of the stack -> its small dense id (1, 2, 3 ...). Looking up takes no lock and is
 * inline here: every event whose stack is not in its thread's cache of recent stacks looks it up.
 *
 * The table is open addressing over 16-byte slots (hash, id) in an anonymous mapping that starts
 * small and doubles when half full, so it costs the program memory in proportion to the stacks
 * it has (a few hundred stacks: a few KiB), not to a fixed size (it was 12 MiB mapped, each new
 * stack touching a page of it at random). A slot's id is written before its hash, so a reader
 * that sees the hash sees the id. The current table and its size are one word (the mapping is
 * page-aligned; its low bits hold log2 of the slot count), published with a release store. */
#ifndef MS_AGENT_STACK_TABLE_H
#define MS_AGENT_STACK_TABLE_H

#include <stdint.h>

struct tstate;

#define STACK_TABLE_PROBES 64 /* slots looked at from a hash's home slot */

struct stack_slot {
    uint64_t hash; /* 0: empty */
    uint32_t id;
    uint32_t epoch; /* --trace-ring: the epoch its STACK record was last written in (writer.c) */
};

extern uintptr_t stack_table_word; /* slots | log2(slot count); 0 before stack_table_init */

/* The id of the stack of hash h (never 0), or 0 when it is not in the table (or was being
 * added, or the table was being emptied or grown just then: stack_table_add() decides). With
 * an id, *epoch is its slot's epoch field (a store there may be lost to a growing table: the
 * stack is then described once more than needed). */
static inline __attribute__((always_inline)) uint32_t stack_table_find(uint64_t h, uint32_t **epoch)
{
    uintptr_t w = __atomic_load_n(&stack_table_word, __ATOMIC_ACQUIRE);
    const struct stack_slot *slot = (const struct stack_slot *)(w & ~(uintptr_t)4095);
    uint32_t mask = (uint32_t)((1ull << (w & 63)) - 1);
    if (!slot)
        return 0;
    uint32_t i = (uint32_t)h & mask;
    for (unsigned probe = 0; probe < STACK_TABLE_PROBES; probe++, i = (i + 1) & mask) {
        uint64_t v = __atomic_load_n(&slot[i].hash, __ATOMIC_ACQUIRE);
        if (v == h) {
            *epoch = (uint32_t *)&slot[i].epoch;
            return __atomic_load_n(&slot[i].id, __ATOMIC_RELAXED);
        }
        if (!v)
            return 0;
    }
    return 0;
}

/* Maps the first table. 0, or a negative errno. */
int stack_table_init(void);

/* The id of the stack of hash h, adding it with the next id when it is new (then *added = 1:
 * the caller describes the stack in the trace before the event that uses it). Takes the
 * table's lock, owned by thread t: 0 (the event goes without a stack) when t itself holds it
 * (a signal handler that interrupted t while it added a stack), when another thread held it too
 * long, or when the table is full. A new slot's epoch field is epoch. */
uint32_t stack_table_add(struct tstate *t, uint64_t h, uint32_t epoch, int *added);

/* Empties the table (its pages go back to the system); ids go on from the last one. */
void stack_table_clear(struct tstate *t);

/* In a forked child (one thread; the lock may have been held by a thread the child does not
 * have): empties the table, and ids start again from 1 (the child's trace file is new). */
void stack_table_after_fork_child(void);

#endif
