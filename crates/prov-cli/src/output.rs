//! How records are shown: a readable block per command for people, and JSON
//! Lines for scripts.
//!
//! JSON fields of a command object (`"type": "command"`): `id`, `uuid`,
//! `session`, `seq`, `text`, `cwd`, `host`, `user`, `shell`, `start_ns`,
//! `start` (RFC 3339, UTC), `end_ns`/`end` (null while running),
//! `exit_status` (null if unknown; 128+N for signal N), `complete`,
//! `incomplete` (object of non-zero counters, see README), and for file
//! queries `files`: objects with `id`, `access` ("read"/"write"), `path`,
//! `size`, `mtime_ns`, `mtime`, `hash` (16 hex digits, null if unreadable),
//! `hash_chunk_size`, `hash_chunks`, `pid`, `matched` (this file is what the
//! query asked about), plus `file_count` (all files of the command) and
//! `files_truncated` (true when `files` lists only the matched files and
//! some others because the command has more than 1000; `--all-files` lists
//! all). Byte strings (`text`, `cwd`, `path`) that are not
//! valid UTF-8 come as a lossy string plus `<field>_hex` with the exact bytes.
//! A read file the script archive kept has `archived: true`.
//! With `--stat` each file has `now`: `{"state": "up-to-date" | "modified" |
//! "missing" | "unreadable", "differs": [any of "size", "mtime", "hash",
//! "type"], "error": why it could not be checked, or null}`.
//!
//! Human output shows recorded bytes (texts, paths, names) through
//! [`prov_model::escape`]: never a control character a terminal would act on.

use std::collections::HashSet;
use std::io::{self, Write};

pub use prov_export::text::{local, rfc3339};
use prov_model::escape::{escape, escape_text};
use prov_model::Access;
use prov_store::{CommandRow, FileRow, SessionRow};
use serde_json::Value;

use crate::stat::FileNow;

/// The files shown with a command: a selection of `total` when that is large.
#[derive(Clone, Copy)]
pub struct Listing<'a> {
    pub files: &'a [FileRow],
    pub matched: &'a [i64],
    pub total: u64,
    /// With `--stat`: each file's state now, in the order of `files`.
    pub now: &'a [FileNow],
    /// The read files the script archive kept.
    pub archived: &'a HashSet<FileVersion>,
}

/// A file as it was read: path, size, mtime.
pub type FileVersion = (Vec<u8>, u64, i64);

fn is_archived(l: &Listing<'_>, f: &FileRow) -> bool {
    f.access == Access::Read && l.archived.contains(&(f.path.clone(), f.size, f.mtime_ns))
}

pub fn command_json(c: &CommandRow, files: Option<Listing<'_>>) -> Value {
    let mut o = prov_export::json::command_fields(c);
    if let Some(l) = files {
        let list: Vec<Value> = l.files.iter().enumerate().map(|(i, f)| file_json(f, &l, i)).collect();
        o.insert("files".into(), list.into());
        o.insert("file_count".into(), l.total.into());
        o.insert("files_truncated".into(), (l.files.len() as u64 != l.total).into());
    }
    Value::Object(o)
}

fn file_json(f: &FileRow, l: &Listing<'_>, i: usize) -> Value {
    let mut o = prov_export::json::file_fields(f);
    o.insert("matched".into(), l.matched.contains(&f.id).into());
    if is_archived(l, f) {
        o.insert("archived".into(), true.into());
    }
    if let Some(now) = l.now.get(i) {
        o.insert("now".into(), now.json());
    }
    Value::Object(o)
}

/// A session of `prov query session`: `session`, `host`, `user`, `shell`,
/// `first`/`first_ns` (start of its first command), `last`/`last_ns` (end
/// of its last), `commands`.
pub fn session_json(s: &SessionRow) -> Value {
    serde_json::json!({
        "type": "session",
        "session": s.session,
        "host": s.host,
        "user": s.user,
        "shell": s.shell,
        "first_ns": s.first_ns,
        "first": rfc3339(s.first_ns),
        "last_ns": s.last_ns,
        "last": rfc3339(s.last_ns),
        "commands": s.commands,
    })
}

pub fn write_session(out: &mut impl Write, s: &SessionRow) -> io::Result<()> {
    writeln!(
        out,
        "{}  {} .. {}  {:>5} commands  {}@{}  {}",
        escape(s.session.as_bytes()),
        local(s.first_ns),
        local(s.last_ns),
        s.commands,
        escape(s.user.as_bytes()),
        escape(s.host.as_bytes()),
        escape(s.shell.as_bytes())
    )
}

pub fn write_json(out: &mut impl Write, v: &Value) -> io::Result<()> {
    serde_json::to_writer(&mut *out, v)?;
    out.write_all(b"\n")
}

pub fn human_size(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

pub fn write_command(
    out: &mut impl Write,
    c: &CommandRow,
    files: Option<Listing<'_>>,
    files_shown: usize,
) -> io::Result<()> {
    let duration = c.end_ns.map_or("running".to_string(), |e| format!("{:.3} s", (e - c.start_ns) as f64 / 1e9));
    let status = c.exit_status.map_or("exit ?".to_string(), |s| format!("exit {s}"));
    writeln!(
        out,
        "#{}  {}  ({duration})  {status}  {}@{}  session {}",
        c.id,
        local(c.start_ns),
        escape(c.user.as_bytes()),
        escape(c.host.as_bytes()),
        escape(c.session.as_bytes())
    )?;
    // A command typed on several lines keeps its lines, indented under the first.
    writeln!(out, "    $ {}", escape_text(&c.text).replace('\n', "\n      "))?;
    writeln!(out, "    cwd {}", escape(&c.cwd))?;
    if let Some(l) = files {
        let Listing { files, matched, total, now, .. } = l;
        for (i, f) in files.iter().enumerate().take(files_shown) {
            let mark = if matched.contains(&f.id) { '*' } else { ' ' };
            let hash = f.hash.map_or("unreadable".to_string(), |h| format!("{h:016x}"));
            let mut state = now.get(i).map_or(String::new(), |n| format!("  [{}]", n.label()));
            if is_archived(&l, f) {
                state.push_str("  [archived]");
            }
            writeln!(
                out,
                "  {mark} {:<5} {}  {}  {}  {hash}{state}",
                f.access.as_str(),
                escape(&f.path),
                human_size(f.size),
                local(f.mtime_ns),
            )?;
        }
        let shown = files.len().min(files_shown) as u64;
        if total > shown {
            writeln!(out, "    … and {} more files (--json --all-files lists all)", total - shown)?;
        }
    }
    if !c.completeness.is_complete() {
        let reasons: Vec<String> = c.completeness.reasons().iter().map(|(k, n)| format!("{k} {n}")).collect();
        writeln!(out, "    ! incomplete record: {}", reasons.join(", "))?;
    }
    writeln!(out)
}
