//! prov's Debian package (packaging/debian/) as an administrator uses it,
//! installed with dpkg into a throwaway Debian 12 container: the helper
//! setuid root through dpkg-statoverride, an administrator's own override
//! kept across reinstall and upgrade, purge leaving nothing, and an
//! ordinary user tracing a command with the installed prov.

use std::process::Output;

use prov_e2e::container::{base_image, deb, docker, CAP_OPTIONS};
use prov_e2e::*;

const HELPER: &str = "/usr/libexec/prov/prov-helper";

/// `script` run by sh as root in a fresh container of the base image, the
/// package at /deb/prov.deb; `options` for `docker run`.
fn in_container(options: &[&str], script: &str) -> Output {
    let deb = deb();
    let mount = format!("{}:/deb/prov.deb:ro", deb.display());
    let mut args = vec!["run", "--rm", "-v", &mount];
    args.extend(options);
    args.extend([base_image(), "sh", "-ec", script]);
    docker(&args)
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "{}", describe(out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_package_installs_the_helper_setuid_root_group_prov_and_a_user_traces_with_it() {
    let out = in_container(
        CAP_OPTIONS,
        &format!(
            "dpkg -i /deb/prov.deb >/dev/null
             stat -c '%a %U %G %n' {HELPER} /usr/libexec/prov/prov-collector /usr/libexec/prov/prov-writer /usr/bin/prov /usr/lib/prov/libprov_preload.so
             cat /etc/sysctl.d/60-prov.conf | grep -v '^#'
             stat -c '%a %U %G %n' /usr/libexec/prov/prov-full 2>/dev/null || echo 'no full build'
             useradd --create-home ann
             cd /home/ann
             setpriv --reuid=ann --regid=ann --init-groups env -i HOME=/home/ann PATH=/usr/bin:/bin prov run -- sh -c 'echo from the package > packaged.txt'
             setpriv --reuid=ann --regid=ann --init-groups env -i HOME=/home/ann PATH=/usr/bin:/bin prov query wrote packaged.txt --json"
        ),
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("4755 root prov {HELPER}"), "{text}");
    assert_eq!(lines[1], "711 root root /usr/libexec/prov/prov-collector", "not readable, so it starts non-dumpable");
    assert_eq!(lines[2], "755 root root /usr/libexec/prov/prov-writer");
    assert_eq!(lines[3], "755 root root /usr/bin/prov");
    assert_eq!(lines[4], "644 root root /usr/lib/prov/libprov_preload.so");
    assert_eq!(lines[5], "fs.fanotify.max_queued_events = 131072");
    // bin/prov against musl hands queries to the glibc build (install.sh).
    let full = if toolchain_has_musl() { "755 root root /usr/libexec/prov/prov-full" } else { "no full build" };
    assert_eq!(lines[6], full, "{text}");
    assert_traced(&out);
    let found = parse_json_lines(lines[7..].join("\n").as_bytes());
    assert_eq!(found.len(), 1, "{}", describe(&out));
    assert_eq!(found[0]["text"], "sh -c 'echo from the package > packaged.txt'");
    assert_eq!(found[0]["user"], "ann");
}

#[test]
fn an_administrators_statoverride_survives_reinstall_and_upgrade() {
    // The administrator lets only members of group prov start the helper.
    let out = in_container(
        &[],
        &format!(
            "dpkg -i /deb/prov.deb >/dev/null
             dpkg-statoverride --remove {HELPER}
             dpkg-statoverride --update --add root prov 4750 {HELPER}
             dpkg -i /deb/prov.deb >/dev/null
             stat -c 'reinstalled %a %U %G' {HELPER}
             dpkg-deb -R /deb/prov.deb /tmp/next
             sed -i 's/^Version: .*/&.1/' /tmp/next/DEBIAN/control
             dpkg-deb --root-owner-group -b /tmp/next /tmp/next.deb >/dev/null
             dpkg -i /tmp/next.deb >/dev/null
             dpkg-query -W -f '${{Version}}\\n' prov | sed 's/^/version /'
             stat -c 'upgraded %a %U %G' {HELPER}"
        ),
    );
    let text = stdout(&out);
    assert!(text.contains("reinstalled 4750 root prov"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("version ") && l.ends_with(".1")), "an upgrade took place: {text}");
    assert!(text.contains("upgraded 4750 root prov"), "{text}");
}

#[test]
fn purge_removes_everything_the_install_added() {
    // Every path outside the kernel's and dpkg's own bookkeeping, with its
    // mode and owner, and the group and statoverride databases. Not the
    // shadow tools' backups of the group files (/etc/group-, /etc/gshadow-),
    // which every groupadd and groupdel rewrites: the system's, not ours.
    let snapshot = "{ find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /tmp -o -path /var/log \
                     -o -path /var/cache/debconf -o -path /var/lib/dpkg -o -path /etc/group- -o -path /etc/gshadow- \\) -prune -o -printf '%p %m %u %g\\n' | sort
                   cat /etc/group /etc/gshadow; cat /var/lib/dpkg/statoverride 2>/dev/null || true; }";
    let out = in_container(
        &[],
        &format!(
            "{snapshot} > /tmp/before
             dpkg -i /deb/prov.deb >/dev/null
             test -u {HELPER}
             dpkg --purge prov >/dev/null
             {snapshot} > /tmp/after
             diff /tmp/before /tmp/after && echo identical"
        ),
    );
    assert_eq!(stdout(&out).trim(), "identical", "{}", describe(&out));
}
