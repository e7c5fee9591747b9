//! How recorded values become text in the exports: byte strings (paths and
//! command texts are raw bytes), times and hashes.

use chrono::{DateTime, Local, Utc};
use prov_model::record::bytes_as_hex;
use serde_json::{Map, Value};

/// RFC 3339 in UTC with nanoseconds.
pub fn rfc3339(ns: i64) -> String {
    DateTime::<Utc>::from_timestamp_nanos(ns).to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

/// Local time to the second, for people.
pub fn local(ns: i64) -> String {
    DateTime::<Utc>::from_timestamp_nanos(ns).with_timezone(&Local).format("%Y-%m-%d %H:%M:%S").to_string()
}

/// The 16 hex digits every other prov output shows.
pub fn hash_hex(hash: u64) -> String {
    format!("{hash:016x}")
}

pub fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Puts `bytes` under `key`; when they are not UTF-8, a lossy string there
/// and the exact bytes in hex under `<key>_hex` (as `prov query --json`).
pub fn put_bytes(obj: &mut Map<String, Value>, key: &str, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(s) => {
            obj.insert(key.into(), s.into());
        }
        Err(_) => {
            obj.insert(key.into(), lossy(bytes).into());
            obj.insert(format!("{key}_hex"), bytes_as_hex::encode(bytes).into());
        }
    }
}

/// `path` relative to `dir` when it is below it, else whole.
pub fn relative_to<'p>(path: &'p [u8], dir: &[u8]) -> &'p [u8] {
    match path.strip_prefix(dir) {
        Some([b'/', rest @ ..]) if !rest.is_empty() => rest,
        _ => path,
    }
}

/// The last component of a path.
pub fn base_name(path: &[u8]) -> &[u8] {
    path.rsplit(|&b| b == b'/').next().unwrap_or(path)
}

/// A `file://` URI of an absolute path: every byte outside the unreserved
/// set and `/` percent-encoded, so any file name round-trips.
pub fn file_uri(path: &[u8]) -> String {
    let mut s = String::from("file://");
    for &b in path {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// `bytes` as one single-quoted shell word.
pub fn shell_quote(bytes: &[u8]) -> Vec<u8> {
    let mut q = vec![b'\''];
    for &b in bytes {
        if b == b'\'' {
            q.extend_from_slice(b"'\\''");
        } else {
            q.push(b);
        }
    }
    q.push(b'\'');
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_encode_every_odd_byte() {
        assert_eq!(file_uri(b"/a b/caf\xe9#1"), "file:///a%20b/caf%E9%231");
    }
}
