/* stack_table.c: the agent's table of distinct stacks (stack_table.h): adding a stack, growing
 * the table, emptying it. Called by stacks.c for stacks that its lock-free lookup did not find:
 * once per distinct stack, plus the rare lookup that raced with an add, so a lock is cheap here.
 *
 * Adding takes the table's lock, looks again, writes the slot (id, then hash) and, when the
 * table is half full, grows it first: a mapping of twice the slots gets every entry and is
 * published; the old one's pages are dropped. A lookup still probing the old mapping reads
 * zeros there, misses, and comes here, where it finds the stack in the new one. Old mappings
 * are never unmapped (such a reader may still be in one): their sizes halve, so together they
 * take less address space than the current one, and no memory. Emptying the table (a library
 * whose stacks were recorded was closed; a forked child) drops its pages the same way.
 *
 * The lock word holds its owner's thread state, so a signal handler that interrupts its own
 * thread while that thread adds a stack gives up (its event goes without a stack) instead of
 * waiting forever; waiting for another thread is bounded the same way. */
#include "agent.h"
#include "stack_table.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MIN_BITS 10 /* 1024 slots: 16 KiB */
#define MAX_BITS 24 /* 16M slots: 256 MiB, for 8M stacks */
#define PAGE_MASK ((uintptr_t)4095)

uintptr_t stack_table_word;
static uintptr_t lock_owner; /* the struct tstate of the thread holding the lock, 0: free */
static uint32_t count;       /* stacks in the current table; under the lock */
static uint32_t last_id;     /* under the lock */

static struct stack_slot *slots_of(uintptr_t w)
{
    return (struct stack_slot *)(w & ~PAGE_MASK);
}

static size_t bytes_of(unsigned bits)
{
    return ((size_t)1 << bits) * sizeof(struct stack_slot);
}

static uintptr_t map_table(unsigned bits)
{
    void *m = sys_mmap(NULL, bytes_of(bits), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return m == MAP_FAILED ? 0 : (uintptr_t)m | bits;
}

int stack_table_init(void)
{
    uintptr_t w = map_table(MIN_BITS);
    if (!w)
        return -errno;
    __atomic_store_n(&stack_table_word, w, __ATOMIC_RELEASE);
    return 0;
}

/* 1 when thread t took the lock; 0 when t holds it already or another thread held it for
 * about 20,000 yields of the CPU. */
static int lock_take(struct tstate *t)
{
    uintptr_t me = (uintptr_t)t;
    for (int spin = 0; spin < 1000 + 20000; spin++) {
        uintptr_t cur = 0;
        if (__atomic_compare_exchange_n(&lock_owner, &cur, me, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return 1;
        if (cur == me)
            return 0;
        if (spin < 1000)
            __builtin_ia32_pause();
        else
            syscall(SYS_sched_yield); /* a raw system call: no libc state, signal-safe */
    }
    return 0;
}

static void lock_drop(void)
{
    __atomic_store_n(&lock_owner, 0, __ATOMIC_RELEASE);
}

/* The slot for hash h in table w: the one holding it, or the empty one where it goes; NULL
 * when neither is within STACK_TABLE_PROBES slots. */
static struct stack_slot *slot_for(uintptr_t w, uint64_t h)
{
    struct stack_slot *slot = slots_of(w);
    uint32_t mask = (uint32_t)((1ull << (w & 63)) - 1);
    uint32_t i = (uint32_t)h & mask;
    for (unsigned probe = 0; probe < STACK_TABLE_PROBES; probe++, i = (i + 1) & mask)
        if (slot[i].hash == h || slot[i].hash == 0)
            return &slot[i];
    return NULL;
}

/* Doubles the table (under the lock). Keeps the old one when it cannot map a new one. */
static void grow(uintptr_t old)
{
    unsigned bits = (unsigned)(old & 63);
    if (bits >= MAX_BITS)
        return;
    uintptr_t w = map_table(bits + 1);
    if (!w)
        return;
    const struct stack_slot *from = slots_of(old);
    for (size_t i = 0; i < ((size_t)1 << bits); i++) {
        if (!from[i].hash)
            continue;
        struct stack_slot *to = slot_for(w, from[i].hash);
        if (to) /* always: the new table is a quarter full */
            *to = from[i];
    }
    __atomic_store_n(&stack_table_word, w, __ATOMIC_RELEASE);
    madvise(slots_of(old), bytes_of(bits), MADV_DONTNEED);
}

uint32_t stack_table_add(struct tstate *t, uint64_t h, uint32_t epoch, int *added)
{
    *added = 0;
    int saved_errno = errno; /* the program's: this runs inside its malloc (grow's calls) */
    if (!lock_take(t))
        return 0;
    uintptr_t w = __atomic_load_n(&stack_table_word, __ATOMIC_RELAXED);
    struct stack_slot *slot = w ? slot_for(w, h) : NULL;
    uint32_t id = 0;
    if (slot && slot->hash == h) {
        id = slot->id;
    } else if (w) {
        if (count + 1 > ((uint32_t)1 << (w & 63)) / 2) {
            grow(w);
            w = __atomic_load_n(&stack_table_word, __ATOMIC_RELAXED);
            slot = slot_for(w, h);
        }
        if (slot) {
            id = ++last_id;
            __atomic_store_n(&slot->id, id, __ATOMIC_RELAXED);
            __atomic_store_n(&slot->epoch, epoch, __ATOMIC_RELAXED);
            __atomic_store_n(&slot->hash, h, __ATOMIC_RELEASE);
            count++;
            *added = 1;
        }
    }
    lock_drop();
    errno = saved_errno;
    return id;
}

static void drop_all(void)
{
    uintptr_t w = __atomic_load_n(&stack_table_word, __ATOMIC_RELAXED);
    if (w)
        madvise(slots_of(w), bytes_of((unsigned)(w & 63)), MADV_DONTNEED);
    count = 0;
}

void stack_table_clear(struct tstate *t)
{
    int saved_errno = errno;
    /* Emptied even without the lock (another thread held it too long): an add racing with it
     * at worst leaves one entry in the emptied table, an id that stays right. */
    int locked = lock_take(t);
    drop_all();
    if (locked)
        lock_drop();
    errno = saved_errno;
}

void stack_table_after_fork_child(void)
{
    lock_owner = 0;
    drop_all();
    last_id = 0;
}
