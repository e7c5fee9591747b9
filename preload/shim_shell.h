/*
 * The shell the shim is loaded into, as its constructor found it
 * (prov_preload.c); the bash modules (bash_history.c, bash_trap.c,
 * bash_prompt.c) ask it rather than keeping copies.
 */
#ifndef PROV_SHIM_SHELL_H
#define PROV_SHIM_SHELL_H

/* Whether the shell is bash: the bash modules do nothing otherwise. */
int shim_shell_is_bash(void);

/* Whether this process is the shell itself, not one of its forks: a fork
 * has the shim's state as it was, but bash's variables, history and the
 * shell's observations are the shell's alone. */
int shim_in_shell_itself(void);

#endif
