//! Naming the collector that observes a record, so that a later `prov` can
//! tell it is gone and end the record it left without an end. A pid is
//! reused, so the name also holds the process's start time (clock ticks
//! since boot) and the boot's id: `BOOT_ID:PID:START`.

use std::path::Path;

/// The name of process `pid`; None when /proc does not tell.
pub fn identity_of(pid: u32) -> Option<String> {
    Some(format!("{}:{pid}:{}", boot_id()?, start_time(pid)?))
}

/// Whether the named process is known to be gone: a previous boot's, or its
/// pid is free, a zombie or another process's. A name that cannot be read
/// is not taken as gone.
pub fn is_gone(identity: &str) -> bool {
    let mut parts = identity.splitn(3, ':');
    let (Some(boot), Some(pid), Some(start)) = (parts.next(), parts.next(), parts.next()) else { return false };
    let Ok(pid) = pid.parse::<u32>() else { return false };
    let Some(now_boot) = boot_id() else { return false };
    now_boot != boot || start_time(pid).as_deref() != Some(start)
}

/// The parent's name if it is the collector (the writer's parent; one that
/// died already left the writer to init, whose name says nothing).
pub fn collector_parent() -> Option<String> {
    let ppid = std::os::unix::process::parent_id();
    let comm = std::fs::read_to_string(Path::new("/proc").join(ppid.to_string()).join("comm")).ok()?;
    (comm.trim_end() == "prov-collector").then(|| identity_of(ppid)).flatten()
}

fn boot_id() -> Option<String> {
    let raw = boot_id_bytes()?;
    Some(String::from_utf8_lossy(raw).trim().to_string())
}

/// /proc/sys/kernel/random/boot_id as read (with its newline), read once per
/// process: `prov run` names its session, its run preparer and its
/// collector by it.
pub fn boot_id_bytes() -> Option<&'static [u8]> {
    static BOOT_ID: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    BOOT_ID.get_or_init(|| std::fs::read("/proc/sys/kernel/random/boot_id").ok()).as_deref()
}

/// Field 22 of /proc/PID/stat; None for a zombie (its descriptors are
/// closed: it observes nothing any more).
fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ppid …": comm may hold spaces and parentheses.
    let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    if fields.next()? == "Z" {
        return None;
    }
    fields.nth(18).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_process_is_not_gone_and_a_dead_one_is() {
        let me = identity_of(std::process::id()).unwrap();
        assert!(!is_gone(&me), "{me}");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let named = identity_of(pid);
        child.wait().unwrap();
        if let Some(named) = named {
            assert!(is_gone(&named), "{named}");
        }
        let other_boot = format!("not-this-boot:{}", me.split_once(':').unwrap().1);
        assert!(is_gone(&other_boot));
        assert!(!is_gone("garbage"));
    }
}
