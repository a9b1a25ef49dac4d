/*
 * `bloomkv shell DB`: the tool's commands on one database, one line each,
 * the database named once. Interactive on a terminal (line editing,
 * history in ~/.bloomkv_history and completion of commands, through
 * libedit when the build has it), or reading commands from standard input
 * for scripts. Each command opens the database for its own duration, as
 * the same command would from the shell prompt: between commands the
 * shell holds nothing, so other processes may open the database.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#ifdef BKV_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

typedef struct shell_command {
    const char *name;
    int (*run)(int argc, char **argv);
    int db_after; /* the database goes after this many words (value-index: after build|drop) */
} shell_command;

static const shell_command commands[] = {
    {"put", bkv_cli_put, 1},         {"get", bkv_cli_get, 1},         {"delete", bkv_cli_delete, 1},
    {"scan", bkv_cli_scan, 1},       {"load", bkv_cli_load, 1},       {"find-value", bkv_cli_find_value, 1},
    {"stats", bkv_cli_stats, 1},     {"compact", bkv_cli_compact, 1}, {"checkpoint", bkv_cli_checkpoint, 1},
    {"check", bkv_cli_check, 1},     {"value-index", bkv_cli_value_index, 2},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])
#define MAX_WORDS 256

static void shell_help(void) {
    printf("commands (the database is implied):");
    for (size_t i = 0; i < NCOMMANDS; i++) printf(" %s", commands[i].name);
    printf("\n'help CMD' describes one; 'quit' (or end of input) leaves. Words may be quoted with ' or \", and\n"
           "a backslash takes the next character as it is.\n");
}

/* Splits line into words in place: blanks separate, quotes group, a
 * backslash takes the next byte literally. -1 on an unclosed quote. */
static int split(char *line, char **words, int max) {
    int n = 0;
    char *in = line, *out = line;
    while (*in) {
        while (*in && isspace((unsigned char)*in)) in++;
        if (!*in) break;
        if (n == max) return -1;
        words[n++] = out;
        char quote = 0;
        while (*in && (quote || !isspace((unsigned char)*in))) {
            if (quote && *in == quote) quote = 0, in++;
            else if (!quote && (*in == '\'' || *in == '"')) quote = *in++;
            else if (*in == '\\' && in[1] && quote != '\'') in++, *out++ = *in++;
            else *out++ = *in++;
        }
        if (quote) return -1;
        if (*in) in++;
        *out++ = 0;
    }
    return n;
}

/* Runs one line; its exit status (-1: quit). */
static int run_line(const char *db, char *line) {
    char *words[MAX_WORDS + 2];
    int n = split(line, words, MAX_WORDS);
    if (n < 0) {
        fprintf(stderr, "bloomkv shell: an unclosed quote, or more than %d words\n", MAX_WORDS);
        return 2;
    }
    if (n == 0 || words[0][0] == '#') return 0;
    if (!strcmp(words[0], "quit") || !strcmp(words[0], "exit")) return -1;
    if (!strcmp(words[0], "help") && n == 1) {
        shell_help();
        return 0;
    }
    const char *name = !strcmp(words[0], "help") ? words[1] : words[0];
    const shell_command *c = NULL;
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(name, commands[i].name)) c = &commands[i];
    if (!c) {
        fprintf(stderr, "bloomkv shell: no command '%s' here ('help' lists them; run others as bloomkv %s)\n", name,
                name);
        return 2;
    }
    if (!strcmp(words[0], "help")) return c->run(2, (char *[]){(char *)c->name, "--help", NULL});
    /* The database goes in where the tool's own syntax has it. */
    char *argv[MAX_WORDS + 2];
    int at = 0, db_after = c->db_after <= n ? c->db_after : n;
    for (int i = 0; i < db_after; i++) argv[at++] = words[i];
    argv[at++] = (char *)db;
    for (int i = db_after; i < n; i++) argv[at++] = words[i];
    argv[at] = NULL;
    int rc = c->run(at, argv);
    fflush(stdout);
    return rc;
}

#ifdef BKV_HAVE_LIBEDIT
static char *command_generator(const char *text, int state) {
    static size_t next;
    if (!state) next = 0;
    while (next < NCOMMANDS) {
        const char *name = commands[next++].name;
        if (!strncmp(name, text, strlen(text))) return strdup(name);
    }
    return NULL;
}

/* Completes a command in the first word; file names elsewhere. */
static char **complete(const char *text, int start, int end) {
    (void)end;
    if (start == 0) return rl_completion_matches(text, command_generator);
    return NULL;
}
#endif

int bkv_cli_shell(int argc, char **argv) {
    if (argc != 2 || !strcmp(argv[1], "--help") || argv[1][0] == '-') {
        FILE *out = argc == 2 && !strcmp(argv[1], "--help") ? stdout : stderr;
        fprintf(out, "usage: bloomkv shell DB\n  the commands of this tool on DB, one a line (DB left out): "
                     "interactive on a terminal, else read from stdin; 'help' lists them, 'quit' leaves\n");
        return out == stdout ? 0 : 2;
    }
    const char *db = argv[1];
    int interactive = isatty(STDIN_FILENO), rc = 0;
#ifdef BKV_HAVE_LIBEDIT
    char history[4096] = "";
    if (interactive) {
        const char *home = getenv("HOME");
        if (home) snprintf(history, sizeof history, "%s/.bloomkv_history", home);
        rl_readline_name = "bloomkv";
        rl_attempted_completion_function = complete;
        using_history();
        if (history[0]) read_history(history);
        printf("bloomkv shell on %s: 'help' lists the commands, 'quit' leaves\n", db);
        char *line;
        while ((line = readline("bloomkv> ")) != NULL) {
            if (*line) add_history(line);
            int r = run_line(db, line);
            free(line);
            if (r < 0) break;
            rc = r;
        }
        if (history[0]) write_history(history);
        return rc;
    }
#endif
    if (interactive) printf("bloomkv shell on %s: 'help' lists the commands, 'quit' leaves\n", db);
    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        if (interactive) {
            printf("bloomkv> ");
            fflush(stdout);
        }
        ssize_t len = getline(&line, &cap, stdin);
        if (len < 0) break;
        if (len && line[len - 1] == '\n') line[len - 1] = 0;
        int r = run_line(db, line);
        if (r < 0) break;
        rc = r;
    }
    free(line);
    return rc;
}
