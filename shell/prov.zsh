# prov shell integration for zsh >= 5.0, printed by `prov init zsh`.
# Put this line last in ~/.zshrc:   eval "$(prov init zsh)"
#
# At rc time, the first run re-execs the interactive shell with the preload
# shim (it must be in the process from the start); the shim drops itself from
# LD_PRELOAD, so no child inherits it. preexec starts the observation with the
# line as typed ($1, given whatever the history options say), and the first
# precmd hook ends it with the exit status.
typeset -g __prov_shim=@PRELOAD@
if [[ -o interactive ]]; then
    if { : >| /.prov-shim-ctl/ping } 2>/dev/null; then
        if (( ! ${+__prov_hooked} )); then
            typeset -g __prov_hooked=1 __prov_began=0
            __prov_preexec() {
                print -rn -- "${1:-$3}" >| /.prov-shim-ctl/capture
                : >| /.prov-shim-ctl/begin
                __prov_began=1
            }
            __prov_precmd() {
                local s=$?
                if (( __prov_began )); then
                    __prov_began=0
                    : >| "/.prov-shim-ctl/end/$s"
                fi
                return $s
            }
            autoload -Uz add-zsh-hook
            add-zsh-hook preexec __prov_preexec
            # First, so it sees the command's status and ends the observation
            # before other prompt hooks run their own programs.
            precmd_functions=(__prov_precmd ${precmd_functions:#__prov_precmd})
            : >| /.prov-shim-ctl/prepare
        fi
        unset __PROV_REEXEC
    elif [[ ${__PROV_REEXEC-} == $$ ]]; then
        unset __PROV_REEXEC
        print -ru2 -- "prov: not tracing: the preload shim $__prov_shim could not be loaded"
    elif [[ ${ZSH_EVAL_CONTEXT-} == *file* && -r $__prov_shim ]]; then
        # Only while reading an rc file: re-exec'ing later would lose state.
        export __PROV_REEXEC=$$
        LD_PRELOAD=$__prov_shim${LD_PRELOAD:+:$LD_PRELOAD} PROV_SHIM_HELPER=@HELPER@ \
            PROV_SHIM_PROV=@PROV@ PROV_SHIM_SHELL=zsh exec -a "${ZSH_ARGZERO:-zsh}" "${commands[zsh]:-/bin/zsh}"
    elif [[ ${ZSH_EVAL_CONTEXT-} != *file* ]]; then
        print -ru2 -- 'prov: add  eval "$(prov init zsh)"  to ~/.zshrc, or try  prov shell'
    fi
fi
