/*
 * The bash prompt hook's work on bash's own variables: see bash_prompt.h.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "bash_history.h"
#include "bash_prompt.h"
#include "shim_shell.h"

/* bash's SHELL_VAR (variables.h), whose first fields have not changed
 * since bash 2.0: only the attributes are read. */
struct bash_variable {
    char *name, *value, *exportstr;
    void *dynamic_value, *assign_func;
    int attributes, context;
};
#define BASH_ATT_READONLY 0x0000002
#define BASH_ATT_INTEGER 0x0000010

/* The integration's part of PS0 (shell/prov.bash defines __prov_b): it
 * starts the command where parameters are expanded, after whatever the
 * user's PS0 expands before it (a `$(…)` there runs outside the record). */
static const char PS0_PART[] = "${__prov_b@P}";

static struct {
    int looked, ready;
    struct bash_variable *(*find_variable)(const char *);
    void *(*bind_variable)(const char *, char *, int);
    char *(*get_string_value)(const char *);
    /* What bash does after an assignment to one of its own variables
     * (HISTCONTROL, HISTIGNORE and HISTSIZE take effect through it). */
    void (*special_variable)(const char *);
    int started;                /* PS0 started a command since the last hook */
    int have_values;            /* the user's settings below were taken */
    char *control, *ignore, *size;  /* HISTCONTROL, HISTIGNORE, HISTSIZE; NULL: "" */
    int size_zero;              /* HISTSIZE is only zeros: keep no history */
    char *ps0_set;              /* PS0 as set here last */
} P;

/* In the shell itself (not a fork), with bash's variable functions. */
static int usable(void)
{
    if (!P.looked && shim_shell_is_bash()) {
        P.looked = 1;
        P.find_variable = (struct bash_variable * (*)(const char *)) dlsym(RTLD_DEFAULT, "find_variable");
        P.bind_variable = (void *(*)(const char *, char *, int))dlsym(RTLD_DEFAULT, "bind_variable");
        P.get_string_value = (char *(*)(const char *))dlsym(RTLD_DEFAULT, "get_string_value");
        P.special_variable = (void (*)(const char *))dlsym(RTLD_DEFAULT, "stupidly_hack_special_variables");
        P.ready = P.find_variable && P.bind_variable && P.get_string_value && P.special_variable;
    }
    return P.ready && shim_in_shell_itself();
}

int bash_prompt_texts(void)
{
    return usable() && bash_history_available();
}

static const char *or_empty(const char *s) { return s ? s : ""; }

static char *value_of(const char *name)
{
    const char *value = P.get_string_value(name);
    return value ? strdup(value) : NULL;
}

/* A decimal number, which an integer variable takes as it is. */
static int is_number(const char *s)
{
    s += *s == '-';
    return *s && s[strspn(s, "0123456789")] == 0;
}

/* As the assignment NAME=VALUE would, but a readonly variable stays as it
 * is (bash would print an error at every prompt), and so does an integer
 * one unless VALUE is a number: bash evaluates what an integer variable is
 * given, and an error there jumps out of this hook to bash's top level,
 * where PROMPT_COMMAND runs again (a prompt that never comes). Returns 0
 * when assigned. */
static int assign(const char *name, const char *value)
{
    struct bash_variable *v = P.find_variable(name);
    if (v && ((v->attributes & BASH_ATT_READONLY) || ((v->attributes & BASH_ATT_INTEGER) && !is_number(value))))
        return -1;
    P.bind_variable(name, (char *)value, 0);
    P.special_variable(name);
    return 0;
}

static void take_user_values(void)
{
    free(P.control);
    free(P.ignore);
    free(P.size);
    P.control = value_of("HISTCONTROL");
    P.ignore = value_of("HISTIGNORE");
    P.size = value_of("HISTSIZE");
    /* HISTSIZE=0 keeps no history; empty, unset or negative keeps all. */
    P.size_zero = P.size && *P.size && P.size[strspn(P.size, "0")] == 0;
    P.have_values = 1;
}

int bash_prompt_command_ended(void)
{
    if (!shim_shell_is_bash() || !shim_in_shell_itself()) return 0;
    int ended = P.started;
    P.started = 0;
    if ((ended || !P.have_values) && usable()) take_user_values();
    return ended;
}

/* PS0 with every copy of the integration's part taken out and one put
 * last: prompt tools that set PS0 after the integration (or append to
 * it) must not start the command before their own part runs. */
static int keep_ps0_last(void)
{
    const char *ps0 = or_empty(P.get_string_value("PS0"));
    if (P.ps0_set && !strcmp(ps0, P.ps0_set)) return 0;
    struct buf kept = {0};
    int bad = 0;
    for (const char *p = ps0; *p && !bad;) {
        const char *part = strstr(p, PS0_PART);
        size_t before = part ? (size_t)(part - p) : strlen(p);
        bad = buf_add(&kept, p, before);
        p += before + (part ? sizeof PS0_PART - 1 : 0);
    }
    int rc = -1;
    if (!bad && !buf_add(&kept, PS0_PART, sizeof PS0_PART)) {
        rc = assign("PS0", kept.p);
        free(P.ps0_set);
        /* What bash holds now (a readonly PS0 kept its value): compared
         * with at the next prompt, so an unchanged PS0 costs one strcmp. */
        P.ps0_set = value_of("PS0");
    }
    buf_free(&kept);
    return rc;
}

int bash_prompt_next_line(void)
{
    if (!usable()) return 0;
    if (!P.have_values) take_user_values();
    if (bash_line_start(or_empty(P.control), or_empty(P.ignore), or_empty(P.size)) == 0) {
        /* bash keeps every line while it is read: the shim applies the
         * user's settings to it itself (bash_history.h). */
        assign("HISTCONTROL", "");
        assign("HISTIGNORE", "");
        if (P.size_zero) assign("HISTSIZE", "100");
    }
    return keep_ps0_last();
}

/* NAME back to the user's value, unless something set it since. */
static void restore(const char *name, const char *user_value)
{
    const char *now = P.get_string_value(name);
    if (now && *now) return;
    if (now && !*or_empty(user_value)) return;
    assign(name, or_empty(user_value));
}

void bash_prompt_command_starts(void)
{
    if (!shim_shell_is_bash() || !shim_in_shell_itself()) return;
    P.started = 1;
    if (!usable() || !P.have_values || !bash_history_available()) return;
    restore("HISTCONTROL", P.control);
    restore("HISTIGNORE", P.ignore);
    if (P.size_zero) assign("HISTSIZE", "0");
}
