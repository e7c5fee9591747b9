/*
 * Unit tests of the shim's pure helpers (preload/shim_util.h,
 * preload/shim_parse.h): the buffer, fopen's mode as open flags, the word
 * comparison of bash's multi-line entries, the history settings and
 * HISTIGNORE matching, the transitions of the shim's states. Built and run by tests/shim_unit.rs (under ASan and
 * UBSan); any failed check prints it and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../shim_parse.h"
#include "../shim_state.h"
#include "../shim_util.h"

static int failures;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                          \
        }                                                                        \
    } while (0)

static void test_buffer(void)
{
    struct buf b = {0};
    CHECK(buf_str(&b, "seq=") == 0);
    CHECK(buf_u64(&b, 18446744073709551615ULL) == 0);
    CHECK(buf_add(&b, " ", 1) == 0);
    CHECK(buf_hex(&b, (const unsigned char *)"\x00\xab\xff", 3) == 0);
    CHECK(b.len == strlen("seq=18446744073709551615 00abff"));
    CHECK(memcmp(b.p, "seq=18446744073709551615 00abff", b.len) == 0);
    /* Growing past the first mapping keeps what was written. */
    char block[5000];
    memset(block, 'x', sizeof block);
    CHECK(buf_add(&b, block, sizeof block) == 0);
    CHECK(b.cap >= b.len && b.len == 31 + sizeof block);
    CHECK(memcmp(b.p, "seq=", 4) == 0 && b.p[b.len - 1] == 'x');
    buf_free(&b);
    CHECK(b.p == NULL && b.len == 0 && b.cap == 0);

    char s[24];
    u64_to_str(0, s);
    CHECK(!strcmp(s, "0"));
    u64_to_str(1234567890, s);
    CHECK(!strcmp(s, "1234567890"));
}

static void test_fopen_flags(void)
{
    CHECK(fopen_flags("r") == O_RDONLY);
    CHECK(fopen_flags("w") == (O_WRONLY | O_CREAT | O_TRUNC));
    CHECK(fopen_flags("a") == (O_WRONLY | O_CREAT | O_APPEND));
    CHECK(fopen_flags("r+") == O_RDWR);
    CHECK(fopen_flags("w+x") == (O_RDWR | O_CREAT | O_TRUNC | O_EXCL));
    CHECK(fopen_flags("ae") == (O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC));
    CHECK(fopen_flags("rb") == O_RDONLY);
    /* glibc's ",ccs=" tail is not flags. */
    CHECK(fopen_flags("r,ccs=x+e") == O_RDONLY);
    CHECK(fopen_flags("x") == -1);
    CHECK(fopen_flags("") == -1);
}

static int same(const char *a, const char *b) { return same_words(a, strlen(a), b, strlen(b)); }

static void test_same_words(void)
{
    CHECK(same("for i in 1 2; do echo $i; done", "for i in 1 2\ndo echo $i\ndone"));
    CHECK(same("a ;b", "a\n\tb"));
    CHECK(same("", " ;\n"));
    /* Blanks are not compared at all: only the order of the other bytes. */
    CHECK(same("echo ab", "echo a b"));
    CHECK(!same("echo ab", "echo ba"));
    CHECK(!same("echo a", "echo a b"));
    CHECK(!same("echo a b", "echo a"));
}

/* Rules from the three fields as the integration writes them. */
static struct hist_rules rules(char *data, const char *control, const char *ignore, const char *size)
{
    size_t n = 0;
    for (const char *f[] = {control, ignore, size}, **p = f; p < f + 3; p++) {
        strcpy(data + n, *p);
        n += strlen(*p) + 1;
    }
    memset(data + n, 0, 3);
    struct hist_rules r;
    parse_hist_rules(&r, data);
    return r;
}

static void test_hist_rules(void)
{
    char data[256];
    struct hist_rules r = rules(data, "ignoreboth:erasedups", "", "500");
    CHECK(r.ignorespace && r.ignoredups && r.erasedups && r.size == 500);
    r = rules(data, "ignorespacex:ignoredups", "", "");
    CHECK(!r.ignorespace && r.ignoredups && !r.erasedups && r.size == -1);
    r = rules(data, "", "", "0");
    CHECK(r.size == 0);

    /* HISTIGNORE: whole-line patterns, `\:` a colon, `&` the previous line. */
    r = rules(data, "", "ls:cd *:a\\:b:&:@(x|y)", "");
    CHECK(ignored_by_pattern(&r, "ls", NULL));
    CHECK(!ignored_by_pattern(&r, "ls -l", NULL));
    CHECK(ignored_by_pattern(&r, "cd /tmp", NULL));
    CHECK(ignored_by_pattern(&r, "a:b", NULL));
    CHECK(!ignored_by_pattern(&r, "a", NULL));
    CHECK(ignored_by_pattern(&r, "make", "make"));
    CHECK(!ignored_by_pattern(&r, "make", "make test"));
    CHECK(!ignored_by_pattern(&r, "make", NULL));
    CHECK(ignored_by_pattern(&r, "y", NULL));
    r = rules(data, "", "", "");
    CHECK(!ignored_by_pattern(&r, "", NULL) && !ignored_by_pattern(&r, "ls", "ls"));
}

static void test_prepared(void)
{
    int holder = 0, skip = 0;
    CHECK(parse_prepared("R42 skip-space", &holder, &skip) == 'R' && holder == 42 && skip);
    CHECK(parse_prepared("R7", &holder, &skip) == 'R' && holder == 7 && !skip);
    CHECK(parse_prepared("Eno helper", &holder, &skip) == 'E');
    CHECK(parse_prepared("R0", &holder, &skip) == 0);
    CHECK(parse_prepared("R-1", &holder, &skip) == 0);
    CHECK(parse_prepared("R99999999999", &holder, &skip) == 0);
    CHECK(parse_prepared("R12x", &holder, &skip) == 0);
    CHECK(parse_prepared("", &holder, &skip) == 0);
    CHECK(parse_prepared("R42 skip-space took=350 wait=2000", &holder, &skip) == 'R' && holder == 42 && skip);
    CHECK(parse_prepared("R42 took=350", &holder, &skip) == 'R' && !skip);

    /* The collector's Stored answer, as serde_json writes it. */
    const char *reusable = "{\"Stored\":{\"events\":3,\"completeness\":\"Complete\",\"spooled\":null,"
                           "\"lost\":null,\"collector_cpu_ns\":12,\"reusable\":true}}";
    const char *ended = "{\"Stored\":{\"events\":3,\"spooled\":null,\"lost\":null,\"reusable\":false}}";
    const char *quoted = "{\"Stored\":{\"events\":0,\"lost\":\"x \\\"reusable\\\":true\",\"reusable\":false}}";
    CHECK(stored_reusable(reusable, strlen(reusable)));
    CHECK(!stored_reusable(ended, strlen(ended)));
    CHECK(!stored_reusable(quoted, strlen(quoted)));
    CHECK(!stored_reusable("{\"Begun\":{\"reusable\":true}}", 29));
    CHECK(!stored_reusable(reusable, 20));
    CHECK(!stored_reusable("", 0));
    char why[16] = "kept";
    CHECK(!stored_lost(reusable, strlen(reusable), why, sizeof why) && !strcmp(why, "kept"));
    const char *lost = "{\"Stored\":{\"events\":1,\"spooled\":null,\"lost\":\"no \\\"db\\\" here\",\"reusable\":false}}";
    CHECK(stored_lost(lost, strlen(lost), why, sizeof why) && !strcmp(why, "no \\\"db\\\" here"));
    char tiny[6];
    CHECK(stored_lost(lost, strlen(lost), tiny, sizeof tiny) && !strcmp(tiny, "no \\\""));
    CHECK(!stored_lost("{\"Begun\":{\"lost\":\"x\"}}", 24, why, sizeof why));
    char said[200];
    CHECK(stored_problem(lost, strlen(lost), said, sizeof said) && !strcmp(said, "records are lost: no \\\"db\\\" here"));
    CHECK(!stored_problem(reusable, strlen(reusable), said, sizeof said));
    const char *kept = "{\"Stored\":{\"events\":1,\"spooled\":\"db: ro; nor the spool s: denied\",\"lost\":null,"
                       "\"fallback\":\"/tmp/prov-7/spool\",\"reusable\":false}}";
    CHECK(stored_problem(kept, strlen(kept), said, sizeof said)
          && !strcmp(said, "records are kept in /tmp/prov-7/spool until the journal can take them: db: ro; nor the spool s: denied"));
    CHECK(prepared_number("R42 skip-space took=350 wait=2000", "took=") == 350);
    CHECK(prepared_number("R42 skip-space took=350 wait=2000", "wait=") == 2000);
    CHECK(prepared_number("R42 took=350", "wait=") == -1);
    CHECK(prepared_number("R42 xtook=5", "took=") == -1);
    CHECK(prepared_number("R42 took=", "took=") == -1);
    CHECK(prepared_number("R42 took=-3", "took=") == -1);
    CHECK(prepared_number("R42 took=12x", "took=") == -1);
    CHECK(prepared_number("R42 took=99999999999", "took=") == -1);
}

static void test_prepare_wait(void)
{
    /* A fast machine: the floor. */
    CHECK(prepare_wait_ms(2000, 80, 3, 20000) == 2000);
    /* Nothing measured yet: the first preparation gets three times the floor. */
    CHECK(prepare_wait_ms(2000, -1, 3, 20000) == 6000);
    CHECK(prepare_wait_ms(10000, -1, 3, 20000) == 20000);
    CHECK(prepare_wait_ms(30000, -1, 3, 20000) == 30000);
    /* Preparing took 1.5 s: 4.5 s. */
    CHECK(prepare_wait_ms(2000, 1500, 3, 20000) == 4500);
    /* A hung or very slow helper: never beyond the ceiling... */
    CHECK(prepare_wait_ms(2000, 60000, 3, 20000) == 20000);
    CHECK(prepare_wait_ms(2000, 2147483647, 3, 20000) == 20000);
    /* ... unless the user configured more. */
    CHECK(prepare_wait_ms(30000, 60000, 3, 20000) == 30000);
}

/* The next observation's lifecycle, as a shell goes through it. */
static void test_prep_states(void)
{
    /* A command ends, the prompt asks, the answer comes, a command takes it. */
    enum prep_state s = PREP_IDLE;
    s = prep_next(s, PREP_REQUESTED);
    CHECK(s == PREP_ASKED && prep_awaited(s));
    s = prep_next(s, PREP_PREPARED);
    CHECK(s == PREP_READY && !prep_awaited(s));
    /* Asking again while one is ready asks nothing. */
    CHECK(prep_next(s, PREP_REQUESTED) == PREP_READY);
    /* A wait that times out while one is ready changes nothing. */
    CHECK(prep_next(s, PREP_MISSED) == PREP_READY);
    s = prep_next(s, PREP_TAKEN);
    CHECK(s == PREP_IDLE);

    /* A hanging helper: one start waits in vain, then none waits, and a
     * late answer is still taken. */
    s = prep_next(PREP_IDLE, PREP_REQUESTED);
    s = prep_next(s, PREP_MISSED);
    CHECK(s == PREP_LATE && prep_awaited(s));
    CHECK(prep_next(s, PREP_MISSED) == PREP_LATE);
    /* Being late asks nothing new: one request is outstanding. */
    CHECK(prep_next(s, PREP_REQUESTED) == PREP_LATE);
    CHECK(prep_next(s, PREP_PREPARED) == PREP_READY);
    /* A refusal or a hang-up, early or late: nothing is awaited any more. */
    CHECK(prep_next(PREP_ASKED, PREP_FAILED) == PREP_IDLE);
    CHECK(prep_next(PREP_LATE, PREP_FAILED) == PREP_IDLE);

    /* Answers nobody asked for do not make an observation appear. */
    CHECK(prep_next(PREP_IDLE, PREP_PREPARED) == PREP_IDLE);
    CHECK(prep_next(PREP_IDLE, PREP_FAILED) == PREP_IDLE);
    CHECK(prep_next(PREP_IDLE, PREP_MISSED) == PREP_IDLE);
    CHECK(prep_next(PREP_IDLE, PREP_TAKEN) == PREP_IDLE);
    /* Nor is one taken that is not ready. */
    CHECK(prep_next(PREP_ASKED, PREP_TAKEN) == PREP_ASKED);
    CHECK(!prep_awaited(PREP_IDLE));
}

/* The last command's End, from its end hook to Stored. */
static void test_end_states(void)
{
    enum end_state s = END_NONE;
    s = end_next(s, END_WRITTEN);
    CHECK(s == END_HELD);
    s = end_next(s, END_SEND_OK);
    CHECK(s == END_SENT);
    /* Sent once: a second send does not happen. */
    CHECK(end_next(s, END_SEND_OK) == END_SENT);
    CHECK(end_next(s, END_DONE) == END_NONE);
    /* The next command ends before Stored was read: its End is held, the
     * last one is no longer followed. */
    CHECK(end_next(END_SENT, END_WRITTEN) == END_HELD);
    /* The collector gone before End went out. */
    CHECK(end_next(END_HELD, END_DONE) == END_NONE);
    /* Nothing held: nothing is sent. */
    CHECK(end_next(END_NONE, END_SEND_OK) == END_NONE);
}

int main(void)
{
    test_buffer();
    test_fopen_flags();
    test_same_words();
    test_hist_rules();
    test_prepared();
    test_prepare_wait();
    test_prep_states();
    test_end_states();
    if (failures) {
        fprintf(stderr, "preload/tests/unit: %d checks failed\n", failures);
        return 1;
    }
    printf("preload/tests/unit: all checks passed\n");
    return 0;
}
