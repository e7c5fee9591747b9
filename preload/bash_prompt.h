/*
 * The bash prompt hook's work on bash's own variables (bash_prompt.c).
 *
 * The integration (shell/prov.bash) keeps the user's HISTCONTROL,
 * HISTIGNORE and HISTSIZE=0 out of the way while a line is read, so that
 * every line gets a history entry to take the command's text from
 * (bash_history.h), puts them back before the command runs, and keeps its
 * part of PS0 last. That was some thirty lines of shell code run at every
 * prompt, the larger part of what the hook cost bash per line
 * (benches/README.md, session 27); it is done here, through the functions
 * bash exports for loadable builtins, at the hook's one `precmd/STATUS`
 * control and at the command's start (PS0).
 *
 * A bash that does not export them gets no text (as before): nothing is
 * kept out of the way then, and nothing put back.
 */
#ifndef PROV_BASH_PROMPT_H
#define PROV_BASH_PROMPT_H

/* In a shell other than bash every call below does nothing, and so do the
 * shell's forks' (shim_shell.h). */

/* Whether commands get their text: bash's history list and variables can
 * be reached. */
int bash_prompt_texts(void);

/* The first prompt hook: 1 when a command started (PS0) since the last
 * call, which then ended; the user's settings are taken as that command
 * left them (and at the first prompt). */
int bash_prompt_command_ended(void);

/* Still in the first prompt hook: the lines read from now on are the next
 * command's (bash_line_start), with the user's settings out of the way
 * (a readonly one stays as it is), and the integration's part of PS0 is
 * put back last if something changed PS0. -1 when PS0 could not be set
 * (readonly, or an integer variable): no command starts then. */
int bash_prompt_next_line(void);

/* PS0, as the command starts, after its text was taken: the user's
 * settings back in place for the command. */
void bash_prompt_command_starts(void);

#endif
