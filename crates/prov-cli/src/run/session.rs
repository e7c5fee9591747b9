//! The session of a `prov run`: the terminal session (setsid(2) session)
//! it was started from, so the runs typed in one terminal are one session
//! in listings and one lane in the report, and runs from another terminal
//! (or a cron job) another.

/// `PROV_SESSION` when set; else an id derived from this boot, the user and
/// the terminal session (see `session_key`); else a new id.
pub fn for_run() -> String {
    if let Ok(s) = std::env::var("PROV_SESSION") {
        return s;
    }
    session_key().map(|key| uuid_of(&key)).unwrap_or_else(|| uuid::Uuid::now_v7().to_string())
}

/// The session leader's pid and start time (pids are reused, start times
/// are not). When the leader cannot be seen (it lives in an outer pid
/// namespace, where getsid(2) says 0, or /proc hides it), what this process
/// can see of its session stands in: the session number, the pid namespace
/// and the controlling terminal, the same for every process of the session.
fn session_key() -> Option<Vec<u8>> {
    let boot = prov_model::observer::boot_id_bytes()?;
    let uid = nix::unistd::getuid().as_raw().to_string();
    let sid = nix::unistd::getsid(None).ok()?.as_raw();
    let leader = match std::fs::read(format!("/proc/{sid}/stat")).ok().and_then(|s| stat_field(&s, 22)) {
        Some(start) => [b"leader/".as_slice(), start.as_slice()].concat(),
        None => {
            let own = std::fs::read("/proc/self/stat").ok()?;
            let tty = stat_field(&own, 7)?;
            let pid_ns = std::fs::read_link("/proc/self/ns/pid").ok()?;
            [b"unseen/".as_slice(), pid_ns.as_os_str().as_encoded_bytes(), b"/", &tty].concat()
        }
    };
    // The host name too: hosts (or containers) sharing a kernel's boot id
    // are still separate sessions in the central store.
    let host = crate::setup::host_name();
    Some(
        [
            boot.trim_ascii(),
            b"/",
            host.as_bytes(),
            b"/",
            sid.to_string().as_bytes(),
            b"/",
            &leader,
            b"/",
            uid.as_bytes(),
        ]
        .concat(),
    )
}

/// Field `n` (1-based, as proc(5) counts) of a /proc/PID/stat line, counted
/// after the command name's closing paren (the name may hold spaces).
fn stat_field(stat: &[u8], n: usize) -> Option<Vec<u8>> {
    let after = &stat[stat.iter().rposition(|&b| b == b')')? + 1..];
    after.split(|&b| b == b' ').filter(|f| !f.is_empty()).nth(n - 3).map(<[u8]>::to_vec)
}

/// A UUID of version 8 (custom), variant RFC 9562, from a key.
fn uuid_of(key: &[u8]) -> String {
    let mut bytes = xxhash_rust::xxh3::xxh3_128(key).to_be_bytes();
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    uuid::Uuid::from_bytes(bytes).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_past_a_name_with_spaces_and_parens() {
        let stat = b"4242 (a) b (c) S 1 4242 4242 34817 4242 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 0";
        assert_eq!(stat_field(stat, 3).as_deref(), Some(b"S".as_slice()));
        assert_eq!(stat_field(stat, 7).as_deref(), Some(b"34817".as_slice()));
        assert_eq!(stat_field(stat, 22).as_deref(), Some(b"987654".as_slice()));
        assert_eq!(stat_field(b"1 (x", 3), None);
    }

    #[test]
    fn the_same_key_gives_the_same_version_8_uuid() {
        let a = uuid::Uuid::parse_str(&uuid_of(b"k")).unwrap();
        assert_eq!(a.get_version_num(), 8);
        assert_eq!(uuid_of(b"k"), uuid_of(b"k"));
        assert_ne!(uuid_of(b"k"), uuid_of(b"l"));
    }
}
