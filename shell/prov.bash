# prov shell integration for bash >= 4.4, printed by `prov init bash`.
# Put this line last in ~/.bashrc:   eval "$(prov init bash)"
# Ctrl-R opens `prov browse` and puts the command chosen on the prompt line
# with `prov init bash --bind-ctrl-r` (or [browse] bind_ctrl_r = true).
#
# At rc time, the first run re-execs the interactive shell with the preload
# shim (it must be in the process from the start); the shim drops itself from
# LD_PRELOAD, so no child inherits it. With the shim loaded:
# - PS0 (expanded after a line is read, before any of it runs, redirections
#   included) starts the observation through a strftime format the shim knows;
# - the first PROMPT_COMMAND entry ends it with the exit status and the text.
# The text is taken from bash's history list by the shim when the command
# starts; so that every line gets an entry, HISTCONTROL, HISTIGNORE and
# HISTSIZE=0 are neutralised while a line is read, the shim applies the
# user's values itself (deleting what bash would have kept out) and puts
# them back before the command runs. `set +o history` is handled in the shim.
# The shim does this, and keeps PS0's part last, on bash's variables itself
# (preload/bash_prompt.h): as shell code here, it was most of what the hook
# cost at every prompt.
__prov_shim=@PRELOAD@
if [[ $- == *i* ]]; then
    if { : >| /.prov-shim-ctl/ping; } 2>/dev/null; then
        if [[ -z ${__prov_hooked-} ]]; then
            __prov_hooked=1
            __prov_status=0
            # Can the shim read bash's history list and variables (see
            # preload/bash_history.h)?
            if ! { : >| /.prov-shim-ctl/texts; } 2>/dev/null; then
                printf '%s\n' 'prov: this bash does not export its history functions: commands are recorded without their text' >&2
            fi

            # Prompt tools installed after this (bash-preexec, starship…)
            # put their hooks first: first again from the next prompt on,
            # so the command's observation ends before their programs run.
            # A DEBUG trap (theirs or the user's) runs between PS0 and the
            # command: wrapped so that it runs as outside the observation,
            # on one line (bash-preexec parses an earlier trap line-wise).
            # The shim reads bash's trap list into $__prov_trap
            # (preload/bash_trap.h); only top-level code sees the DEBUG
            # trap, hence the `debug-trap` in PROMPT_COMMAND itself.
            # First the command's end and the next line's settings (the
            # status kept for __prov_after to return, so the hooks after
            # this one see the command's).
            __prov_pc='__prov_status=$?;: >| "/.prov-shim-ctl/precmd/$__prov_status";: >| /.prov-shim-ctl/debug-trap;__prov_after'
            __prov_after() {
                if [[ ${PROMPT_COMMAND@a} == *a* ]]; then
                    if [[ ${PROMPT_COMMAND[0]} != "$__prov_pc" ]]; then
                        local entry rest=()
                        for entry in "${PROMPT_COMMAND[@]}"; do
                            [[ $entry == "$__prov_pc" ]] || rest+=("$entry")
                        done
                        PROMPT_COMMAND=("$__prov_pc" "${rest[@]}")
                    fi
                elif [[ $PROMPT_COMMAND != "$__prov_pc" && $PROMPT_COMMAND != "$__prov_pc"[\;$'\n']* ]]; then
                    local pc=${PROMPT_COMMAND//"$__prov_pc"[\;$'\n']/}
                    pc=${pc%"$__prov_pc"}
                    # No separator left at either end: `$PROMPT_COMMAND; …`
                    # appended later must stay valid.
                    while [[ $pc == [\;$'\n']* ]]; do pc=${pc#?}; done
                    while [[ $pc == *[\;$'\n'] ]]; do pc=${pc%?}; done
                    PROMPT_COMMAND=$__prov_pc${pc:+;$pc}
                fi
                if [[ -n ${__prov_trap-} && $__prov_trap != *__prov_pause* ]]; then
                    # "$_" keeps the last argument for the hook and after.
                    if eval "__prov_user_trap() { $__prov_trap
}" 2>/dev/null; then
                        builtin trap '__prov_pause "$_"; __prov_user_trap "$_"; __prov_resume "$_"' DEBUG
                    fi
                fi
                return "$__prov_status"
            }
            __prov_pause() { local s=$?; : >| /.prov-shim-ctl/pause; return $s; }
            __prov_resume() { local s=$?; : >| /.prov-shim-ctl/resume; return $s; }

            # ${__prov_b@P} in PS0 starts the command (a strftime format the
            # shim knows); last in PS0, so a $(…) of the user's there runs
            # before the command's observation starts. Set here for the
            # first line; from then on the shim keeps it last.
            __prov_b='\D{prov-shim-begin}'
            PS0=${PS0-}'${__prov_b@P}'
            if [[ -n ${PROMPT_COMMAND+set} && ${PROMPT_COMMAND@a} == *a* ]]; then
                PROMPT_COMMAND=("$__prov_pc" "${PROMPT_COMMAND[@]}")
            else
                PROMPT_COMMAND=$__prov_pc${PROMPT_COMMAND:+;$PROMPT_COMMAND}
            fi
            : >| /.prov-shim-ctl/prepare
        fi
        unset __PROV_REEXEC
    elif [[ ${__PROV_REEXEC-} == "$$" ]]; then
        # Re-exec'd with the shim, which did not load: take it back out, so
        # the programs this shell starts do not try again.
        unset __PROV_REEXEC PROV_SHIM_HELPER PROV_SHIM_PROV PROV_SHIM_SHELL
        LD_PRELOAD=${LD_PRELOAD#"$__prov_shim"}
        LD_PRELOAD=${LD_PRELOAD#:}
        [[ -n $LD_PRELOAD ]] || unset LD_PRELOAD
        printf 'prov: not tracing: the preload shim %s could not be loaded\n' "$__prov_shim" >&2
    elif [[ $- == *c* ]]; then
        : # bash -ic '...': no prompt, nothing to record
    elif [[ -n ${BASH_SOURCE[0]-} && ${BASH_LINENO[${#BASH_LINENO[@]}-1]} == 0 ]]; then
        # Read from an rc file at startup (sourced at a prompt, the bottom
        # line number is the prompt's): the only time a re-exec loses
        # nothing. The same arguments again (-l, -o …, a script), with the
        # shim, if it loads at all: ld.so only warns about one that cannot.
        __prov_rc=${BASH_SOURCE[${#BASH_SOURCE[@]}-1]}
        if [[ $__prov_rc == /dev/fd/* || $__prov_rc == /proc/*/fd/* ]]; then
            printf '%s\n' 'prov: not tracing: the rc file is read from a pipe (--rcfile <(…)), which a restart with the preload shim could not read again' >&2
        elif [[ ! -r $__prov_shim ]]; then
            printf 'prov: not tracing: the preload shim %s is missing\n' "$__prov_shim" >&2
        elif ! __prov_why=$( { LD_PRELOAD=$__prov_shim /bin/true; } 2>&1 ) || [[ -n $__prov_why ]]; then
            printf 'prov: not tracing: the preload shim %s could not be loaded\n' "$__prov_shim" >&2
        else
            __prov_args=()
            [[ -r /proc/$$/cmdline ]] && mapfile -t -d '' __prov_args < /proc/$$/cmdline
            export __PROV_REEXEC=$$
            LD_PRELOAD=$__prov_shim${LD_PRELOAD:+:$LD_PRELOAD} PROV_SHIM_HELPER=@HELPER@ \
                PROV_SHIM_PROV=@PROV@ PROV_SHIM_SHELL=bash exec -a "${__prov_args[0]:-$0}" "$BASH" "${__prov_args[@]:1}"
        fi
        unset __prov_why __prov_rc
    else
        printf '%s\n' 'prov: this shell is not traced: put  eval "$(prov init bash)"  last in ~/.bashrc and start a new shell, or try  prov shell' >&2
    fi
fi
