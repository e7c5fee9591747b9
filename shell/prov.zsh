# prov shell integration for zsh >= 5.0, printed by `prov init zsh`.
# Put this line last in ~/.zshrc:   eval "$(prov init zsh)"
# Ctrl-R opens `prov browse` and puts the command chosen on the prompt line
# with `prov init zsh --bind-ctrl-r` (or [browse] bind_ctrl_r = true).
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
                __prov_keep_order
                return $s
            }
            # The observation covers the command only, not other prompt
            # tools' hooks: it starts after every other preexec hook and ends
            # before every other precmd hook, so ours are kept last and first
            # (tools set up later add theirs), and a plain precmd function,
            # which zsh runs before precmd_functions, ends it first.
            __prov_keep_order() {
                typeset -ga precmd_functions preexec_functions
                [[ ${precmd_functions[1]-} == __prov_precmd ]] ||
                    precmd_functions=(__prov_precmd ${precmd_functions:#__prov_precmd})
                [[ ${preexec_functions[-1]-} == __prov_preexec ]] ||
                    preexec_functions=(${preexec_functions:#__prov_preexec} __prov_preexec)
                if (( ${+functions[precmd]} )) && [[ ${functions[precmd]} != *__prov_precmd* ]]; then
                    functions[precmd]="__prov_precmd
${functions[precmd]}"
                fi
            }
            __prov_keep_order
            : >| /.prov-shim-ctl/prepare
        fi
        unset __PROV_REEXEC
    elif [[ ${__PROV_REEXEC-} == $$ ]]; then
        # Re-exec'd with the shim, which did not load: take it back out, so
        # the programs this shell starts do not try again.
        unset __PROV_REEXEC PROV_SHIM_HELPER PROV_SHIM_PROV PROV_SHIM_SHELL
        LD_PRELOAD=${LD_PRELOAD#$__prov_shim}
        LD_PRELOAD=${LD_PRELOAD#:}
        [[ -n $LD_PRELOAD ]] || unset LD_PRELOAD
        print -ru2 -- "prov: not tracing: the preload shim $__prov_shim could not be loaded"
    elif [[ -n ${ZSH_EXECUTION_STRING+x} || -n ${ZSH_SCRIPT-} ]]; then
        : # zsh -ic '...' or a script: no prompt, nothing to record
    elif [[ ${ZSH_EVAL_CONTEXT-} == file* ]]; then
        # Read from an rc file at startup (sourced at a prompt, the context
        # starts with toplevel): the only time a re-exec loses nothing. The
        # same arguments again (-l, -o …), with the shim, if it loads at
        # all: ld.so only warns about one that cannot.
        typeset -g __prov_why
        if [[ ! -r $__prov_shim ]]; then
            print -ru2 -- "prov: not tracing: the preload shim $__prov_shim is missing"
        elif ! __prov_why=$( { LD_PRELOAD=$__prov_shim /bin/true; } 2>&1 ) || [[ -n $__prov_why ]]; then
            print -ru2 -- "prov: not tracing: the preload shim $__prov_shim could not be loaded"
        elif [[ ! -x ${${:-/proc/$$/exe}:A} ]]; then
            print -ru2 -- "prov: not tracing: cannot find this zsh's own executable to restart it"
        else
            typeset -ga __prov_args
            # NUL-separated, NUL-terminated: the last element is empty.
            [[ -r /proc/$$/cmdline ]] && __prov_args=("${(@0)$(</proc/$$/cmdline)}") && __prov_args[-1]=()
            export __PROV_REEXEC=$$
            LD_PRELOAD=$__prov_shim${LD_PRELOAD:+:$LD_PRELOAD} PROV_SHIM_HELPER=@HELPER@ \
                PROV_SHIM_PROV=@PROV@ PROV_SHIM_SHELL=zsh \
                exec -a "${__prov_args[1]:-${ZSH_ARGZERO:-zsh}}" "${${:-/proc/$$/exe}:A}" "${(@)__prov_args[2,-1]}"
        fi
        unset __prov_why
    else
        print -ru2 -- 'prov: this shell is not traced: put  eval "$(prov init zsh)"  last in ~/.zshrc and start a new shell, or try  prov shell'
    fi
fi
