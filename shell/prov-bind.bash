# prov's Ctrl-R for bash, added by `prov init bash --bind-ctrl-r` (or
# [browse] bind_ctrl_r = true): Ctrl-R opens `prov browse` with the line
# typed so far as its search; the command chosen replaces the line, not run.
if [[ $- == *i* ]]; then
    __prov_browse() {
        local chosen
        if chosen=$(@PROV@ browse --query "$READLINE_LINE" 2>/dev/tty </dev/tty); then
            READLINE_LINE=$chosen
            READLINE_POINT=${#chosen}
        fi
    }
    bind -x '"\C-r": __prov_browse'
fi
