//! User and host names from the system's name service, looked up without
//! glibc's NSS in this process. `prov` is linked statically (its start-up
//! is on every `prov run`), and glibc's NSS loads the system's modules
//! (sssd, LDAP, systemd, mdns) into a static program, where they can crash
//! it: `getpwuid` for a uid not in /etc/passwd died of SIGSEGV in
//! libnss_systemd (docs/kernel-facts.md). So local users are read from
//! /etc/passwd, and anything else is asked of `getent`, the C library's own
//! dynamically linked front end to NSS, in a process of its own.

use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Stdio};

/// Where `getent` is (libc-bin on Debian, glibc-common on Red Hat); a
/// fixed list, not `PATH`: the answer names the user in every record.
const GETENT: [&str; 2] = ["/usr/bin/getent", "/bin/getent"];

/// The name of `uid`: from /etc/passwd, else from `getent passwd`.
pub fn user_name(uid: u32) -> Option<String> {
    local_user_name(uid).or_else(|| user_name_from_getent(uid))
}

/// The name /etc/passwd gives `uid`, read without NSS (no process started).
pub fn local_user_name(uid: u32) -> Option<String> {
    passwd_name(&std::fs::read(Path::new("/etc/passwd")).ok()?, uid)
}

/// The name the system's name service (sssd, LDAP, …) gives `uid`.
pub fn user_name_from_getent(uid: u32) -> Option<String> {
    passwd_name(&getent(&["passwd", &uid.to_string()])?, uid)
}

/// The name of the first entry for `uid` in passwd(5) text.
pub fn passwd_name(passwd: &[u8], uid: u32) -> Option<String> {
    let uid = uid.to_string();
    passwd.split(|&b| b == b'\n').find_map(|line| {
        let mut fields = line.split(|&b| b == b':');
        let (name, _password, entry_uid) = (fields.next()?, fields.next()?, fields.next()?);
        (entry_uid == uid.as_bytes() && !name.is_empty() && !name.starts_with(b"+") && !name.starts_with(b"-"))
            .then(|| String::from_utf8(name.to_vec()).ok())
            .flatten()
    })
}

/// The addresses of host `name`, in the order the name service gives them
/// (`getent ahosts`: /etc/hosts, DNS, mdns, … as nsswitch.conf says), each
/// once; empty when it knows none.
pub fn host_addresses(name: &str) -> Vec<IpAddr> {
    // A name getent would take for an option is no host name.
    if name.is_empty() || name.starts_with('-') {
        return Vec::new();
    }
    getent(&["ahosts", name]).map(|out| ahosts_addresses(&out)).unwrap_or_default()
}

/// The addresses in `getent ahosts` output (`ADDRESS SOCKTYPE [NAME]` per
/// line, each address once per socket type), each once, in order.
pub fn ahosts_addresses(out: &[u8]) -> Vec<IpAddr> {
    let mut addresses = Vec::new();
    for line in String::from_utf8_lossy(out).lines() {
        if let Some(Ok(address)) = line.split_whitespace().next().map(str::parse::<IpAddr>) {
            if !addresses.contains(&address) {
                addresses.push(address);
            }
        }
    }
    addresses
}

/// What `getent ARGS` printed, if it found something.
fn getent(args: &[&str]) -> Option<Vec<u8>> {
    let program = GETENT.iter().find(|p| Path::new(p).exists())?;
    let out = Command::new(program).args(args).stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    out.status.success().then_some(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uid_is_named_by_its_first_entry_and_only_by_the_uid_field() {
        let passwd = b"root:x:0:0:root:/root:/bin/bash\n\
                       games:x:5:1000:games:/usr/games:/usr/sbin/nologin\n\
                       alice:x:1000:1000:Alice:/home/alice:/bin/bash\n\
                       alias:x:1000:1000::/home/alice:/bin/bash\n\
                       +nisuser:x:1001:1001:::\n\
                       broken line\n";
        assert_eq!(passwd_name(passwd, 0).as_deref(), Some("root"));
        // 1000 is games's gid, not its uid.
        assert_eq!(passwd_name(passwd, 1000).as_deref(), Some("alice"));
        // NIS compat entries are not names.
        assert_eq!(passwd_name(passwd, 1001), None);
        assert_eq!(passwd_name(passwd, 100), None);
        assert_eq!(passwd_name(b"", 0), None);
    }

    #[test]
    fn ahosts_output_gives_each_address_once_in_order() {
        let out = b"::1             STREAM localhost\n::1             DGRAM  \n::1             RAW    \n\
                    127.0.0.1       STREAM \n127.0.0.1       DGRAM  \n";
        let want: Vec<IpAddr> = vec!["::1".parse().unwrap(), "127.0.0.1".parse().unwrap()];
        assert_eq!(ahosts_addresses(out), want);
        assert!(ahosts_addresses(b"").is_empty());
    }

    #[test]
    fn getent_answers_for_root_and_localhost() {
        // getent is part of every glibc system these tests run on.
        assert_eq!(user_name_from_getent(0).as_deref(), Some("root"));
        assert!(host_addresses("localhost").iter().any(IpAddr::is_loopback));
        assert!(host_addresses("-s").is_empty());
    }
}
