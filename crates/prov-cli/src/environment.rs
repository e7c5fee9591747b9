//! Where prov runs, as `prov doctor` (and `prov run`, before it tries) sees
//! it: WSL, a container, a capability or AppArmor profile that stops the
//! helper, a helper on a nosuid mount, a kernel too old, a database on a
//! network filesystem. Each finding says what it means and what to do.
//!
//! The facts are read once from /proc ([`Facts::read`]) and judged by pure
//! functions, so the judging is tested on text copied from those machines.

use std::path::{Path, PathBuf};

/// The oldest kernel prov is tested on (Debian 11's 5.10, tests/kernels).
/// Older ones lack system calls prov needs: close_range (5.9), openat2 (5.6),
/// pidfd_open (5.3) (docs/kernel-facts.md).
const MIN_KERNEL: (u32, u32) = (5, 10);

/// Capabilities the setuid helper uses as root: creating the namespace and
/// marking its mounts (SYS_ADMIN), opening the namespace of the user's
/// non-dumpable holder process to join it (SYS_PTRACE: /proc/PID/ns/mnt of
/// another uid's process; found missing in a Docker container), entering it
/// and putting the caller's root back (SYS_CHROOT), and dropping to the user
/// (SETUID, SETGID). A container or session whose bounding set lacks one
/// cannot give it to the helper.
const HELPER_CAPABILITIES: &[(u32, &str)] =
    &[(21, "SYS_ADMIN"), (19, "SYS_PTRACE"), (18, "SYS_CHROOT"), (7, "SETUID"), (6, "SETGID")];

/// Filesystem types (mountinfo's names) shared over a network or with a VM
/// host: SQLite's locks and shared memory there depend on the server.
/// prov-store's list, which also decides the journal mode.
const NETWORK_FS: &[&str] = prov_store::NETWORK_FSTYPES;

/// What the machine says about itself; each field is the text of one file.
#[derive(Default)]
pub struct Facts {
    /// /proc/version
    pub proc_version: String,
    /// /proc/self/status (CapBnd)
    pub status: String,
    /// /proc/self/mountinfo
    pub mountinfo: String,
    /// /proc/self/uid_map
    pub uid_map: String,
    /// /proc/self/attr/apparmor/current (or attr/current); empty without AppArmor
    pub apparmor: String,
    /// /proc/1/cgroup
    pub pid1_cgroup: String,
    /// /.dockerenv exists
    pub dockerenv: bool,
    /// /run/.containerenv exists (Podman)
    pub containerenv: bool,
}

fn text(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

impl Facts {
    pub fn read() -> Facts {
        Facts {
            proc_version: text("/proc/version"),
            mountinfo: text("/proc/self/mountinfo"),
            uid_map: text("/proc/self/uid_map"),
            ..Facts::read_for_helper()
        }
    }

    /// Only what [`blocked_helper`] needs: it runs before every traced command.
    fn read_for_helper() -> Facts {
        let apparmor = match text("/proc/self/attr/apparmor/current") {
            t if t.is_empty() => text("/proc/self/attr/current"),
            t => t,
        };
        Facts {
            status: text("/proc/self/status"),
            apparmor,
            pid1_cgroup: text("/proc/1/cgroup"),
            dockerenv: Path::new("/.dockerenv").exists(),
            containerenv: Path::new("/run/.containerenv").exists(),
            ..Facts::default()
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Severity {
    /// Tracing cannot work until this is changed.
    Fail,
    /// Worth knowing; tracing works.
    Note,
}

#[derive(Debug)]
pub struct Finding {
    pub severity: Severity,
    pub text: String,
}

fn fail(text: String) -> Finding {
    Finding { severity: Severity::Fail, text }
}

fn note(text: String) -> Finding {
    Finding { severity: Severity::Note, text }
}

/// What stops the helper before it starts, in one line naming what to
/// change (for `prov run` and the shell, which then run untraced).
pub fn blocked_helper() -> Option<String> {
    blocked_helper_in(&Facts::read_for_helper())
}

fn blocked_helper_in(facts: &Facts) -> Option<String> {
    let container = container(facts);
    if let Some(caps) = missing_capabilities(&facts.status) {
        return Some(match container {
            Some(_) => format!(
                "this container lacks {}, which prov's helper needs: start it with `docker run {}`",
                caps.iter().map(|c| format!("CAP_{c}")).collect::<Vec<_>>().join(", "),
                caps.iter().map(|c| format!("--cap-add {c}")).collect::<Vec<_>>().join(" ")
            ),
            None => format!(
                "this session cannot hold {} (dropped from its capability bounding set), which prov's helper needs",
                caps.iter().map(|c| format!("CAP_{c}")).collect::<Vec<_>>().join(", ")
            ),
        });
    }
    if docker_apparmor(&facts.apparmor) {
        return Some(match container {
            Some(_) => "this container's AppArmor profile docker-default denies mount, which prov's helper needs: start it with `docker run --security-opt apparmor=unconfined`".into(),
            None => "AppArmor profile docker-default denies mount, which prov's helper needs: run prov outside that profile".into(),
        });
    }
    None
}

/// The helper's failure `error`, said as the AppArmor denial it is when
/// this process is confined by an enforcing profile and the helper was
/// refused permission (a profile denying mount, as Docker's does, fails its
/// first mount with EACCES); None otherwise.
pub fn apparmor_denial(error: &str) -> Option<String> {
    apparmor_denial_in(&Facts::read_for_helper(), error)
}

fn apparmor_denial_in(facts: &Facts, error: &str) -> Option<String> {
    let profile = confined(&facts.apparmor)?;
    if !(error.contains("Permission denied") || error.contains("os error 13")) {
        return None;
    }
    let remedy = match container(facts) {
        Some(_) => "start the container with `--security-opt apparmor=unconfined` or a profile allowing mount",
        None => "run prov outside that profile, or allow mount in it",
    };
    Some(format!("AppArmor profile {profile} denied prov's helper ({error}): {remedy}"))
}

/// The enforced AppArmor profile this process runs under, if any.
pub fn apparmor_profile() -> Option<String> {
    confined(&Facts::read_for_helper().apparmor).map(str::to_string)
}

pub fn assess(facts: &Facts, helper: &Path, database: Option<&Path>) -> Vec<Finding> {
    let mut found = Vec::new();
    let release = kernel_release(&facts.proc_version);
    let wsl = is_wsl(&facts.proc_version);
    if wsl {
        let wsl1 = facts.proc_version.contains("Microsoft@Microsoft.com");
        found.push(if wsl1 {
            fail("this is WSL 1, which emulates Linux without a Linux kernel and has no fanotify: convert the distribution with `wsl --set-version <distro> 2` (in Windows)".into())
        } else {
            note("this is WSL 2: tracing works; files under /mnt/c (drvfs) are recorded when changed from Linux, never when changed from Windows, which fanotify cannot see".into())
        });
    }
    match release.and_then(|r| version_of(&r).map(|v| (r, v))) {
        Some((release, version)) if version < MIN_KERNEL && !wsl => found.push(fail(format!(
            "kernel {release} is older than {}.{}, the oldest prov supports (it lacks close_range, openat2 or pidfd_open): commands run untraced; use a newer kernel",
            MIN_KERNEL.0, MIN_KERNEL.1
        ))),
        _ => {}
    }
    let container = container(facts);
    if let Some(kind) = container {
        let caps = match missing_capabilities(&facts.status) {
            None => "it has the capabilities prov's helper needs",
            Some(_) => "prov's helper needs it started with `--cap-add SYS_ADMIN --cap-add SYS_PTRACE`",
        };
        found.push(note(format!("running in a {kind} container: {caps} (packaging/docker/README.md)")));
    }
    if !initial_user_namespace(&facts.uid_map) {
        found.push(fail("this runs in a user namespace (rootless Docker or Podman, an unprivileged container): fanotify mount marks need CAP_SYS_ADMIN of the host, which no process here can have; run prov on the host or in a rootful container".into()));
    }
    if let Some(caps) = missing_capabilities(&facts.status) {
        let why = "the helper creates each command's mount namespace and its fanotify marks as root and needs these; without them every command runs untraced";
        found.push(fail(match blocked_helper_in(facts) {
            Some(line) => format!("{line} ({why})"),
            None => format!("missing {}: {why}", caps.join(", ")),
        }));
    }
    if docker_apparmor(&facts.apparmor) || (container.is_some() && confined(&facts.apparmor).is_some()) {
        let profile = confined(&facts.apparmor).unwrap_or_default();
        found.push(if docker_apparmor(&facts.apparmor) {
            fail(format!(
                "AppArmor profile {profile} denies mount, which the helper needs to set up each command's namespace: {}",
                match container {
                    Some(_) => "start the container with `--security-opt apparmor=unconfined` (or a profile allowing mount)",
                    None => "run prov outside that profile (or under one allowing mount)",
                }
            ))
        } else {
            note(format!("confined by AppArmor profile {profile}: if tracing fails, the kernel log (journalctl -k) shows its apparmor=\"DENIED\" lines"))
        });
    }
    if let Some(mount) = mount_of(&facts.mountinfo, helper) {
        if mount.options.split(',').any(|o| o == "nosuid") {
            found.push(fail(format!(
                "the helper {} is on {}, mounted nosuid: the kernel ignores its setuid bit, so it cannot set up tracing; install prov on a filesystem without nosuid (a package or install.sh's default /usr/local), or remount {} without nosuid",
                resolved(helper).display(),
                mount.mount_point.display(),
                mount.mount_point.display()
            )));
        }
    }
    if let Some(db) = database {
        if let Some(mount) = mount_of(&facts.mountinfo, db) {
            if NETWORK_FS.contains(&mount.fstype.as_str()) {
                found.push(note(format!(
                    "the database {} is on {} ({}), a network filesystem: prov writes it with a rollback journal instead of WAL and relies on the server's file locks; commands are traced as usual, but only their own writes there are seen, not other machines'; if `prov` reports the database locked, set database.path to a local disk",
                    db.display(),
                    mount.fstype,
                    mount.mount_point.display()
                )));
            }
        }
    }
    found
}

/// "Linux version 6.1.0-28-amd64 (…)" -> "6.1.0-28-amd64"
fn kernel_release(proc_version: &str) -> Option<String> {
    proc_version.strip_prefix("Linux version ")?.split_whitespace().next().map(str::to_owned)
}

/// "5.10.0-33-amd64" -> (5, 10)
fn version_of(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

fn is_wsl(proc_version: &str) -> bool {
    proc_version.to_ascii_lowercase().contains("microsoft")
}

fn container(facts: &Facts) -> Option<&'static str> {
    if facts.dockerenv {
        return Some("Docker");
    }
    if facts.containerenv {
        return Some("Podman");
    }
    let cgroup = &facts.pid1_cgroup;
    if cgroup.contains("/docker/") || cgroup.contains("/docker-") {
        Some("Docker")
    } else if cgroup.contains("kubepods") {
        Some("Kubernetes")
    } else if cgroup.contains("/lxc/") || cgroup.contains("/lxc.payload") {
        Some("LXC")
    } else {
        None
    }
}

/// The capabilities the helper needs that the bounding set (CapBnd) lacks;
/// a setuid root program gets no capability outside it.
fn missing_capabilities(status: &str) -> Option<Vec<&'static str>> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapBnd:"))?.trim();
    let bounding = u64::from_str_radix(hex, 16).ok()?;
    let missing: Vec<&str> =
        HELPER_CAPABILITIES.iter().filter(|(bit, _)| bounding & (1 << bit) == 0).map(|&(_, name)| name).collect();
    (!missing.is_empty()).then_some(missing)
}

/// The initial user namespace maps all 2^32 ids onto themselves.
fn initial_user_namespace(uid_map: &str) -> bool {
    let fields: Vec<&str> = uid_map.split_whitespace().collect();
    uid_map.trim().is_empty() || fields == ["0", "0", "4294967295"]
}

/// The enforced AppArmor profile's name, if any ("unconfined" is none).
fn confined(apparmor: &str) -> Option<&str> {
    let profile = apparmor.trim().trim_end_matches('\0');
    let name = profile.strip_suffix(" (enforce)")?;
    Some(name)
}

/// Docker's default profile has `deny mount,`.
fn docker_apparmor(apparmor: &str) -> bool {
    confined(apparmor) == Some("docker-default")
}

struct Mount {
    mount_point: PathBuf,
    options: String,
    fstype: String,
}

/// The mount `path` is on: the last-mounted entry of mountinfo whose mount
/// point is the longest prefix of `path` (or of its nearest existing
/// ancestor, resolved, when `path` exists on this machine).
fn mount_of(mountinfo: &str, path: &Path) -> Option<Mount> {
    let path = resolved(path);
    let mut best: Option<Mount> = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let fields: Vec<&str> = left.split(' ').collect();
        let (Some(point), Some(options)) = (fields.get(4), fields.get(5)) else { continue };
        let point = PathBuf::from(unescape(point));
        if !path.starts_with(&point) {
            continue;
        }
        if best.as_ref().is_some_and(|b| b.mount_point.as_os_str().len() > point.as_os_str().len()) {
            continue;
        }
        let fstype = right.split(' ').next().unwrap_or_default().to_owned();
        best = Some(Mount { mount_point: point, options: options.to_string(), fstype });
    }
    best
}

/// The path with symbolic links resolved as far as it exists.
fn resolved(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            return rest.iter().rev().fold(real, |p, c| p.join(c));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// mountinfo writes space, tab, newline and backslash as \040 etc.
pub(crate) fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u8::from_str_radix(d, 8).ok());
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST_VERSION: &str = "Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)\n";
    const WSL2_VERSION: &str = "Linux version 5.15.153.1-microsoft-standard-WSL2 (root@941d701f84f1) (gcc (GCC) 11.2.0, GNU ld (GNU Binutils) 2.37) #1 SMP Fri Mar 29 23:14:13 UTC 2024\n";
    const WSL1_VERSION: &str = "Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com) (gcc version 5.4.0 (GCC) ) #1237-Microsoft Sat Sep 11 14:32:00 PST 2021\n";
    const RHEL8_VERSION: &str = "Linux version 4.18.0-513.5.1.el8_9.x86_64 (mockbuild@x86-64-01.build.eng.rdu2.redhat.com) (gcc version 8.5.0 20210514 (Red Hat 8.5.0-20) (GCC)) #1 SMP Fri Sep 29 05:21:10 EDT 2023\n";
    /// Docker's default capabilities: no SYS_ADMIN.
    const DOCKER_DEFAULT_STATUS: &str = "Name:\tcat\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t00000000a80425fb\nCapAmb:\t0000000000000000\n";
    /// `docker run --cap-add SYS_ADMIN --cap-add SYS_PTRACE`
    const DOCKER_GRANTED_STATUS: &str = "CapEff:\t0000000000000000\nCapBnd:\t00000000a82c25fb\n";
    /// `docker run --cap-add SYS_ADMIN`
    const DOCKER_SYS_ADMIN_STATUS: &str = "CapEff:\t0000000000000000\nCapBnd:\t00000000a82425fb\n";
    const HOST_STATUS: &str = "CapEff:\t0000000000000000\nCapBnd:\t000001ffffffffff\n";
    const FULL_UID_MAP: &str = "         0          0 4294967295\n";
    const ROOTLESS_UID_MAP: &str = "         0       1000          1\n         1     100000      65536\n";
    const DOCKER_CGROUP_V1: &str = "12:pids:/docker/4f1c0ad1e2b4\n1:name=systemd:/docker/4f1c0ad1e2b4\n";
    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
25 22 0:5 / /dev rw,nosuid - devtmpfs udev rw
40 22 8:17 / /opt/tools rw,nosuid,nodev,relatime shared:20 - ext4 /dev/sdb1 rw
41 22 0:52 / /home rw,relatime shared:21 - nfs4 server:/export/home rw,vers=4.2
42 41 0:53 / /home/ann/my\\040disk rw,relatime shared:22 - ext4 /dev/sdc1 rw
";

    fn facts() -> Facts {
        Facts {
            proc_version: HOST_VERSION.into(),
            status: HOST_STATUS.into(),
            mountinfo: MOUNTINFO.into(),
            uid_map: FULL_UID_MAP.into(),
            ..Facts::default()
        }
    }

    fn texts(facts: &Facts, helper: &str, db: Option<&str>) -> Vec<String> {
        assess(facts, Path::new(helper), db.map(Path::new))
            .into_iter()
            .map(|f| format!("{:?}: {}", f.severity, f.text))
            .collect()
    }

    const HELPER: &str = "/nonexistent-prov/usr/libexec/prov/prov-helper";

    #[test]
    fn a_plain_host_has_nothing_to_say() {
        assert_eq!(texts(&facts(), HELPER, Some("/nonexistent-prov/var/db.sqlite")), Vec::<String>::new());
        assert_eq!(blocked_helper_in(&facts()), None);
    }

    #[test]
    fn wsl2_is_a_note_wsl1_a_failure() {
        let wsl2 = Facts { proc_version: WSL2_VERSION.into(), ..facts() };
        let found = texts(&wsl2, HELPER, None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("Note: this is WSL 2") && found[0].contains("/mnt/c"), "{found:?}");
        let wsl1 = Facts { proc_version: WSL1_VERSION.into(), ..facts() };
        let found = texts(&wsl1, HELPER, None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("Fail: this is WSL 1") && found[0].contains("wsl --set-version"), "{found:?}");
    }

    #[test]
    fn a_kernel_older_than_the_minimum_fails() {
        let rhel8 = Facts { proc_version: RHEL8_VERSION.into(), ..facts() };
        let found = texts(&rhel8, HELPER, None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("Fail: kernel 4.18.0-513.5.1.el8_9.x86_64 is older than 5.10"), "{found:?}");
        let bullseye = Facts { proc_version: "Linux version 5.10.0-33-amd64 (x) #1\n".into(), ..facts() };
        assert_eq!(texts(&bullseye, HELPER, None), Vec::<String>::new());
    }

    #[test]
    fn a_container_without_sys_admin_names_the_docker_option() {
        let docker = Facts { status: DOCKER_DEFAULT_STATUS.into(), dockerenv: true, ..facts() };
        assert_eq!(
            blocked_helper_in(&docker).as_deref(),
            Some("this container lacks CAP_SYS_ADMIN, CAP_SYS_PTRACE, which prov's helper needs: start it with `docker run --cap-add SYS_ADMIN --cap-add SYS_PTRACE`")
        );
        let found = texts(&docker, HELPER, None);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].starts_with("Note: running in a Docker container"), "{found:?}");
        assert!(
            found[1].starts_with("Fail: this container lacks CAP_SYS_ADMIN") && found[1].contains("mount namespace")
        );

        let half = Facts { status: DOCKER_SYS_ADMIN_STATUS.into(), dockerenv: true, ..facts() };
        assert_eq!(
            blocked_helper_in(&half).as_deref(),
            Some("this container lacks CAP_SYS_PTRACE, which prov's helper needs: start it with `docker run --cap-add SYS_PTRACE`")
        );
        let granted = Facts { status: DOCKER_GRANTED_STATUS.into(), ..docker };
        assert_eq!(blocked_helper_in(&granted), None);
        assert_eq!(texts(&granted, HELPER, None).len(), 1, "only the note that this is a container");
    }

    #[test]
    fn a_container_is_recognised_by_its_cgroup_too() {
        let docker = Facts { pid1_cgroup: DOCKER_CGROUP_V1.into(), ..facts() };
        assert_eq!(container(&docker), Some("Docker"));
        let podman = Facts { containerenv: true, ..facts() };
        assert_eq!(container(&podman), Some("Podman"));
        assert_eq!(container(&Facts { pid1_cgroup: "0::/\n".into(), ..facts() }), None);
    }

    #[test]
    fn a_session_without_the_capability_outside_a_container_says_so() {
        let dropped = Facts { status: "CapBnd:\t000001ffffdfffff\n".into(), ..facts() };
        let line = blocked_helper_in(&dropped).unwrap();
        assert!(line.contains("CAP_SYS_ADMIN") && line.contains("bounding set") && !line.contains("docker"), "{line}");
    }

    #[test]
    fn docker_default_apparmor_profile_is_a_failure_naming_the_option() {
        let docker = Facts {
            apparmor: "docker-default (enforce)\n".into(),
            status: DOCKER_GRANTED_STATUS.into(),
            dockerenv: true,
            ..facts()
        };
        let line = blocked_helper_in(&docker).unwrap();
        assert!(line.contains("--security-opt apparmor=unconfined"), "{line}");
        let found = texts(&docker, HELPER, None);
        assert!(found.iter().any(|f| f.starts_with("Fail: AppArmor profile docker-default denies mount")), "{found:?}");
        let unconfined = Facts { apparmor: "unconfined\n".into(), ..docker };
        assert_eq!(blocked_helper_in(&unconfined), None);
    }

    #[test]
    fn docker_default_outside_a_container_is_named_too() {
        let confined = Facts { apparmor: "docker-default (enforce)\n".into(), ..facts() };
        let line = blocked_helper_in(&confined).unwrap();
        assert!(line.starts_with("AppArmor profile docker-default denies mount"), "{line}");
        assert!(!line.contains("docker run"), "{line}");
    }

    #[test]
    fn a_helper_refused_under_any_enforcing_profile_names_the_profile() {
        let error = "cannot make mounts slave: Permission denied (os error 13)";
        let confined = Facts { apparmor: "no-mounts (enforce)\n".into(), ..facts() };
        let line = apparmor_denial_in(&confined, error).unwrap();
        assert!(
            line.starts_with("AppArmor profile no-mounts denied prov's helper (cannot make mounts slave"),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
        // Not confined, complaining only, or another failure: not AppArmor's.
        assert_eq!(apparmor_denial_in(&Facts { apparmor: "unconfined\n".into(), ..facts() }, error), None);
        assert_eq!(apparmor_denial_in(&Facts { apparmor: "no-mounts (complain)\n".into(), ..facts() }, error), None);
        assert_eq!(apparmor_denial_in(&confined, "the helper did not answer"), None);
    }

    #[test]
    fn rootless_containers_cannot_trace() {
        let rootless = Facts { uid_map: ROOTLESS_UID_MAP.into(), ..facts() };
        let found = texts(&rootless, HELPER, None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("Fail: this runs in a user namespace"), "{found:?}");
    }

    #[test]
    fn a_helper_on_a_nosuid_mount_fails_naming_the_mount() {
        let found = texts(&facts(), "/opt/tools/prov/libexec/prov/prov-helper", None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0]
            .starts_with("Fail: the helper /opt/tools/prov/libexec/prov/prov-helper is on /opt/tools, mounted nosuid"));
    }

    #[test]
    fn a_database_on_nfs_is_a_note_but_not_under_a_local_submount() {
        let found = texts(&facts(), HELPER, Some("/home/ann/.local/share/prov/prov.sqlite"));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("Note: the database /home/ann/.local/share/prov/prov.sqlite is on nfs4 (/home)"));
        assert!(found[0].contains("rollback journal"), "{found:?}");
        let local = texts(&facts(), HELPER, Some("/home/ann/my disk/prov.sqlite"));
        assert_eq!(local, Vec::<String>::new());
    }
}
