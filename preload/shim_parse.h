/*
 * What the shim reads from other processes, as pure functions of their
 * bytes: the preparer's answer and the bash history settings handed over
 * with `line-start`. In a header of their own so that fuzz/shim/ can drive
 * them without loading the shim into a process.
 */
#ifndef PROV_SHIM_PARSE_H
#define PROV_SHIM_PARSE_H

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

/* The preparer's answer (`prov __prepare`, see take_prepared): "R<holder
 * pid>[ skip-space]" or "E<reason>", NUL-terminated. Returns 'R' with the
 * holder and the setting filled in, 'E' (the reason follows the tag), or 0
 * for anything else. */
static int parse_prepared(const char *msg, int *holder, int *skip_space)
{
    if (msg[0] == 'E') return 'E';
    if (msg[0] != 'R') return 0;
    *holder = atoi(msg + 1);
    *skip_space = strstr(msg, " skip-space") != NULL;
    return 'R';
}

/* The user's history settings: HISTCONTROL, HISTIGNORE and HISTSIZE as bash
 * would apply them. */
struct hist_rules { int ignorespace, ignoredups, erasedups, size; const char *ignore; size_t ignore_len; };

/* `data` is what the integration wrote, HISTCONTROL\0HISTIGNORE\0HISTSIZE\0,
 * followed by three NULs of ours (so that a short or NUL-less input reads as
 * empty fields). */
static void parse_hist_rules(struct hist_rules *r, char *data)
{
    memset(r, 0, sizeof *r);
    r->size = -1;
    char *control = data, *ignore = control + strlen(control) + 1, *size = ignore + strlen(ignore) + 1;
    for (char *word = control; *word;) {
        size_t len = strcspn(word, ":");
        int both = len == 10 && !strncmp(word, "ignoreboth", 10);
        if (both || (len == 11 && !strncmp(word, "ignorespace", 11))) r->ignorespace = 1;
        if (both || (len == 10 && !strncmp(word, "ignoredups", 10))) r->ignoredups = 1;
        if (len == 9 && !strncmp(word, "erasedups", 9)) r->erasedups = 1;
        word += len + (word[len] == ':');
    }
    r->ignore = ignore;
    r->ignore_len = strlen(ignore);
    if (*size >= '0' && *size <= '9') r->size = atoi(size);
}

/* HISTIGNORE: colon-separated patterns matched against the whole line; `&`
 * is the previous history line; `\:` is a colon in a pattern. */
static int ignored_by_pattern(const struct hist_rules *r, const char *line, const char *previous)
{
    char pattern[4096];
    for (size_t i = 0; i < r->ignore_len;) {
        size_t n = 0;
        while (i < r->ignore_len && r->ignore[i] != ':' && n + 1 < sizeof pattern) {
            if (r->ignore[i] == '\\' && r->ignore[i + 1] == ':') i++;
            pattern[n++] = r->ignore[i++];
        }
        pattern[n] = 0;
        i++;
        if (!n) continue;
        if (!strcmp(pattern, "&")) {
            if (previous && !strcmp(line, previous)) return 1;
        } else if (fnmatch(pattern, line, FNM_EXTMATCH) == 0) {
            return 1;
        }
    }
    return 0;
}

#endif
