/* Exact long options, shared by the tool and the benchmarks. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "options.h"

/* Whether flags (names separated by spaces; NULL: any) holds flag. */
int bkv_flag_listed(const char *flags, const char *flag) {
    if (!flags) return 1;
    size_t n = strlen(flag);
    for (const char *p = flags; (p = strstr(p, flag)) != NULL; p += n)
        if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) return 1;
    return 0;
}

/* Edits (insertions, deletions, substitutions) from a to b, up to 3. */
static int edit_distance(const char *a, const char *b) {
    size_t n = strlen(b);
    if (n > 63) return 3;
    int prev[64], cur[64];
    for (size_t j = 0; j <= n; j++) prev[j] = (int)j;
    for (size_t i = 1; a[i - 1]; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= n; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (n + 1) * sizeof *prev);
    }
    return prev[n] < 3 ? prev[n] : 3;
}

int bkv_exact_options(const char *program, int argc, char **argv, const struct option *opts, const char *flags) {
    const char *cmd = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) return 0;
        if (strncmp(a, "--", 2) != 0) continue;
        size_t len = strcspn(a + 2, "=");
        const struct option *hit = NULL;
        for (const struct option *o = opts; o->name; o++)
            if (strlen(o->name) == len && strncmp(o->name, a + 2, len) == 0) hit = o;
        if (hit) {
            if (hit->has_arg == required_argument && !a[2 + len]) i++; /* its value may start with "--" */
            continue;
        }
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), a + 2);
        const char *best = NULL;
        int best_d = 3;
        for (const struct option *o = opts; o->name; o++) {
            if (!bkv_flag_listed(flags, o->name)) continue;
            int d = strncmp(o->name, name, strlen(name)) == 0 ? 1 : edit_distance(name, o->name);
            if (d < best_d) best_d = d, best = o->name;
        }
        fprintf(stderr, "%s %s: unknown option --%s", program, cmd, name);
        if (best) fprintf(stderr, " (did you mean --%s?)", best);
        fputc('\n', stderr);
        return -1;
    }
    return 0;
}
