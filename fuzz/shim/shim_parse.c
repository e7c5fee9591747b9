/*
 * libFuzzer target for the shim's parsers (preload/shim_parse.h): the
 * preparer's answer and the bash history settings taken at the first prompt hook.
 *
 * Input: the bytes of the settings memfd, HISTCONTROL\0HISTIGNORE\0HISTSIZE\0;
 * after the third NUL, optionally, the line to match and the previous
 * history line, NUL-separated. The whole input (cut as take_prepared's
 * 512-byte buffer cuts it) is also read as a preparer's answer.
 *
 * Build and run: see fuzz/README.md (clang -fsanitize=fuzzer,address).
 * Without -fsanitize=fuzzer, -DREPLAY gives a main() that runs each file
 * named on the command line once (the smoke of tests/run).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../preload/shim_parse.h"

#define CHECK(cond, what)                                                                                             \
    do {                                                                                                              \
        if (!(cond)) {                                                                                                \
            fprintf(stderr, "shim_parse: %s\n", what);                                                                \
            abort();                                                                                                  \
        }                                                                                                             \
    } while (0)

/* HISTIGNORE the simple way: split at every ':' not escaped by '\', "\:"
 * becomes ':', each non-empty pattern matched whole (`&`: the previous line). */
static int reference_ignored(const char *ignore, const char *line, const char *previous)
{
    size_t len = strlen(ignore);
    char *pattern = malloc(len + 1);
    int ignored = 0;
    for (size_t i = 0; i <= len && !ignored;) {
        size_t n = 0;
        while (i < len && ignore[i] != ':') {
            if (ignore[i] == '\\' && ignore[i + 1] == ':') i++;
            pattern[n++] = ignore[i++];
        }
        pattern[n] = 0;
        i++;
        if (!n) continue;
        if (!strcmp(pattern, "&"))
            ignored = previous && !strcmp(line, previous);
        else
            ignored = fnmatch(pattern, line, FNM_EXTMATCH) == 0;
    }
    free(pattern);
    return ignored;
}

/* The end of the settings: just after the third NUL, or the whole input. */
static size_t settings_len(const uint8_t *data, size_t size)
{
    size_t nuls = 0;
    for (size_t i = 0; i < size; i++)
        if (!data[i] && ++nuls == 3) return i + 1;
    return size;
}

static void check_prepared(const uint8_t *data, size_t size)
{
    char msg[512];
    size_t n = size < sizeof msg - 1 ? size : sizeof msg - 1;
    memcpy(msg, data, n);
    msg[n] = 0;
    int holder = 0, skip_space = -1;
    switch (parse_prepared(msg, &holder, &skip_space)) {
    case 'R':
        CHECK(holder > 0, "an accepted answer names a process (pid > 0)");
        CHECK(skip_space == 0 || skip_space == 1, "skip-space is a flag");
        /* What `prov __prepare` writes for it reads back the same. */
        char again[64];
        snprintf(again, sizeof again, "R%d%s", holder, skip_space ? " skip-space" : "");
        int holder2 = 0, skip_space2 = -1;
        CHECK(parse_prepared(again, &holder2, &skip_space2) == 'R', "prov's own answer is accepted");
        CHECK(holder2 == holder && skip_space2 == skip_space, "prov's own answer reads back the same");
        break;
    case 'E':
        CHECK(msg[0] == 'E', "an error answer starts with E");
        break;
    case 0:
        break;
    default:
        CHECK(0, "parse_prepared returns 'R', 'E' or 0");
    }
}

static void check_rules(const uint8_t *data, size_t size)
{
    size_t len = settings_len(data, size);
    /* As read_rules hands it over: the bytes and three NULs. */
    char *settings = malloc(len + 3);
    memcpy(settings, data, len);
    memset(settings + len, 0, 3);
    char *pristine = malloc(len + 3);
    memcpy(pristine, settings, len + 3);
    struct hist_rules r;
    parse_hist_rules(&r, settings);
    CHECK((r.ignorespace | r.ignoredups | r.erasedups) <= 1, "flags are 0 or 1");
    const char *ignore_as_given = pristine + strlen(pristine) + 1;

    /* The line and the previous one: after the settings, or samples. */
    char *rest = malloc(size - len + 2);
    memcpy(rest, data + len, size - len);
    rest[size - len] = rest[size - len + 1] = 0;
    const char *line = rest, *previous = rest + strlen(rest) + 1;
    if (previous > rest + (size - len)) previous = NULL;
    const char *samples[] = { line, "ls", " ls -l", "&", "make -j8", "" };
    for (size_t i = 0; i < sizeof samples / sizeof *samples; i++) {
        int got = ignored_by_pattern(&r, samples[i], previous);
        CHECK(got == 0 || got == 1, "ignored_by_pattern is a yes or no");
        CHECK(got == reference_ignored(ignore_as_given, samples[i], previous),
              "HISTIGNORE matches as its patterns say (differs from the reference)");
    }
    free(rest);
    free(pristine);
    free(settings);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_prepared(data, size);
    check_rules(data, size);
    return 0;
}

#ifdef REPLAY
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) { perror(argv[i]); return 1; }
        static uint8_t buf[1 << 20];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
    }
    return 0;
}
#endif
