/*
 * The bash history subsystem of libprov_preload.so (bash_history.c).
 *
 * bash has no preexec hook that is given the line, so the text of a command
 * is taken from bash's own history list, from inside the shell, when PS0
 * starts the command (see bash_command_text). So that every line gets an
 * entry, the integration neutralises HISTCONTROL, HISTIGNORE and HISTSIZE=0
 * while a line is read (bash_prompt.h), and the shim takes the user's
 * values at the first prompt hook; the shim then applies them itself, the way bash would have, and deletes
 * the entries bash would not have kept before the command runs (so a
 * hang-up during the command saves no line bash would have kept out).
 *
 * With history switched off (`set +o history`) bash adds nothing, and puts
 * remember_on_history back after PROMPT_COMMAND, so no prompt hook can
 * switch it on: the shim sets it after each read that returned input and
 * clears it while bash waits for input (pselect) and when the command
 * starts, so a hang-up at the prompt finds it clear and bash saves no
 * history it would not have saved; the line's entries are deleted.
 *
 * bash exports these for loadable builtins; a bash that does not cannot be
 * asked (the integration then records commands without text).
 */
#ifndef PROV_BASH_HISTORY_H
#define PROV_BASH_HISTORY_H

#include <sys/types.h>

#include "shim_util.h"

/* In a shell other than bash every call below does nothing, and so do the
 * shell's forks' (shim_shell.h). */

/* Whether bash's history list can be reached. */
int bash_history_available(void);

/* From the first prompt hook (bash_prompt_next_line): the lines read since
 * the last command started that never started one (empty, a comment) are
 * settled with the settings they were read under, and the next line's are
 * the user's HISTCONTROL, HISTIGNORE and HISTSIZE given. Returns 0; -1
 * with errno ENOENT when bash's history list cannot be reached. */
int bash_line_start(const char *control, const char *ignore, const char *size);

/* bash's line editor waits for input (pselect): the lines read from now on
 * are the next command's. */
void bash_mark_line_start(void);

/* With history off, keeps (on: after a read that returned input) or drops
 * (off: while waiting, and as the command starts) the line being read. */
void bash_keep_line(int on);

/* A read by the shell returned `got` bytes at `key`: an Enter that ends a
 * line keeps readline's buffer as the line typed. */
void bash_typed_key(const char *key, ssize_t got);

/* The command starts (PS0): its text, from the entries bash added for the
 * line just read, into `text`; those the user's settings would have kept
 * out are deleted, as are all of them with history off. */
void bash_command_text(struct buf *text);

#endif
