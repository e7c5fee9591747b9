# prov shell integration for bash >= 4.4, printed by `prov init bash`.
# Put this line last in ~/.bashrc:   eval "$(prov init bash)"
#
# At rc time, the first run re-execs the interactive shell with the preload
# shim (it must be in the process from the start); the shim drops itself from
# LD_PRELOAD, so no child inherits it. With the shim loaded:
# - PS0 (expanded after a line is read, before any of it runs, redirections
#   included) starts the observation through a strftime format the shim knows;
# - the first PROMPT_COMMAND entry ends it with the exit status and the text.
# The text is bash's history entry for the line. So that every line gets one
# whatever HISTCONTROL, HISTIGNORE or HISTSIZE say, those are neutralised
# while a line is read and the user's values are back before the command runs
# (PS0); afterwards the entry is deleted again if the user's settings would
# have kept it out. With history switched off (`set +o history`) the shim
# keeps each line in the list while it is read, and it is deleted again.
__prov_shim=@PRELOAD@
if [[ $- == *i* ]]; then
    if { : >| /.prov-shim-ctl/ping; } 2>/dev/null; then
        if [[ -z ${__prov_hooked-} ]]; then
            __prov_hooked=1
            __prov_seq=0 __prov_done=0 __prov_empty= __prov_prev=
            __prov_num= __prov_text= __prov_synced= __prov_forced= __prov_enum= __prov_etext=
            __prov_hc=${HISTCONTROL-} __prov_hi=${HISTIGNORE-} __prov_hs=${HISTSIZE-500}

            # Would the user's settings have kept line "$1" out of the history?
            __prov_user_ignores() {
                local hc=":$__prov_hc:"
                if [[ $hc == *:ignorespace:* || $hc == *:ignoreboth:* ]] && [[ $1 == [[:space:]]* ]]; then
                    return 0
                fi
                if [[ $hc == *:ignoredups:* || $hc == *:ignoreboth:* || $hc == *:erasedups:* ]] && [[ $1 == "$__prov_prev" ]]; then
                    return 0
                fi
                local IFS=: pattern
                for pattern in $__prov_hi; do
                    [[ $pattern == '&' ]] && pattern=$__prov_prev
                    # shellcheck disable=SC2053 # a glob, as bash applies HISTIGNORE
                    [[ $1 == $pattern ]] && return 0
                done
                return 1
            }

            # The newest history entry: its text and number (empty if none).
            __prov_last_entry() {
                HISTTIMEFORMAT= builtin history 1 >| /.prov-shim-ctl/capture-history
                IFS= read -r -d '' __prov_etext < /.prov-shim-ctl/captured
                IFS= read -r __prov_enum < /.prov-shim-ctl/captured-number
            }

            __prov_precmd() {
                local status=$? ran=
                if [[ -z $__prov_synced ]]; then
                    # First prompt: the history file is loaded by now.
                    __prov_last_entry
                    __prov_num=$__prov_enum __prov_text=$__prov_etext __prov_synced=1
                fi
                ((__prov_seq != __prov_done)) && ran=1 __prov_done=$__prov_seq
                if [[ -n $ran || -n $__prov_forced ]]; then
                    __prov_last_entry
                    # A line read since the last prompt has an entry unless
                    # the newest one is still the one left last time.
                    local new=
                    [[ -n $__prov_enum && ($__prov_enum != "$__prov_num" || $__prov_etext != "$__prov_text") ]] && new=1
                    if [[ -n $ran && -n $new ]]; then
                        : >| "/.prov-shim-ctl/end-text/$status"
                    elif [[ -n $ran ]]; then
                        # No entry: history off and the shim could not keep
                        # the line (see remember-line below); text unknown.
                        : >| "/.prov-shim-ctl/end/$status"
                    fi
                    local changed=
                    if [[ -n $new ]]; then
                        if [[ -n $__prov_forced ]] || __prov_user_ignores "$__prov_etext"; then
                            builtin history -d -1 2>/dev/null || builtin history -d "$__prov_enum" 2>/dev/null
                            changed=1
                        else
                            __prov_prev=$__prov_etext
                        fi
                    fi
                    if [[ -n $ran ]]; then
                        # The user's values (PS0 restored them), as the
                        # command may have changed them.
                        __prov_hc=${HISTCONTROL-} __prov_hi=${HISTIGNORE-}
                        [[ ${HISTSIZE-500} != 1 || $__prov_hs != 0 ]] && __prov_hs=${HISTSIZE-500}
                    fi
                    ((__prov_hs == 0)) && HISTSIZE=0 changed=1
                    [[ -n $changed ]] && __prov_last_entry
                    __prov_num=$__prov_enum __prov_text=$__prov_etext
                fi
                # Neutralised while the next line is read; PS0 restores them.
                HISTCONTROL= HISTIGNORE=
                ((__prov_hs == 0)) && HISTSIZE=1
                # History switched off (set +o history): bash restores it
                # after PROMPT_COMMAND, so the shim keeps the next line in
                # the history list while it is read; it is deleted above.
                __prov_forced=
                if [[ ! -o history ]] && { : >| /.prov-shim-ctl/remember-line; } 2>/dev/null; then
                    __prov_forced=1
                fi
                [[ $PS0 == *'\D{prov-shim-begin}'* ]] || PS0=$__prov_ps0$PS0
                return $status
            }

            # Prompt expansion runs in the shell itself: an associative
            # array subscript performs the := restores and expands to
            # nothing, an indexed subscript counts the command.
            declare -gA __prov_none=()
            __prov_ps0='\D{prov-shim-begin}${__prov_none[x${HISTCONTROL:=$__prov_hc}]}${__prov_none[x${HISTIGNORE:=$__prov_hi}]}${__prov_empty[__prov_seq+=1]}'
            PS0=$__prov_ps0${PS0-}
            if [[ $(declare -p PROMPT_COMMAND 2>/dev/null) == "declare -a"* ]]; then
                PROMPT_COMMAND=(__prov_precmd "${PROMPT_COMMAND[@]}")
            else
                PROMPT_COMMAND="__prov_precmd${PROMPT_COMMAND:+;$PROMPT_COMMAND}"
            fi
            HISTCONTROL= HISTIGNORE=
            ((__prov_hs == 0)) && HISTSIZE=1
            : >| /.prov-shim-ctl/prepare
        fi
        unset __PROV_REEXEC
    elif [[ ${__PROV_REEXEC-} == "$$" ]]; then
        unset __PROV_REEXEC
        printf 'prov: not tracing: the preload shim %s could not be loaded\n' "$__prov_shim" >&2
    elif [[ -n ${BASH_SOURCE[0]-} && -r $__prov_shim ]]; then
        # Only while reading an rc file: re-exec'ing later would lose state.
        export __PROV_REEXEC=$$
        LD_PRELOAD=$__prov_shim${LD_PRELOAD:+:$LD_PRELOAD} PROV_SHIM_HELPER=@HELPER@ \
            PROV_SHIM_PROV=@PROV@ PROV_SHIM_SHELL=bash exec -a "$0" "$BASH"
    elif [[ -z ${BASH_SOURCE[0]-} ]]; then
        printf '%s\n' 'prov: add  eval "$(prov init bash)"  to ~/.bashrc, or try  prov shell' >&2
    fi
fi
