//! `--format shournal-json`: the predecessor's (shournal's) JSON line
//! format, so its converters (shournal-to-snakemake) keep working.
//!
//! One `HEADER:` line, one `COMMAND:` line per command (oldest first: the
//! converter relies on start-time order), one `FOOTER:` line, each a compact
//! JSON object with its keys sorted as Qt wrote them. Types mirror the
//! predecessor's: `hash` is the 64-bit hash as a quoted decimal (null when
//! unreadable), times are local `yyyy-MM-ddTHH:mm:ss.zzz`, `sessionUuid` is
//! the base64 of the session UUID's 16 bytes, an unknown `returnValue` is
//! 2147483647 as there. Names that are not UTF-8 are written lossily (the
//! predecessor decoded them the same way).

use std::collections::BTreeMap;
use std::io::Write;

use crate::Result;
use base64::Engine;
use chrono::{DateTime, Local, Utc};
use prov_model::Access;
use prov_store::{CommandRow, FileRow};
use serde_json::{json, Value};

use crate::text::lossy;

/// The predecessor's "no return value known".
const INVALID_RETURN_VALUE: i32 = i32::MAX;

fn time(ns: i64) -> String {
    DateTime::<Utc>::from_timestamp_nanos(ns).with_timezone(&Local).format("%Y-%m-%dT%H:%M:%S%.3f").to_string()
}

/// The session id as the predecessor printed it: base64 of its 16 bytes.
fn session_uuid(session: &str) -> Value {
    match uuid::Uuid::parse_str(session) {
        Ok(u) => base64::engine::general_purpose::STANDARD.encode(u.as_bytes()).into(),
        Err(_) if session.is_empty() => Value::Null,
        Err(_) => session.into(),
    }
}

fn file_event(f: &FileRow) -> Value {
    // BTreeMap: keys sorted, whatever serde_json's map features are.
    let mut o: BTreeMap<&str, Value> = BTreeMap::new();
    o.insert("id", f.id.into());
    o.insert("path", lossy(&f.path).into());
    o.insert("size", f.size.into());
    o.insert("mtime", time(f.mtime_ns).into());
    o.insert("hash", f.hash.map(|h| h.to_string()).into());
    if f.access == Access::Read {
        // Archived scripts are restored with `prov restore`, not by path.
        o.insert("isStoredToDisk", false.into());
    }
    json!(o)
}

fn command(c: &CommandRow, files: &[FileRow]) -> Value {
    let events = |access| files.iter().filter(|f| f.access == access).map(file_event).collect::<Vec<_>>();
    let params = files.first().map(|f| f.hash_params);
    let mut o: BTreeMap<&str, Value> = BTreeMap::new();
    o.insert("id", c.id.into());
    o.insert("command", lossy(&c.text).into());
    o.insert("returnValue", c.exit_status.unwrap_or(INVALID_RETURN_VALUE).into());
    o.insert("username", c.user.clone().into());
    o.insert("hostname", c.host.clone().into());
    o.insert("hashChunkSize", params.map(|p| p.chunk_size).into());
    o.insert("hashMaxCountOfReads", params.map(|p| p.chunks).into());
    o.insert("sessionUuid", session_uuid(&c.session));
    o.insert("startTime", time(c.start_ns).into());
    o.insert("endTime", time(c.end_ns.unwrap_or(c.start_ns)).into());
    o.insert("workingDir", lossy(&c.cwd).into());
    o.insert("fileReadEvents", events(Access::Read).into());
    o.insert("fileWriteEvents", events(Access::Write).into());
    json!(o)
}

/// `read_files_dir`: where archived scripts live (the header's
/// `pathToReadFiles`), if anywhere.
pub fn write_shournal(
    records: &[(CommandRow, Vec<FileRow>)],
    read_files_dir: Option<&str>,
    out: &mut dyn Write,
) -> Result<()> {
    writeln!(out, "HEADER:{}", json!({ "pathToReadFiles": read_files_dir }))?;
    for (c, files) in records {
        writeln!(out, "COMMAND:{}", command(c, files))?;
    }
    writeln!(out, "FOOTER:{}", json!({ "countOfRestoredFiles": 0, "restorePath": null }))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_carry_the_predecessors_keys_in_its_order_and_types() {
        let c = CommandRow {
            uuid: "u".into(),
            session: "00000000-0000-0000-0000-000000000001".into(),
            seq: 0,
            text: b"cat a > b".to_vec(),
            start_ns: 0,
            end_ns: None,
            exit_status: None,
            ..CommandRow::fixture(7)
        };
        let f = |access, path: &str, hash| FileRow {
            id: 1,
            command_id: 7,
            access,
            path: path.as_bytes().to_vec(),
            size: 2,
            mtime_ns: 0,
            hash,
            hash_params: prov_model::HashParams::default(),
            pid: None,
        };
        let mut out = Vec::new();
        write_shournal(
            &[(c, vec![f(Access::Read, "/w/a", Some(u64::MAX)), f(Access::Write, "/w/b", None)])],
            None,
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], r#"HEADER:{"pathToReadFiles":null}"#);
        assert_eq!(lines[2], r#"FOOTER:{"countOfRestoredFiles":0,"restorePath":null}"#);
        let cmd = lines[1].strip_prefix("COMMAND:").unwrap();
        let keys: Vec<&str> =
            cmd.match_indices("\"").collect::<Vec<_>>().chunks(2).map(|q| &cmd[q[0].0 + 1..q[1].0]).collect();
        assert!(keys.starts_with(&["command", "cat a > b", "endTime"]), "{cmd}");
        assert!(cmd.contains(r#""hash":"18446744073709551615","id":1,"isStoredToDisk":false"#), "{cmd}");
        assert!(cmd.contains(r#""fileWriteEvents":[{"hash":null,"id":1,"mtime":"#), "{cmd}");
        assert!(cmd.contains(r#""hashChunkSize":256,"hashMaxCountOfReads":3,"hostname":"h","id":7,"returnValue":2147483647,"sessionUuid":"AAAAAAAAAAAAAAAAAAAAAQ==","startTime":"#), "{cmd}");
        assert!(cmd.ends_with(r#""username":"u","workingDir":"/w"}"#), "{cmd}");
    }

    #[test]
    fn session_uuid_is_base64_of_the_bytes() {
        assert_eq!(session_uuid("00000000-0000-0000-0000-000000000001"), json!("AAAAAAAAAAAAAAAAAAAAAQ=="));
    }
}
