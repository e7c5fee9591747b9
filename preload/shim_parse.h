/*
 * What the shim reads from other processes, as pure functions of their
 * bytes: the preparer's answer and the bash history settings taken at the
 * first prompt hook (bash_prompt.h). In a header of their own so that
 * fuzz/shim/ can drive them without loading the shim into a process.
 */
#ifndef PROV_SHIM_PARSE_H
#define PROV_SHIM_PARSE_H

#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The preparer's answer (`prov __prepare`, see take_prepared): "R<holder
 * pid>[ skip-space][ took=MS][ wait=MS]" or "E<reason>", NUL-terminated. Returns 'R' with the
 * holder and the setting filled in, 'E' (the reason follows the tag), or 0
 * for anything else, an R whose pid is not a pid included. */
static __attribute__((unused)) int parse_prepared(const char *msg, int *holder, int *skip_space)
{
    if (msg[0] == 'E') return 'E';
    if (msg[0] != 'R' || msg[1] < '1' || msg[1] > '9') return 0;
    char *end;
    long pid = strtol(msg + 1, &end, 10);
    if (pid > INT_MAX || (*end && *end != ' ')) return 0;
    *holder = (int)pid;
    *skip_space = strstr(end, " skip-space") != NULL;
    return 'R';
}

/* Whether the collector's Stored answer (JSON, not NUL-terminated) offers
 * the observation for another record: `"reusable":true`, as serde_json
 * writes it (no spaces), in the Stored object. */
static __attribute__((unused)) int stored_reusable(const char *msg, size_t len)
{
    static const char head[] = "{\"Stored\":{", flag[] = "\"reusable\":true";
    return len > sizeof head - 1 && !memcmp(msg, head, sizeof head - 1)
        && memmem(msg, len, flag, sizeof flag - 1) != NULL;
}

/* The string value of `key` (given as "\"name\":\"") in a Stored answer,
 * copied into out (its JSON escapes left as they are, cut to fit); 1 when
 * there is one, 0 otherwise (out is then left as it is). */
static __attribute__((unused)) int stored_text(const char *msg, size_t len, const char *key, char *out, size_t out_len)
{
    static const char head[] = "{\"Stored\":{";
    if (out_len < 2 || len <= sizeof head - 1 || memcmp(msg, head, sizeof head - 1)) return 0;
    /* An unescaped key: inside a JSON string every quote is escaped. */
    size_t key_len = strlen(key);
    const char *at = memmem(msg, len, key, key_len);
    if (!at) return 0;
    const char *p = at + key_len, *end = msg + len;
    size_t n = 0;
    while (p < end && *p != '"') {
        size_t step = (*p == '\\' && p + 1 < end) ? 2 : 1;
        if (n + step < out_len) {
            memcpy(out + n, p, step);
            n += step;
        }
        p += step;
    }
    out[n] = 0;
    return 1;
}

/* Why a Stored answer's record could not be kept at all ("lost":"…"). */
static __attribute__((unused)) int stored_lost(const char *msg, size_t len, char *out, size_t out_len)
{
    return stored_text(msg, len, "\"lost\":\"", out, out_len);
}

/* What the shell says of a Stored answer, into out: that the record is
 * lost and why, or where it waits because neither the database nor the
 * spool took it ("fallback", with "spooled" saying why). 1 when there is
 * something to say; 0 for a record stored or in the spool. */
static __attribute__((unused)) int stored_problem(const char *msg, size_t len, char *out, size_t out_len)
{
    static const char lost[] = "records are lost: ", kept[] = "records are kept in ";
    char why[1024], where[256];
    if (stored_lost(msg, len, why, sizeof why)) {
        snprintf(out, out_len, "%s%s", lost, why);
        return 1;
    }
    if (!stored_text(msg, len, "\"fallback\":\"", where, sizeof where)) return 0;
    if (!stored_text(msg, len, "\"spooled\":\"", why, sizeof why)) why[0] = 0;
    snprintf(out, out_len, "%s%s until the journal can take them: %s", kept, where, why);
    return 1;
}

/* A number the preparer adds to its R answer as " NAME=<digits>" (NAME
 * given with its "="): took= (how long preparing took, ms), wait= (the
 * configured [shell] prepare_wait_ms). -1 when absent or not a number that
 * fits an int. */
static __attribute__((unused)) int prepared_number(const char *msg, const char *name)
{
    size_t len = strlen(name);
    for (const char *at = strstr(msg, name); at; at = strstr(at + 1, name)) {
        if (at == msg || at[-1] != ' ') continue;
        const char *digits = at + len;
        if (*digits < '0' || *digits > '9') return -1;
        char *end;
        long n = strtol(digits, &end, 10);
        if (n > INT_MAX || (*end && *end != ' ')) return -1;
        return (int)n;
    }
    return -1;
}

/* How long `begin` waits for a preparation still under way: at least
 * floor_ms (the configured prepare_wait_ms), and on a machine where
 * preparing takes longer (emulated, loaded, a home on a slow network
 * filesystem) factor times the last preparation's duration, but never more
 * than ceiling_ms unless the floor itself is higher: a slow machine then
 * still traces commands typed right after the prompt, and a hung helper
 * costs one bounded pause. */
static __attribute__((unused)) int prepare_wait_ms(int floor_ms, int took_ms, int factor, int ceiling_ms)
{
    /* Nothing measured yet (took_ms < 0): the shell's first preparation,
     * which also starts the preparer and may create the database, is given
     * factor times the floor. */
    long adapted = took_ms >= 0 ? (long)took_ms * factor : (long)floor_ms * factor;
    if (adapted > ceiling_ms) adapted = ceiling_ms;
    return adapted > floor_ms ? (int)adapted : floor_ms;
}

/* The user's history settings: HISTCONTROL, HISTIGNORE and HISTSIZE as bash
 * would apply them. `ignore` holds the HISTIGNORE patterns, unescaped, each
 * followed by a NUL, in `ignore_len` bytes. */
struct hist_rules { int ignorespace, ignoredups, erasedups, size; const char *ignore; size_t ignore_len; };

/* `data` is what the integration wrote, HISTCONTROL\0HISTIGNORE\0HISTSIZE\0,
 * followed by three NULs of ours (so that a short or NUL-less input reads as
 * empty fields). The patterns are unescaped in place. */
static __attribute__((unused)) void parse_hist_rules(struct hist_rules *r, char *data)
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
    /* Colon-separated patterns; `\:` is a colon in a pattern. Written back
     * NUL-separated over the same bytes: the output never outruns the input. */
    size_t out = 0;
    for (size_t in = 0; ignore[in];) {
        if (ignore[in] == ':') {
            ignore[out++] = 0;
            in++;
            continue;
        }
        if (ignore[in] == '\\' && ignore[in + 1] == ':') in++;
        ignore[out++] = ignore[in++];
    }
    ignore[out] = 0;
    r->ignore = ignore;
    r->ignore_len = out + 1;
    if (*size >= '0' && *size <= '9') r->size = atoi(size);
}

/* Whether HISTIGNORE keeps `line` out: a pattern matches the whole line;
 * `&` is the previous history line. */
static __attribute__((unused)) int ignored_by_pattern(const struct hist_rules *r, const char *line, const char *previous)
{
    for (const char *pattern = r->ignore; pattern < r->ignore + r->ignore_len;
         pattern += strlen(pattern) + 1) {
        if (!*pattern) continue;
        if (!strcmp(pattern, "&")) {
            if (previous && !strcmp(line, previous)) return 1;
        } else if (fnmatch(pattern, line, FNM_EXTMATCH) == 0) {
            return 1;
        }
    }
    return 0;
}

#endif
