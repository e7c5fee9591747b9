/*
 * The environment a typed command starts with (see shim_env.h). Only
 * names are compared here, against the few patterns of [env]; the
 * collector applies [env] drop and redacts the values, off the shell's
 * way.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "shim_env.h"
#include "shim_shell.h"

extern char **environ;

#define PATTERNS_MAX 256
#define PATTERN_BYTES 4096

static struct {
    int known;
    char text[PATTERN_BYTES];
    const char *at[PATTERNS_MAX];
    size_t len[PATTERNS_MAX];
    int prefix[PATTERNS_MAX];
    size_t n;
    int bash_looked;
    void (*make_export_env)(void);
    char ***export_env;
} E;

void shim_env_patterns(const char *answer)
{
    const char *field = strstr(answer, " env=");
    if (!field) return;
    field += 5;
    size_t len = strcspn(field, " ");
    if (len >= sizeof E.text) len = sizeof E.text - 1;
    memcpy(E.text, field, len);
    E.text[len] = 0;
    E.n = 0;
    E.known = 1;
    for (char *p = E.text; *p && E.n < PATTERNS_MAX;) {
        size_t n = strcspn(p, ",");
        if (n) {
            int prefix = p[n - 1] == '*';
            E.at[E.n] = p;
            E.len[E.n] = n - (size_t)prefix;
            E.prefix[E.n] = prefix;
            E.n++;
        }
        p += n;
        if (*p) p++;
    }
}

static int selected(const char *entry)
{
    const char *eq = strchr(entry, '=');
    if (!eq || eq == entry) return 0;
    size_t name_len = (size_t)(eq - entry);
    for (size_t i = 0; i < E.n; i++) {
        if (E.prefix[i] ? name_len >= E.len[i] && !memcmp(entry, E.at[i], E.len[i])
                        : name_len == E.len[i] && !memcmp(entry, E.at[i], name_len))
            return 1;
    }
    return 0;
}

/* What the command's programs will get. bash keeps its exported variables
 * apart from `environ` and builds the array it passes to execve when it
 * changed (maybe_make_export_env): built now, it is the same array the
 * command's exec uses, not built twice. zsh keeps `environ` itself. NULL:
 * not known (a bash whose functions are not exported: its `environ` is
 * the one it started with, which would be a wrong answer). */
static char **command_environment(void)
{
    if (shim_shell_is_bash()) {
        if (!E.bash_looked) {
            E.bash_looked = 1;
            E.make_export_env = (void (*)(void))dlsym(RTLD_DEFAULT, "maybe_make_export_env");
            E.export_env = (char ***)dlsym(RTLD_DEFAULT, "export_env");
        }
        if (!E.make_export_env || !E.export_env) return NULL;
        E.make_export_env();
        return *E.export_env;
    }
    return environ;
}

int shim_env_append(struct buf *msg)
{
    if (!E.known) return 0;
    char **env = command_environment();
    if (!env) return 0;
    if (buf_str(msg, ",\"env\":\"")) return -1;
    for (char **e = env; e && *e; e++) {
        if (!selected(*e)) continue;
        static const unsigned char nul = 0;
        if (buf_hex(msg, (const unsigned char *)*e, strlen(*e)) || buf_hex(msg, &nul, 1)) return -1;
    }
    return buf_str(msg, "\"");
}
