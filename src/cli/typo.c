/* typo.c: the command a mistyped first word means (cli_mistyped, cli.h): the nearest name by
 * edit distance, unless the word names a program, which msMemScope's form
 * (`memscope [options] prog args`) runs. */
#include "cli.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The optimal string alignment distance between a and b (insertions, deletions, substitutions
 * and swaps of two neighbours, each 1), capped at 9; both are short (a command name, one
 * word of the command line: longer words are 9 away). */
static int edit_distance(const char *a, const char *b)
{
    enum { N = 24 };
    size_t la = strlen(a), lb = strlen(b);
    if (la >= N || lb >= N)
        return 9;
    int d[N][N];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb] < 9 ? d[la][lb] : 9;
}

/* Whether name (no '/') is an executable file in a directory of PATH, as execvp finds it. */
static int on_path(const char *name)
{
    const char *dirs = getenv("PATH");
    char path[PATH_MAX];
    for (const char *s = dirs ? dirs : "/usr/bin:/bin"; s;) {
        const char *e = strchr(s, ':');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        struct stat st;
        if (snprintf(path, sizeof path, "%.*s/%s", (int)n, n ? s : ".", name) < (int)sizeof path &&
            access(path, X_OK) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            return 1;
        s = e ? e + 1 : NULL;
    }
    return 0;
}

const char *cli_mistyped(const char *word, const char *const *names, size_t n)
{
    if (!word[0] || word[0] == '-' || strchr(word, '/') || on_path(word))
        return NULL;
    const char *best = NULL;
    int best_d = 9;
    for (size_t i = 0; i < n; i++) {
        const char *name = names[i];
        int d = edit_distance(word, name);
        if (d < best_d && d <= (strlen(name) <= 4 ? 1 : 2)) {
            best_d = d;
            best = name;
        }
    }
    return best;
}
