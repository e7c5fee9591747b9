# Runs inside a kernel-matrix VM (started by /sbin/prov-init from the share):
# installs prov as a user would, runs the test binaries and the NFS and 9p
# checks, and writes one "kernel|test|verdict|seconds" line per test into
# /share/results. Its output is /share/guest.log.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
kernel=$(uname -r)
results=/share/results
: >"$results"
# What udev or systemd make on every real system and devtmpfs lacks: 5.10's
# execveat(fd, "", AT_EMPTY_PATH), which the helper starts the collector
# with, fails with ENOENT without /dev/fd (docs/kernel-facts.md).
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
for i in 0:stdin 1:stdout 2:stderr; do [ -e "/dev/${i#*:}" ] || ln -s "/proc/self/fd/${i%%:*}" "/dev/${i#*:}"; done
ip link set lo up
hostname "$(cat /etc/hostname)"
echo "guest: kernel $kernel, $(ldd --version | head -n1)"

# --- install, as a user would -----------------------------------------------
if [ -f /share/prov.deb ] && dpkg -i /share/prov.deb; then
    prefix=/usr
else
    [ ! -f /share/prov.deb ] || echo "$kernel|install|FAIL: dpkg -i of the package failed (see guest.log); the artifacts installed by hand|0" >>"$results"
    # What install.sh does, with the release artifacts instead of a build.
    a=/share/artifacts prefix=/usr/local
    getent group prov >/dev/null || groupadd --system prov
    install -d -m 0755 "$prefix/bin" "$prefix/libexec/prov" "$prefix/lib/prov"
    install -m 0755 "$a/bin/prov" "$prefix/bin/prov"
    install -m 0711 "$a/libexec/prov/prov-collector" "$prefix/libexec/prov/prov-collector"
    install -m 0755 "$a/libexec/prov/prov-writer" "$prefix/libexec/prov/prov-writer"
    install -m 0644 "$a/lib/prov/libprov_preload.so" "$prefix/lib/prov/libprov_preload.so"
    install -m 04755 -o root -g prov "$a/libexec/prov/prov-helper" "$prefix/libexec/prov/prov-helper"
    sysctl -q -w fs.fanotify.max_queued_events=131072
fi
export PROV_E2E_INSTALLED=$prefix PROV=$prefix/bin/prov

record() { # test verdict seconds
    echo "$kernel|$1|$2|$3" >>"$results"
    echo "guest: $1: $2 ($3 s)"
}

# --- the end-to-end test binaries ---------------------------------------
tests="trace shell helper_attacks"
[ "$(cat /share/quick)" = true ] && tests="trace"
[ -f /share/tests ] && tests=$(cat /share/tests)
for t in $tests; do
    start=$(date +%s)
    # The 100 000-file load test checks no kernel feature and takes most of
    # an emulated guest's time: benches/ and the host suite run it.
    RUST_TEST_THREADS=2 /share/artifacts/tests/$t --skip a_hundred_thousand_files_are_all_recorded >/share/$t.log 2>&1
    rc=$?
    summary=$(grep '^test result:' /share/$t.log | tail -n1)
    passed=$(echo "$summary" | sed -n 's/.* \([0-9]*\) passed.*/\1/p')
    failed=$(echo "$summary" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
    if [ "$rc" = 0 ]; then verdict="pass ($passed tests)"
    else verdict="FAIL (${failed:-?} of $(( ${passed:-0} + ${failed:-0} )): $(grep -o '^    [a-z0-9_:]*$' /share/$t.log | tr -d ' ' | tr '\n' ' '))"; fi
    record "$t" "$verdict" $(( $(date +%s) - start ))
done

# --- NFS home, the 9p share, an AppArmor profile denying mount ------------
for check in nfs 9p apparmor; do
    start=$(date +%s)
    if sh /share/$check.sh >/share/$check.log 2>&1; then verdict=pass
    else verdict="FAIL: $(grep '^FAIL' /share/$check.log | head -n1)"; fi
    record "$check" "$verdict" $(( $(date +%s) - start ))
done
echo "guest: done"
