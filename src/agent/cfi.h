/* cfi.h: reading a module's call-frame information (.eh_frame through .eh_frame_hdr's table),
 * cfi.c, apart from the walk that uses it (unwind.c). Reads only memory inside the module's
 * mapped range; no locks, allocation or system calls (it runs on the hook's path). */
#ifndef MS_AGENT_CFI_H
#define MS_AGENT_CFI_H

#include <stdint.h>

/* A module as the unwinder knows it. */
struct cfi_module {
    uintptr_t lo, hi;     /* the PT_LOAD segments' range (bounds of .eh_frame reads) */
    uintptr_t xlo, xhi;   /* the executable (PF_X) segments' range: where a return address is */
    const uint8_t *table; /* .eh_frame_hdr's search table: (initial pc, FDE) pairs */
    uintptr_t hdr;        /* .eh_frame_hdr's address: the table's values are relative */
    uint32_t count;       /* entries */
};

/* A frame's rule (unwind.c packs it into 28 bits for its caches). */
enum {
    CFA_RSP = 1,
    CFA_RBP = 2,
    CFA_STOP = 3,   /* a real frame, but nothing above it that this unwinder can read */
    CFA_SIGNAL = 4, /* the kernel's signal trampoline: the interrupted frame is in the ucontext */
};
struct rule {
    int32_t cfa_off;
    uint8_t cfa; /* CFA_* */
    uint8_t rbp_saved;
    int16_t rbp_off; /* the caller's rbp at CFA + rbp_off when rbp_saved */
};

/* The rule of the frame whose code is at pc (a return address minus one) in module m, whose
 * executable range holds pc: CFA_STOP when its FDE is missing, damaged or uses what this
 * reader does not handle. */
void cfi_rule(const struct cfi_module *m, uintptr_t pc, struct rule *r);

#endif
