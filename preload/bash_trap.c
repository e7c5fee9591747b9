/*
 * bash's DEBUG trap, read from inside the shell: see bash_trap.h.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "bash_trap.h"
#include "shim_shell.h"

/* The symbols bash exports for loadable builtins. */
static struct {
    int looked;
    /* trap.c: the command of each trap, by number; NULL, SIG_DFL (0) or
     * SIG_IGN (1) when there is none. */
    char **trap_list;
    int (*signal_is_trapped)(int);
    /* variables.c: binds a global (at the prompt) to a copy of value. */
    void *(*bind_variable)(const char *, char *, int);
    /* The DEBUG trap's number: NSIG as bash was built, found by its name in
     * signal_names (NULL-terminated) rather than assumed. */
    int debug;
} T = { .debug = -1 };

static int bash_trap_ready(void)
{
    if (!T.looked && shim_shell_is_bash()) {
        T.looked = 1;
        char **names = (char **)dlsym(RTLD_DEFAULT, "signal_names");
        T.trap_list = (char **)dlsym(RTLD_DEFAULT, "trap_list");
        T.signal_is_trapped = (int (*)(int))dlsym(RTLD_DEFAULT, "signal_is_trapped");
        T.bind_variable = (void *(*)(const char *, char *, int))dlsym(RTLD_DEFAULT, "bind_variable");
        /* A few hundred entries at most (2 * NSIG + 4 where largest). */
        for (int i = 0; names && i < 1024 && names[i]; i++) {
            if (!strcmp(names[i], "DEBUG")) {
                T.debug = i;
                break;
            }
        }
    }
    return T.trap_list && T.signal_is_trapped && T.bind_variable && T.debug >= 0;
}

void bash_debug_trap_to_variable(void)
{
    if (!bash_trap_ready()) return;
    char *command = T.signal_is_trapped(T.debug) ? T.trap_list[T.debug] : NULL;
    /* SIG_DFL and SIG_IGN are stored as the pointers 0 and 1. */
    if ((unsigned long)command <= 1) command = "";
    T.bind_variable("__prov_trap", command, 0);
}
