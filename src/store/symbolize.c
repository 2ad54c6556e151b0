/* symbolize.c: libdw-based symbolization of return addresses (see symbolize.h).
 *
 * Follows what heaptrack and perf do: dwfl_report_elf() for each module with its load bias,
 * dwfl_module_addrname() for the ELF symbol, dwarf_getsrc_die() on the CU for file:line, and
 * dwarf_getscopes() and dwarf_getscopes_die() to expand the chain of inlined subroutines (each
 * inlined scope's DW_AT_call_file/DW_AT_call_line is the location in its caller). Workload: one lookup per
 * distinct pc per process, typically thousands to a few hundred thousand. */
#include "symbolize.h"

#include "common/ms_error.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *debuginfo_path;

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* 1 when nothing at path, or a regular file: libdw opens what it finds without O_NONBLOCK,
 * and an open of a FIFO (a trace names any path, a program's debug link any name) waits for a
 * writer for ever. */
static int nothing_or_regular(const char *path)
{
    struct stat st;
    return stat(path, &st) < 0 || S_ISREG(st.st_mode);
}

/* libdw's standard search for a module's separate debugging information, unless a file it
 * would try by the module's debug link (beside the module, in its .debug, under /usr/lib/debug)
 * is something other than a regular file: then the module has none (its symbols still name its
 * functions). */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    if (file_name) {
        char dir[PATH_MAX], link[NAME_MAX + 1], cand[2 * PATH_MAX + NAME_MAX];
        const char *slash = strrchr(file_name, '/');
        size_t n = slash ? (size_t)(slash - file_name) : 0;
        if (n >= sizeof dir)
            return -1;
        memcpy(dir, file_name, n);
        dir[n] = 0;
        /* the debug link's name, or the module's own with ".debug" where it has none */
        if ((size_t)snprintf(link, sizeof link, "%s%s",
                             debuglink_file ? debuglink_file : base_name(file_name),
                             debuglink_file ? "" : ".debug") >= sizeof link)
            return -1;
        snprintf(cand, sizeof cand, "%s/%s", dir, link);
        int ok = nothing_or_regular(cand);
        snprintf(cand, sizeof cand, "%s/.debug/%s", dir, link);
        ok = ok && nothing_or_regular(cand);
        snprintf(cand, sizeof cand, "/usr/lib/debug%s/%s", dir, link);
        ok = ok && nothing_or_regular(cand);
        if (!ok || (link[0] == '/' && !nothing_or_regular(link)))
            return -1;
    }
    return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                        debuglink_crc, debuginfo_file_name);
}

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

static int cmp_mod(const void *a, const void *b)
{
    const struct ms_sym_module *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

int ms_symbolizer_init(struct ms_symbolizer *s, struct ms_symcache *cache,
                       const struct ms_sym_module *mods, size_t n)
{
    memset(s, 0, sizeof *s);
    if (n) {
        s->mods = malloc(n * sizeof *s->mods);
        if (!s->mods)
            return MS_ENOMEM;
        memcpy(s->mods, mods, n * sizeof *mods);
        qsort(s->mods, n, sizeof *s->mods, cmp_mod);
    }
    s->nmods = n;
    s->cache = cache;
    return 0;
}

/* A module's ELF function symbols sorted by address. libdw's dwfl_module_addrname() scans the
 * whole symbol table for every lookup, which takes minutes on libtorch (10^5 symbols, 10^4
 * distinct pcs); this table is built once per module and binary-searched. */
struct sym_entry {
    uint64_t addr, size;
    const char *name; /* borrowed from libdw */
    int rank;         /* among aliases at one address, the highest names the function */
};

/* One ELF file of the cache: its libdw session (the file alone, at bias 0) and its symbols. */
struct ms_symfile {
    char *path;
    Dwfl *dwfl; /* NULL when the file could not be read */
    Dwfl_Module *mod;
    struct sym_entry *e; /* function symbols sorted by address, then rank */
    size_t n;
    int oom; /* its symbols could not be read for lack of memory: lookups fail */
};

void ms_symcache_init(struct ms_symcache *c)
{
    memset(c, 0, sizeof *c);
}

void ms_symcache_release(struct ms_symcache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nfiles; i++) {
        free(c->files[i].path);
        free(c->files[i].e);
        if (c->files[i].dwfl)
            dwfl_end(c->files[i].dwfl);
    }
    free(c->files);
    memset(c, 0, sizeof *c);
}

static int cmp_sym(const void *a, const void *b)
{
    const struct sym_entry *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank > y->rank ? -1 : 1;
    return x->size > y->size ? -1 : x->size < y->size; /* the sized one first */
}

/* Exported over hidden (glibc's __GI_ names), global over weak over local; the default
 * version (name@@V) over an unversioned name over an old version (name@V). */
static int sym_rank(const GElf_Sym *sym, const char *name)
{
    int bind = GELF_ST_BIND(sym->st_info);
    int r = GELF_ST_VISIBILITY(sym->st_other) == STV_DEFAULT ? 10 : 0;
    r += bind == STB_GLOBAL ? 6 : bind == STB_WEAK ? 3 : 0;
    const char *at = strchr(name, '@');
    return r + (!at ? 1 : at[1] == '@' ? 2 : 0);
}

/* Reads mod's function symbols into f, sorted (best-ranked alias first). */
static void load_symbols(struct ms_symfile *f)
{
    int n = dwfl_module_getsymtab(f->mod);
    if (n <= 0)
        return;
    if (!(f->e = malloc((size_t)n * sizeof *f->e))) {
        f->oom = 1;
        return;
    }
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        const char *name = dwfl_module_getsym_info(f->mod, i, &sym, &addr, NULL, NULL, NULL);
        if (!name || !*name || GELF_ST_TYPE(sym.st_info) != STT_FUNC || !addr)
            continue;
        f->e[f->n++] = (struct sym_entry){addr, sym.st_size, name, sym_rank(&sym, name)};
    }
    if (f->n)
        qsort(f->e, f->n, sizeof *f->e, cmp_sym);
}

/* The cache entry of path, opened on first use; NULL when out of memory. An unreadable file
 * gets an entry with no session, so it is tried once. */
static struct ms_symfile *symfile(struct ms_symcache *c, const char *path)
{
    for (size_t i = 0; i < c->nfiles; i++) /* NEEDSWORK: linear; files per run are few */
        if (!strcmp(c->files[i].path, path))
            return &c->files[i];
    if (c->nfiles == c->afiles) {
        size_t na = c->afiles ? c->afiles * 2 : 64;
        struct ms_symfile *f = realloc(c->files, na * sizeof *f);
        if (!f)
            return NULL;
        c->files = f;
        c->afiles = na;
    }
    struct ms_symfile *f = &c->files[c->nfiles];
    memset(f, 0, sizeof *f);
    if (!(f->path = strdup(path)))
        return NULL;
    c->nfiles++;
    if (path[0] != '/')
        return f; /* [vdso] and the like: no file to read */
    /* Only a regular file: opened without waiting (a FIFO's open would wait for a writer),
     * checked, then handed to libdw, which closes it with the module. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0)
        return f;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return f; /* its frames keep their addresses */
    }
    Dwfl *dwfl = dwfl_begin(&callbacks);
    if (!dwfl) {
        close(fd);
        return f;
    }
    dwfl_report_begin(dwfl);
    Dwfl_Module *mod = dwfl_report_elf(dwfl, base_name(path), path, fd, 0, false);
    dwfl_report_end(dwfl, NULL, NULL);
    if (!mod) {
        close(fd); /* libdw closes it only with a module */
        dwfl_end(dwfl);
        return f;
    }
    f->dwfl = dwfl;
    f->mod = mod;
    load_symbols(f);
    return f;
}

/* The function symbol holding addr: the last one starting at or before it, if addr is inside
 * its size (or it has no size). NULL when none. */
static const char *sym_lookup(struct ms_symfile *t, uint64_t addr)
{
    if (!t->n)
        return dwfl_module_addrname(t->mod, addr); /* no table: libdw's own lookup */
    size_t lo = 0, hi = t->n;
    while (lo < hi) { /* first entry starting after addr */
        size_t mid = lo + (hi - lo) / 2;
        if (t->e[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    size_t g = lo - 1; /* the aliases at that address, best ranked first */
    while (g > 0 && t->e[g - 1].addr == t->e[lo - 1].addr)
        g--;
    for (size_t i = g; i < lo; i++) {
        const struct sym_entry *e = &t->e[i];
        if (addr < e->addr + e->size || e->size == 0)
            return e->name;
    }
    /* addr is past that symbol's end: inside an earlier, larger one, if any. */
    for (size_t i = g; i-- > 0 && g - i <= 16;)
        if (addr < t->e[i].addr + t->e[i].size)
            return t->e[i].name;
    return NULL;
}

void ms_symbolizer_release(struct ms_symbolizer *s)
{
    if (!s)
        return;
    free(s->mods);
    memset(s, 0, sizeof *s);
}

const struct ms_sym_module *ms_symbolizer_module(const struct ms_symbolizer *s, uint64_t pc)
{
    size_t lo = 0, hi = s->nmods;
    while (lo < hi) { /* first module with lo > pc */
        size_t mid = lo + (hi - lo) / 2;
        if (s->mods[mid].lo <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* Modules may overlap in a damaged trace; take the nearest one that holds pc. */
    for (size_t i = lo; i-- > 0;) {
        if (pc < s->mods[i].hi)
            return &s->mods[i];
        if (lo - i > 8)
            break;
    }
    return NULL;
}

/* A function's name from its DIE or its abstract origin's: the linkage (mangled) name when it
 * has one, which the conversion demangles into the qualified C++ name, else the plain name. */
static const char *die_name(Dwarf_Die *die)
{
    Dwarf_Attribute attr;
    const char *name = NULL;
    if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
        dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr))
        name = dwarf_formstring(&attr);
    return name ? name : dwarf_diename(die);
}

/* Returns the name of a file index of the CU, or NULL. */
static const char *cu_file(Dwarf_Die *cudie, Dwarf_Word idx)
{
    Dwarf_Files *files;
    size_t nfiles;
    if (dwarf_getsrcfiles(cudie, &files, &nfiles) != 0 || idx >= nfiles)
        return NULL;
    return dwarf_filesrc(files, idx, NULL, NULL);
}

/* The CU holding addr when libdw's own lookup found none: elfutils before 0.189 finds CUs
 * through .debug_aranges only, which clang does not emit. NEEDSWORK: a linear scan over the
 * module's CUs per pc; cache a sorted range table per module if this shows up in profiles. */
static Dwarf_Die *find_cu(Dwfl_Module *mod, Dwarf_Addr addr, Dwarf_Addr *bias)
{
    Dwarf_Die *cu = NULL;
    while ((cu = dwfl_module_nextcu(mod, cu, bias)))
        if (dwarf_haspc(cu, addr - *bias) == 1)
            return cu;
    return NULL;
}

int ms_symbolizer_lookup(struct ms_symbolizer *s, uint64_t pc, struct ms_sym_frame *out)
{
    out[0].func = NULL;
    out[0].file = NULL;
    out[0].line = 0;
    if (!s->cache || pc == 0)
        return 1;
    const struct ms_sym_module *m = ms_symbolizer_module(s, pc - 1);
    struct ms_symfile *f = m ? symfile(s->cache, m->path) : NULL;
    if (m && (!f || f->oom))
        return MS_ENOMEM; /* not an unknown function: the conversion must fail */
    if (!f || !f->mod)
        return 1;
    /* The file is loaded at bias 0 in its session: look up the address in file terms. */
    Dwarf_Addr addr = pc - 1 - m->bias;
    Dwfl_Module *mod = f->mod;
    const char *sym = sym_lookup(f, addr);
    const char *file = NULL;
    int line = 0;
    Dwarf_Addr bias;
    Dwarf_Die *cudie = dwfl_module_addrdie(mod, addr, &bias);
    if (!cudie)
        cudie = find_cu(mod, addr, &bias);
    if (cudie) {
        Dwarf_Line *l = dwarf_getsrc_die(cudie, addr - bias);
        if (l) {
            file = dwarf_linesrc(l, NULL, NULL);
            dwarf_lineno(l, &line);
        }
    }

    /* The chain of inlined calls: dwarf_getscopes() gives the innermost scope holding the
     * address (after the first inlined instance it goes on with the scopes of that function's
     * abstract definition, not with the code it was inlined into); dwarf_getscopes_die() on that
     * innermost scope gives its physical parents: each inlined instance, out to the concrete
     * function. Each level's line is where the level inside it was inlined (call_file,
     * call_line), as addr2line -i prints them. */
    int n = 0;
    Dwarf_Die *scopes = NULL, *chain = NULL;
    int nscopes = cudie ? dwarf_getscopes(cudie, addr - bias, &scopes) : 0;
    int nchain = nscopes > 0 ? dwarf_getscopes_die(&scopes[0], &chain) : 0;
    if (nchain <= 0) { /* no parents found: the scopes as they are */
        free(chain);
        chain = NULL;
        nchain = nscopes > 0 ? nscopes : 0;
    }
    Dwarf_Die *levels = chain ? chain : scopes;
    for (int i = 0; i < nchain && n < MS_SYM_MAX_INLINE - 1; i++) {
        int tag = dwarf_tag(&levels[i]);
        if (tag == DW_TAG_subprogram) {
            if (!sym)
                sym = die_name(&levels[i]);
            break;
        }
        if (tag != DW_TAG_inlined_subroutine)
            continue;
        out[n].func = die_name(&levels[i]);
        out[n].file = file;
        out[n].line = line;
        n++;
        /* The caller's location is where this subroutine was inlined. */
        Dwarf_Attribute attr;
        Dwarf_Word v;
        file = NULL;
        line = 0;
        if (dwarf_formudata(dwarf_attr(&levels[i], DW_AT_call_file, &attr), &v) == 0)
            file = cu_file(cudie, v);
        if (dwarf_formudata(dwarf_attr(&levels[i], DW_AT_call_line, &attr), &v) == 0)
            line = (int)v;
    }
    free(chain);
    free(scopes);
    out[n].func = sym;
    out[n].file = file;
    out[n].line = line;
    return n + 1;
}
