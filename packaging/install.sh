#!/usr/bin/env bash
# Installs prov on this machine. Run as root from a checkout:
#
#     sudo ./packaging/install.sh [--prefix DIR] [--queue-events N|kernel]
#                                                     (default DIR: /usr/local)
#     ./packaging/install.sh --stage DIR              (build only, see below)
#
# Builds release binaries (as the invoking user when run through sudo),
# creates the dedicated system group `prov`, and installs
#   DIR/bin/prov                     the command users run
#   DIR/libexec/prov/prov-full       prov built against glibc, when bin/prov is built
#                                    against musl: serves all but `prov run -- CMD`
#   DIR/libexec/prov/prov-helper     setuid root, group prov: the only privileged code
#   DIR/libexec/prov/prov-collector  started by the helper, runs as the user (mode 0711)
#   DIR/lib/prov/libprov_preload.so  the shim the shell integration preloads
#   DIR/libexec/prov/prov-writer     started by the collector: stores records, runs as the user
#   DIR/share/man/man1/prov*.1       the man pages (one per subcommand)
#   DIR/share/bash-completion/completions/prov, DIR/share/zsh/site-functions/_prov,
#   DIR/share/fish/vendor_completions.d/prov.fish   shell completions
#   DIR/share/doc/prov/README.md, DIR/share/doc/prov/docs/*.md   the documentation
# and sets fs.fanotify.max_queued_events to N (default 131072; `kernel`
# leaves the machine's value): a machine-wide bound that every user may
# fill in each of fs.fanotify.max_user_groups groups (see below).
# Safe to run again: it rebuilds and replaces the files.
# With --stage DIR it only builds and copies the same files into DIR, in the
# same layout, owned by the caller, without setuid, group or sysctl: the
# input of packaging/debian/build.
set -euo pipefail

prefix=/usr/local
stage=
queue=131072
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) [ $# -ge 2 ] || { echo "install.sh: --prefix needs a directory" >&2; exit 2; }
                  prefix=$2; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        --stage) [ $# -ge 2 ] || { echo "install.sh: --stage needs a directory" >&2; exit 2; }
                 stage=$2; shift 2 ;;
        --queue-events) [ $# -ge 2 ] || { echo "install.sh: --queue-events needs a number or 'kernel'" >&2; exit 2; }
                        queue=$2; shift 2 ;;
        --queue-events=*) queue=${1#--queue-events=}; shift ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) echo "install.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$prefix" in /*) ;; *) prefix=$(pwd)/$prefix ;; esac
case "$queue" in kernel) ;; ''|*[!0-9]*) echo "install.sh: --queue-events takes a number or 'kernel', not '$queue'" >&2; exit 2 ;; esac
case "$stage" in ""|/*) ;; *) stage=$(pwd)/$stage ;; esac
[ -n "$stage" ] || [ "$(id -u)" = 0 ] || { echo "install.sh: must run as root (the helper is installed setuid root)" >&2; exit 1; }

src=$(cd "$(dirname "$0")/.." && pwd)

# Build tools. A rustup toolchain of the invoking user is preferred; else the
# cargo on PATH; else Debian's, if that is new enough (Debian 12's is not).
need_rust=$(sed -n 's/^rust-version *= *"\(.*\)"/\1/p' "$src/Cargo.toml")
builder=${SUDO_USER:-root}
builder_home=$(getent passwd "$builder" | cut -d: -f6)
cargo_bin=$(PATH="$builder_home/.cargo/bin:$PATH" command -v cargo || true)
need_apt=()
command -v cc >/dev/null || need_apt+=(build-essential)
[ -n "$cargo_bin" ] || need_apt+=(cargo)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "install.sh: installing ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}" >/dev/null
    cargo_bin=$(command -v cargo)
fi
# "cargo 1.95.0 (…)" -> 1.95.0; older than rust-version cannot build the pinned crates.
have_rust=$("$cargo_bin" --version | awk '{print $2}')
if [ "$(printf '%s\n%s\n' "$need_rust" "$have_rust" | sort -V | head -n1)" != "$need_rust" ]; then
    echo "install.sh: building prov needs Rust >= $need_rust, but $cargo_bin is $have_rust; install a current toolchain for $builder with rustup (https://rustup.rs) and run this again" >&2
    exit 1
fi

target=$src/target/install
cargo=(env "PATH=$(dirname "$cargo_bin"):$PATH" CARGO_TARGET_DIR="$target" "$cargo_bin")
# The collector and the writer are linked statically (static-pie, so still
# placed at random): a `prov run` with no observation ready (the first of a
# batch job) waits for both to start, and without ld.so they start 1.2 ms
# sooner (benches/README.md). Neither calls NSS (no getpwuid, no
# getaddrinfo), which a static glibc program could not use safely: it loads
# the system's modules (docs/kernel-facts.md). Only the final link differs,
# so the flag goes to each binary alone (`cargo rustc`).
collector=("${cargo[@]}" rustc --release --locked --quiet --manifest-path "$src/Cargo.toml"
           -p prov-collect --bin prov-collector -- -C target-feature=+crt-static)
writer=("${cargo[@]}" rustc --release --locked --quiet --manifest-path "$src/Cargo.toml"
        -p prov-writer --bin prov-writer -- -C target-feature=+crt-static)
# `prov` is linked statically, at a fixed position (not PIE): dynamically,
# ld.so bound its ~200 imported symbols in libc, libm and libgcc_s, and
# libgcc_s asked the CPU who it is, at every start; as a PIE of its size
# ld.so also applied 21 000 relocations. Each costs every `prov run` and
# `prov query` (benches/README.md). It makes no NSS call, which a static
# glibc program cannot make safely (user and host names come from
# /etc/passwd or `getent`: crates/prov-model/src/names.rs). It runs as its
# user only; docs/security-model.md weighs the address randomisation its
# code and libc's give up.
cli=("${cargo[@]}" rustc --release --locked --quiet --manifest-path "$src/Cargo.toml"
     -p prov-cli --bin prov -- -C relocation-model=static -C target-feature=+crt-static)
# The setuid helper is linked statically (static-pie): every command typed
# at a traced prompt execs it, and without ld.so (which runs in secure mode
# for a setuid program, loading libc and libgcc_s) it reaches the command
# 0.4 ms sooner (benches/README.md). Against musl when the toolchain has
# the musl target (packaging/helper-target says why), else against glibc.
# docs/security-model.md weighs it: no dynamic loader in the privileged
# path, but a C library fix reaches the helper only with a rebuild.
as_builder=()
[ "$builder" = root ] || as_builder=(runuser -u "$builder" --)
helper_target=$("${as_builder[@]}" "$src/packaging/helper-target" "$(dirname "$cargo_bin")/rustc")
# A rustup toolchain without the target gets it (once, for its user): the
# fixed cost of a command meets its goal only with it (benches/README.md).
rustup_bin=$(dirname "$cargo_bin")/rustup
if [ -z "$helper_target" ] && [ -x "$rustup_bin" ]; then
    echo "install.sh: adding the musl target to $builder's Rust toolchain (rustup target add $(uname -m)-unknown-linux-musl)"
    "${as_builder[@]}" "$rustup_bin" target add "$(uname -m)-unknown-linux-musl" >/dev/null 2>&1 \
        || echo "install.sh: rustup could not add the musl target (offline?)"
    helper_target=$("${as_builder[@]}" "$src/packaging/helper-target" "$(dirname "$cargo_bin")/rustc")
fi
if [ -n "$helper_target" ]; then
    helper=("${cargo[@]}" build --release --locked --quiet --manifest-path "$src/Cargo.toml"
            -p prov-helper --bin prov-helper --target "$helper_target")
    helper_bin=$target/$helper_target/release/prov-helper
else
    echo "install.sh: the helper is linked against glibc; with the musl target ($(uname -m)-unknown-linux-musl, from rustup) every traced command would start 0.3 ms sooner"
    # Only the final link differs, so the flag goes to that crate alone (`cargo rustc`).
    helper=("${cargo[@]}" rustc --release --locked --quiet --manifest-path "$src/Cargo.toml"
            -p prov-helper --bin prov-helper -- -C target-feature=+crt-static)
    helper_bin=$target/release/prov-helper
fi
# `prov` itself is built a second time against musl when it can be (the C
# in SQLite and ring needs musl-gcc, from Debian's musl-tools): installed
# as bin/prov, it serves `prov run -- CMD`, which then starts 0.3 ms
# sooner, and hands every other subcommand to the glibc build, installed
# as libexec/prov/prov-full, on which SQLite's queries run up to 2.7 times
# faster (crates/prov-cli/src/full_build.rs, benches/README.md).
front=()
if [ -n "$helper_target" ]; then
    if ! command -v musl-gcc >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "install.sh: installing musl-tools" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq musl-tools >/dev/null 2>&1 \
            || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq musl-tools >/dev/null 2>&1; } || true
    fi
    if command -v musl-gcc >/dev/null; then
        # Only `prov run`'s code (`--features front`): a run then faults in
        # and unmaps fewer pages of its program (full_build.rs).
        front=("${cargo[@]}" rustc --release --locked --quiet --manifest-path "$src/Cargo.toml"
               -p prov-cli --bin prov --target "$helper_target" --features front -- -C relocation-model=static)
    else
        echo "install.sh: prov is built against glibc only; with musl-gcc (Debian's musl-tools) every prov run would start 0.3 ms sooner" >&2
    fi
fi
# A build from scratch takes minutes (about ten on two cores): each step
# says what it builds and, once done, how long it took. Progress goes to
# standard error, as cargo's does: standard output is what a caller keeps
# (packaging/debian/build prints the package's path there).
steps=5
[ ${#front[@]} -eq 0 ] || steps=6
step=0
build() {
    local what=$1 started=$SECONDS
    shift
    step=$((step + 1))
    echo "install.sh: [$step/$steps] building $what" >&2
    if [ "$builder" != root ]; then
        runuser -u "$builder" -- "$@"
    else
        "$@"
    fi
    echo "install.sh: [$step/$steps] built $what in $((SECONDS - started)) s" >&2
}
[ "$builder" = root ] || install -d -o "$builder" "$target"
echo "install.sh: building prov in $target (from scratch: about ten minutes on two cores; again: seconds)" >&2
build "the collector" "${collector[@]}"
build "the writer" "${writer[@]}"
build "prov" "${cli[@]}"
build "the helper" "${helper[@]}"
[ ${#front[@]} -eq 0 ] || build "prov run's musl build" "${front[@]}"
# bin/prov, and the full build beside the helper when bin/prov is the musl one.
if [ ${#front[@]} -gt 0 ]; then
    prov_bin=$target/$helper_target/release/prov
    full_bin=$target/release/prov
else
    prov_bin=$target/release/prov
    full_bin=
fi

# The preload shim is C: tiny, no Rust runtime in the user's shell.
# Its hooks replace functions glibc declares __nonnull (open, fopen, execve,
# strftime, ...), yet programs do pass NULL there, and the shim must then
# behave like the real function (EFAULT; Linux runs execve with a NULL argv),
# not crash the user's shell. So it tests those arguments for NULL:
# - -fno-delete-null-pointer-checks: GCC would otherwise drop NULL tests it
#   deems redundant because of the __nonnull declarations or an earlier use.
#   (GCC 12 still folds a test of the hook's own __nonnull parameter, e.g.
#   execve's `!path`, measured in its assembly: this flag is no full guarantee.)
# - -Wno-nonnull-compare: those tests are deliberate, and GCC warns on each
#   (execve's path and argv, strftime's format), which -Werror makes fatal.
step=$((step + 1))
echo "install.sh: [$step/$steps] building the preload shim" >&2
cc -O2 -shared -fPIC -fvisibility=hidden -fno-delete-null-pointer-checks \
    -Wall -Wextra -Werror -Wmissing-prototypes -Wno-nonnull-compare \
    -o "$target/libprov_preload.so" "$src/preload/prov_preload.c" "$src/preload/bash_history.c" "$src/preload/bash_trap.c" "$src/preload/bash_prompt.c" "$src/preload/shim_env.c" -ldl

if [ -n "$stage" ]; then
    install -d -m 0755 "$stage/bin" "$stage/libexec/prov" "$stage/lib/prov"
    install -m 0755 "$prov_bin" "$stage/bin/prov"
    install -m 0755 "$helper_bin" "$target/release/prov-collector" "$target/release/prov-writer" \
        "$stage/libexec/prov/"
    [ -z "$full_bin" ] || install -m 0755 "$full_bin" "$stage/libexec/prov/prov-full"
    install -m 0644 "$target/libprov_preload.so" "$stage/lib/prov/libprov_preload.so"
    exit 0
fi

getent group prov >/dev/null || groupadd --system prov

install -d -m 0755 -o root -g root "$prefix/bin" "$prefix/libexec/prov" "$prefix/lib/prov"
install -m 0755 -o root -g root "$prov_bin" "$prefix/bin/prov"
if [ -n "$full_bin" ]; then
    install -m 0755 -o root -g root "$full_bin" "$prefix/libexec/prov/prov-full"
else
    # An earlier install's full build: nothing execs it now.
    rm -f "$prefix/libexec/prov/prov-full"
fi
# Not readable by users: the kernel then starts it non-dumpable, so nobody
# can take the fanotify group out of it (the helper refuses it otherwise).
install -m 0711 -o root -g root "$target/release/prov-collector" "$prefix/libexec/prov/prov-collector"
# install(1) sets ownership before the mode, so the setuid bit stays.
# The helper before the shim: a shell started in between gets the new shim,
# whose join arguments (ENV_FD `-`) an older helper refuses; the new helper
# still takes an older shim's.
install -m 04755 -o root -g prov "$helper_bin" "$prefix/libexec/prov/prov-helper"
install -m 0644 -o root -g root "$target/libprov_preload.so" "$prefix/lib/prov/libprov_preload.so"
# Found by the collector next to itself; holds nothing privileged.
install -m 0755 -o root -g root "$target/release/prov-writer" "$prefix/libexec/prov/prov-writer"

# Man pages and completions, generated by the binary just installed from
# its own command definitions, so they match its --help; and the README
# (the man pages and `prov --help` point to it) with the docs it links to.
# A directory of this run's own: installs into several prefixes may run at
# once from one checkout (the tests do).
docs=$(mktemp -d "$target/share.XXXXXX")
"$target/release/prov" __docs "$docs"
(cd "$docs" && find . -type f) | while read -r f; do
    install -D -m 0644 -o root -g root "$docs/$f" "$prefix/share/$f"
done
rm -rf "$docs"
install -D -m 0644 -o root -g root "$src/README.md" "$prefix/share/doc/prov/README.md"
install -d -m 0755 -o root -g root "$prefix/share/doc/prov/docs"
install -m 0644 -o root -g root "$src"/docs/*.md "$prefix/share/doc/prov/docs/"

# Each observation's fanotify queue is bounded by fs.fanotify.max_queued_events
# (the helper asks for no unlimited queue: a user could stop their collector
# and pin kernel memory without end). The collector empties the queue into a
# backlog of at most its descriptor limit, so a burst beyond both is lost and
# the record says so. The kernel's 16384 lost events of `xargs touch` of
# 100 000 files here; 131072 lost none in the benchmarks (benches/README.md).
# The setting is machine-wide: it bounds every fanotify group, prov's or not,
# and any user may create fs.fanotify.max_user_groups groups (128 by default)
# and fill them, at roughly 96 bytes of kernel memory per queued event
# (charged to the user's memory cgroup): 131072 lets each user pin about
# 1.6 GB, the kernel's 16384 about 200 MB. The administrator chooses
# (--queue-events; `prov doctor` shows the figure); the value is said here,
# and an administrator's higher value is kept.
if [ "$queue" != kernel ]; then
    queue_conf=/etc/sysctl.d/60-prov.conf
    have_queue=$(cat /proc/sys/fs/fanotify/max_queued_events 2>/dev/null || echo 0)
    groups=$(cat /proc/sys/fs/fanotify/max_user_groups 2>/dev/null || echo 128)
    if [ "$have_queue" -lt "$queue" ]; then
        if [ -d /etc/sysctl.d ] && ! grep -qs max_queued_events "$queue_conf"; then
            echo "fs.fanotify.max_queued_events = $queue" > "$queue_conf"
        fi
        if sysctl -q -w fs.fanotify.max_queued_events="$queue" 2>/dev/null; then
            echo "install.sh: fs.fanotify.max_queued_events is now $queue: each user may queue up to $((groups * queue * 96 / 1000000)) MB of kernel memory in fanotify events ($groups groups); --queue-events N or 'kernel' chooses otherwise"
        else
            echo "install.sh: warning: cannot raise fs.fanotify.max_queued_events to $queue (it is $have_queue): bulk commands may lose events, and their records will say so" >&2
        fi
    fi
fi

if findmnt -n -o OPTIONS -T "$prefix/libexec/prov" 2>/dev/null | tr , '\n' | grep -qx nosuid; then
    echo "install.sh: warning: $prefix is on a filesystem mounted nosuid; tracing will not work there" >&2
fi
echo "prov installed in $prefix (helper: $prefix/libexec/prov/prov-helper, setuid root, group prov)"
# A prefix outside the places shells, man and completion look by default:
# the lines that make prov, its man pages and completions reachable.
case ":/usr/local/bin:/usr/bin:/bin:" in
    *":$prefix/bin:"*) ;;
    *)
        echo "$prefix/bin is not on the usual PATH: for prov, man prov and completion, add before the line below"
        echo "  to ~/.bashrc:  export PATH=\"$prefix/bin:\$PATH\" MANPATH=\"$prefix/share/man:\$MANPATH\"; . $prefix/share/bash-completion/completions/prov"
        echo "  to ~/.zshrc:   export PATH=\"$prefix/bin:\$PATH\" MANPATH=\"$prefix/share/man:\$MANPATH\"; fpath=($prefix/share/zsh/site-functions \$fpath)  (before compinit)"
        ;;
esac
# The one thing left for each user: the shell integration (README.md).
echo "To trace your shell, add to ~/.bashrc: eval \"\$($prefix/bin/prov init bash)\"  (or to ~/.zshrc: eval \"\$($prefix/bin/prov init zsh)\")"
