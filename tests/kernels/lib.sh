# Shared by nfs.sh and 9p.sh in a kernel-matrix VM: act as a user, check.

# as USER HOME COMMAND... : COMMAND as USER (login groups) with a clean environment.
as() {
    user=$1 home=$2; shift 2
    setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups -- \
        env -i HOME="$home" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 USER="$user" "$@"
}

fail() { echo "FAIL $*"; exit 1; }
