# prov's Ctrl-R for zsh, added by `prov init zsh --bind-ctrl-r` (or
# [browse] bind_ctrl_r = true): Ctrl-R opens `prov browse` with the line
# typed so far as its search; the command chosen replaces the line, not run.
if [[ -o interactive ]]; then
    __prov_browse() {
        local chosen
        if chosen=$(@PROV@ browse --query "$BUFFER" 2>/dev/tty </dev/tty); then
            BUFFER=$chosen
            CURSOR=${#BUFFER}
        fi
        zle reset-prompt
    }
    zle -N __prov_browse
    bindkey '^R' __prov_browse
fi
