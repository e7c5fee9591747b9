/*
 * bash's DEBUG trap, as the prompt hook needs to know it (bash_trap.c).
 *
 * A DEBUG trap of the user's or of a prompt tool (bash-preexec, starship)
 * runs between PS0 and the command; the integration wraps it so that it
 * runs as outside the observation (see shell/prov.bash). It used to learn
 * the trap through `trap -p DEBUG` written into a capture and read back,
 * two redirections and a `read` at every prompt; the shim reads bash's own
 * trap list instead and hands the command over in a shell variable.
 */
#ifndef PROV_BASH_TRAP_H
#define PROV_BASH_TRAP_H

/* In a shell other than bash the call below does nothing (shim_shell.h). */

/* `debug-trap`, opened by PROMPT_COMMAND at its top level (inside a
 * function bash hides its DEBUG trap): sets the shell variable
 * __prov_trap to the command of the DEBUG trap, or to "" when there is
 * none, or when this bash does not export its trap list (the trap then
 * runs inside the observation, as it did before the integration knew of
 * such traps). */
void bash_debug_trap_to_variable(void);

#endif
