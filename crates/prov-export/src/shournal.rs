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

use anyhow::Result;
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
pub fn write_shournal(records: &[(CommandRow, Vec<FileRow>)], read_files_dir: Option<&str>, out: &mut dyn Write) -> Result<()> {
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
    fn session_uuid_is_base64_of_the_bytes() {
        assert_eq!(session_uuid("00000000-0000-0000-0000-000000000001"), json!("AAAAAAAAAAAAAAAAAAAAAQ=="));
    }
}
