# AppArmor (Ubuntu's and Debian's kernels; Docker confines containers with
# its docker-default profile, which denies mount): as the ordinary user under
# a profile denying mount, `prov run` still runs the command, untraced, and
# says why in one line naming the AppArmor profile; `prov doctor` names it
# too. Two profiles: Docker's own (recognised by name) and another denying
# mount (recognised by the helper's refusal).
set -u
. /share/lib.sh
id provtest >/dev/null 2>&1 || useradd --create-home --shell /bin/bash provtest
home=/home/provtest
mountpoint -q /sys/kernel/security || mount -t securityfs securityfs /sys/kernel/security
[ -e /sys/kernel/security/apparmor/profiles ] || fail "this kernel has no AppArmor (lsm: $(cat /sys/kernel/security/lsm 2>/dev/null))"
command -v apparmor_parser >/dev/null && command -v aa-exec >/dev/null || fail "apparmor_parser or aa-exec missing (the root's recipe installs apparmor)"

# Docker's docker-default, as moby renders profiles/apparmor/template.go.
cat >/etc/apparmor.d/docker-default <<'PROFILE'
#include <tunables/global>
profile docker-default flags=(attach_disconnected,mediate_deleted) {
  #include <abstractions/base>
  network,
  capability,
  file,
  umount,
  signal (receive) peer=unconfined,
  signal (send,receive) peer=docker-default,
  deny @{PROC}/* w,
  deny @{PROC}/{[^1-9],[^1-9][^0-9],[^1-9s][^0-9y][^0-9s],[^1-9][^0-9][^0-9][^0-9/]*}/** w,
  deny @{PROC}/sys/[^k]** w,
  deny @{PROC}/sys/kernel/{?,??,[^s][^h][^m]**} w,
  deny @{PROC}/sysrq-trigger rwklx,
  deny @{PROC}/kcore rwklx,
  deny mount,
  deny /sys/[^f]*/** wklx,
  deny /sys/f[^s]*/** wklx,
  deny /sys/fs/[^c]*/** wklx,
  deny /sys/fs/c[^g]*/** wklx,
  deny /sys/fs/cg[^r]*/** wklx,
  deny /sys/firmware/** rwklx,
  deny /sys/kernel/security/** rwklx,
  ptrace (trace,read,tracedby,readby) peer=docker-default,
}
PROFILE
# Any other profile that denies mount.
cat >/etc/apparmor.d/prov-no-mount <<'PROFILE'
#include <tunables/global>
profile prov-no-mount flags=(attach_disconnected,mediate_deleted) {
  #include <abstractions/base>
  network,
  capability,
  file,
  umount,
  signal,
  ptrace,
  unix,
  deny mount,
}
PROFILE
for p in docker-default prov-no-mount; do
    apparmor_parser -r -W "/etc/apparmor.d/$p" || fail "apparmor_parser could not load $p"
done

mkdir -p /tmp/aa && chown provtest: /tmp/aa
cd /tmp/aa
for p in docker-default prov-no-mount; do
    echo "--- under $p"
    as provtest "$home" aa-exec -p "$p" -- cat /proc/self/attr/current; echo
    as provtest "$home" aa-exec -p "$p" -- "$PROV" run -- sh -c "echo ran >ran-$p.txt" >out.txt 2>err.txt
    rc=$?
    cat err.txt
    [ "$rc" = 0 ] || fail "under $p: prov run exited $rc"
    [ "$(cat "ran-$p.txt" 2>/dev/null)" = ran ] || fail "under $p: the command did not run"
    [ "$(grep -c '^prov:' err.txt)" = 1 ] || fail "under $p: not one line from prov: $(cat err.txt)"
    grep -q "^prov: not tracing: .*AppArmor profile $p" err.txt || fail "under $p: prov's line does not name the AppArmor profile: $(cat err.txt)"
    as provtest "$home" aa-exec -p "$p" -- "$PROV" doctor >doctor.txt 2>&1
    cat doctor.txt
    grep -q "^FAIL .*AppArmor profile $p" doctor.txt || fail "under $p: prov doctor does not name the AppArmor profile"
done
# Unconfined, the same user is traced.
as provtest "$home" "$PROV" run -- sh -c 'echo free >free.txt' 2>err.txt || fail "unconfined prov run failed"
! grep -q "not tracing" err.txt || fail "unconfined: $(cat err.txt)"
echo "apparmor: ok"
