/*
 * The shim's messages, for crates/prov-protocol's `shim` test: `write`
 * prints every message the shim writes (preload/shim_messages.h), one per
 * line as KIND<TAB>MESSAGE; `read` takes KIND<TAB>MESSAGE lines the Rust
 * side wrote and prints what the shim's parsers (preload/shim_parse.h)
 * make of each. The test reads both with prov-protocol's types.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../shim_messages.h"
#include "../shim_parse.h"
#include "../shim_util.h"

static void print(const char *kind, const char *msg, size_t len)
{
    printf("%s\t%.*s\n", kind, (int)len, msg);
}

static void print_buf(const char *kind, struct buf *msg, int bad)
{
    if (bad) {
        fprintf(stderr, "%s: could not be built\n", kind);
        exit(1);
    }
    print(kind, msg->p, msg->len);
    buf_free(msg);
}

/* The variables as shim_env.c sends them: NAME=VALUE, each ending in a NUL. */
static int test_env(struct buf *msg)
{
    static const char vars[] = "SLURM_JOB_ID=4242\0LANG=C.UTF-8";
    return buf_str(msg, ",\"env\":\"") || buf_hex(msg, (const unsigned char *)vars, sizeof vars)
        || buf_str(msg, "\"");
}

static int write_all(void)
{
    /* Bytes JSON would have to escape, and some that are not UTF-8. */
    static const unsigned char text[] = "echo \"a\\b\"\n\t\xff\xfe ok";
    struct buf msg = {0};
    print_buf("begin-held", &msg,
              msg_begin(&msg, 7, text, sizeof text - 1, "/home/u/\xe9t\xe9", 1700000000123456789ULL, 1, test_env));
    print_buf("begin", &msg, msg_begin(&msg, 18446744073709551615ULL, text, 0, "/", 0, 0, NULL));
    print_buf("begin-in-fd", &msg, msg_begin(&msg, 8, NULL, INLINE_TEXT_MAX + 1, "/tmp", 1, 0, NULL));
    print_buf("end", &msg, msg_end(&msg, 1700000000999999999ULL, "130", NULL));
    print_buf("end-why", &msg, msg_end(&msg, 5, "0", "helper \"x\" is not setuid\n"));
    char end[256], orphan[300];
    struct buf e = {0};
    if (msg_end(&e, 9, "2", NULL) || e.len >= sizeof end) return 1;
    memcpy(end, e.p, e.len);
    int n = msg_orphan(orphan, sizeof orphan, end, (int)e.len);
    buf_free(&e);
    if (n < 0) return 1;
    print("orphan", orphan, (size_t)n);
    print("prepare", PREPARE_REQUEST, strlen(PREPARE_REQUEST));
    print("again", AGAIN_REQUEST, strlen(AGAIN_REQUEST));
    print("version", PROV_PROTOCOL_VERSION, strlen(PROV_PROTOCOL_VERSION));
    printf("inline-text-max\t%d\n", INLINE_TEXT_MAX);
    return 0;
}

static int read_all(void)
{
    char line[65536];
    while (fgets(line, sizeof line, stdin)) {
        size_t len = strlen(line);
        if (len && line[len - 1] == '\n') line[--len] = 0;
        char *msg = strchr(line, '\t');
        if (!msg) return 1;
        *msg++ = 0;
        size_t msg_len = strlen(msg);
        if (!strcmp(line, "prepared")) {
            int holder = 0, skip = 0;
            int kind = parse_prepared(msg, &holder, &skip);
            printf("prepared\t%c %d %d %d %d\n", kind ? kind : '0', holder, skip, prepared_number(msg, "took="),
                   prepared_number(msg, "wait="));
        } else if (!strcmp(line, "stored")) {
            char lost[1024] = "", problem[2048] = "";
            int has_lost = stored_lost(msg, msg_len, lost, sizeof lost);
            int has_problem = stored_problem(msg, msg_len, problem, sizeof problem);
            printf("stored\t%d\t%d\t%s\t%d\t%s\n", stored_reusable(msg, msg_len), has_lost, lost, has_problem,
                   problem);
        } else {
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "write")) return write_all();
    if (argc == 2 && !strcmp(argv[1], "read")) return read_all();
    fprintf(stderr, "usage: messages write|read\n");
    return 2;
}
