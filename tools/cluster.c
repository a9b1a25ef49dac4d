/* `bloomkv cluster find-value HOST:PORT VALUE`: a search by value over a
 * whole Redis Cluster running the module (docs/redis.md). It asks one node
 * for CLUSTER SHARDS and every master for BKV.FINDVALUE, and prints the
 * union (each row lives on exactly one master). A minimal RESP2 client:
 * the tool links no Redis library. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"

enum { EXIT_NOTFOUND = 1, EXIT_USAGE = 2, EXIT_ERROR = 3 };
#define MAX_DEPTH 8
#define MAX_ITEMS (1 << 24)

typedef struct reply {
    char type; /* + - : $ * (nil: '$' with len -1) */
    long long len;
    char *str;
    struct reply **items;
} reply;

static void reply_free(reply *r) {
    if (!r) return;
    for (long long i = 0; r->type == '*' && i < r->len; i++) reply_free(r->items[i]);
    free(r->items);
    free(r->str);
    free(r);
}

typedef struct conn {
    int fd;
    char buf[65536];
    size_t start, end;
} conn;

static int conn_open(conn *c, const char *host, const char *port) {
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, port, &hints, &ai)) return -1;
    c->fd = -1;
    for (struct addrinfo *a = ai; a && c->fd < 0; a = a->ai_next) {
        c->fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (c->fd >= 0 && connect(c->fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(c->fd);
            c->fd = -1;
        }
    }
    freeaddrinfo(ai);
    c->start = c->end = 0;
    return c->fd < 0 ? -1 : 0;
}

static int fill(conn *c) {
    if (c->start == c->end) c->start = c->end = 0;
    if (c->end == sizeof c->buf) {
        memmove(c->buf, c->buf + c->start, c->end - c->start);
        c->end -= c->start;
        c->start = 0;
    }
    ssize_t n = read(c->fd, c->buf + c->end, sizeof c->buf - c->end);
    if (n <= 0) return -1;
    c->end += (size_t)n;
    return 0;
}

/* A line without its CRLF, in a malloc'd string. */
static char *read_line(conn *c) {
    for (;;) {
        char *nl = memchr(c->buf + c->start, '\n', c->end - c->start);
        if (nl) {
            size_t n = (size_t)(nl - (c->buf + c->start));
            char *s = malloc(n + 1);
            if (!s) return NULL;
            memcpy(s, c->buf + c->start, n);
            s[n && s[n - 1] == '\r' ? n - 1 : n] = 0;
            c->start += n + 1;
            return s;
        }
        if (c->end - c->start == sizeof c->buf || fill(c)) return NULL; /* no line fits, or the peer left */
    }
}

static int read_bytes(conn *c, char *dst, size_t n) {
    while (n) {
        if (c->start == c->end && fill(c)) return -1;
        size_t k = c->end - c->start < n ? c->end - c->start : n;
        memcpy(dst, c->buf + c->start, k);
        c->start += k;
        dst += k;
        n -= k;
    }
    return 0;
}

static reply *read_reply(conn *c, int depth) {
    char *line = read_line(c);
    if (!line || depth > MAX_DEPTH) {
        free(line);
        return NULL;
    }
    reply *r = calloc(1, sizeof *r);
    if (!r) {
        free(line);
        return NULL;
    }
    r->type = line[0];
    int ok = 1;
    switch (r->type) {
    case '+':
    case '-':
    case ':': r->str = strdup(line + 1); ok = r->str != NULL; break;
    case '$':
        r->len = strtoll(line + 1, NULL, 10);
        if (r->len >= 0 && r->len < (1LL << 32)) {
            char crlf[2];
            ok = (r->str = malloc((size_t)r->len + 1)) && !read_bytes(c, r->str, (size_t)r->len) &&
                 !read_bytes(c, crlf, 2);
            if (ok) r->str[r->len] = 0;
        } else ok = r->len == -1;
        break;
    case '*':
        r->len = strtoll(line + 1, NULL, 10);
        if (r->len < 0) r->len = 0;
        ok = r->len <= MAX_ITEMS && (r->items = calloc((size_t)r->len + 1, sizeof *r->items));
        for (long long i = 0; ok && i < r->len; i++) ok = (r->items[i] = read_reply(c, depth + 1)) != NULL;
        break;
    default: ok = 0;
    }
    free(line);
    if (!ok) {
        reply_free(r);
        return NULL;
    }
    return r;
}

/* Sends a command of argc binary-safe arguments and reads the reply. */
static reply *command(conn *c, int argc, const char **argv, const size_t *lens) {
    char head[32];
    int n = snprintf(head, sizeof head, "*%d\r\n", argc);
    if (write(c->fd, head, (size_t)n) != n) return NULL;
    for (int i = 0; i < argc; i++) {
        n = snprintf(head, sizeof head, "$%zu\r\n", lens[i]);
        if (write(c->fd, head, (size_t)n) != n || write(c->fd, argv[i], lens[i]) != (ssize_t)lens[i] ||
            write(c->fd, "\r\n", 2) != 2)
            return NULL;
    }
    return read_reply(c, 0);
}

/* The value after name in a flat name/value array (CLUSTER SHARDS). */
static const reply *field(const reply *r, const char *name) {
    for (long long i = 0; r && r->type == '*' && i + 1 < r->len; i += 2)
        if (r->items[i]->str && strcmp(r->items[i]->str, name) == 0) return r->items[i + 1];
    return NULL;
}

static void print_bytes(const char *p, size_t n, int hex) {
    if (!hex) {
        fwrite(p, 1, n, stdout);
        return;
    }
    for (size_t i = 0; i < n; i++) printf("%02x", (unsigned char)p[i]);
}

static int split_addr(const char *addr, char *host, size_t hl, char *port, size_t pl) {
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || !colon[1] || (size_t)(colon - addr) >= hl || strlen(colon + 1) >= pl) return -1;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;
    snprintf(port, pl, "%s", colon + 1);
    return 0;
}

static int find_everywhere(const char *addr, const char *host, const char *port, const char *value, size_t vlen,
                           int hex);

int bkv_cli_cluster(int argc, char **argv) {
    int hex = argc > 1 && strcmp(argv[argc - 1], "--hex") == 0;
    if (hex) argc--;
    if (argc != 4 || strcmp(argv[1], "find-value") != 0) {
        fprintf(stderr, "usage: bloomkv cluster find-value HOST:PORT VALUE [--hex]\n"
                        "  print key<TAB>value for every row of a Redis Cluster running bloomkv_redis.so whose\n"
                        "  value is VALUE: asks HOST:PORT for CLUSTER SHARDS, then every master\n");
        return strcmp(argv[argc > 1 ? 1 : 0], "--help") == 0 ? 0 : EXIT_USAGE;
    }
    char host[256], port[16], *value;
    size_t vlen;
    if (split_addr(argv[2], host, sizeof host, port, sizeof port)) {
        fprintf(stderr, "bloomkv cluster: '%s' is not HOST:PORT\n", argv[2]);
        return EXIT_USAGE;
    }
    if (bkv_cli_decode(argv[3], hex, &value, &vlen)) {
        fprintf(stderr, "bloomkv cluster: VALUE is not hex\n");
        return EXIT_USAGE;
    }
    int ec = find_everywhere(argv[2], host, port, value, vlen, hex);
    free(value);
    return ec;
}

/* Asks addr for the cluster's shards, then every master for its rows
 * holding value, printing them; the tool's exit status. */
static int find_everywhere(const char *addr, const char *host, const char *port, const char *value, size_t vlen,
                           int hex) {
    conn c;
    if (conn_open(&c, host, port)) {
        fprintf(stderr, "bloomkv cluster: cannot connect to %s: %s\n", addr, strerror(errno));
        return EXIT_ERROR;
    }
    const char *shards_cmd[] = {"CLUSTER", "SHARDS"};
    size_t shards_len[] = {7, 6};
    reply *shards = command(&c, 2, shards_cmd, shards_len);
    close(c.fd);
    if (!shards || shards->type != '*') {
        fprintf(stderr, "bloomkv cluster: %s: %s\n", addr,
                shards && shards->type == '-' ? shards->str : "no CLUSTER SHARDS reply (not a cluster node?)");
        reply_free(shards);
        return EXIT_ERROR;
    }
    long found = 0;
    int ec = 0;
    for (long long s = 0; s < shards->len && !ec; s++) {
        const reply *nodes = field(shards->items[s], "nodes");
        for (long long n = 0; nodes && nodes->type == '*' && n < nodes->len; n++) {
            const reply *role = field(nodes->items[n], "role"), *ip = field(nodes->items[n], "ip");
            const reply *p = field(nodes->items[n], "port"), *health = field(nodes->items[n], "health");
            if (!role || !role->str || strcmp(role->str, "master") || !ip || !ip->str || !p || !p->str ||
                (health && health->str && strcmp(health->str, "online")))
                continue;
            conn m;
            if (conn_open(&m, ip->str, p->str)) {
                fprintf(stderr, "bloomkv cluster: cannot connect to master %s:%s\n", ip->str, p->str);
                ec = EXIT_ERROR;
                break;
            }
            const char *args[] = {"BKV.FINDVALUE", value};
            size_t lens[] = {13, vlen};
            reply *r = command(&m, 2, args, lens);
            close(m.fd);
            if (!r || r->type != '*') {
                fprintf(stderr, "bloomkv cluster: %s:%s: %s\n", ip->str, p->str,
                        r && r->type == '-' ? r->str : "bad reply to BKV.FINDVALUE");
                reply_free(r);
                ec = EXIT_ERROR;
                break;
            }
            for (long long i = 0; i + 1 < r->len; i += 2, found++) {
                print_bytes(r->items[i]->str, (size_t)r->items[i]->len, hex);
                putchar('\t');
                print_bytes(r->items[i + 1]->str, (size_t)r->items[i + 1]->len, hex);
                putchar('\n');
            }
            reply_free(r);
        }
    }
    reply_free(shards);
    return ec ? ec : found ? 0 : EXIT_NOTFOUND;
}
