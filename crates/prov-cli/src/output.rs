//! How records are shown: a line per command for people, and JSON
//! Lines for scripts.
//!
//! JSON fields of a command object (`"type": "command"`): `id`, `uuid`,
//! `session`, `seq`, `text`, `cwd`, `host`, `user`, `shell`, `start_ns`,
//! `start` (RFC 3339, UTC), `end_ns`/`end` (null while running),
//! `exit_status` (null if unknown; 128+N for signal N), `complete`,
//! `incomplete` (object of non-zero counters, see docs/reference.md),
//! `incomplete_reason` (why the record ended short and who ended it, or
//! null), `untraced` (why the command ran untraced, or null), and for file
//! queries `files`: objects with `id`, `access` ("read"/"write"), `path`,
//! `size`, `mtime_ns`, `mtime`, `hash` (16 hex digits, null if unreadable),
//! `hash_chunk_size`, `hash_chunks`, `pid`, `matched` (this file is what the
//! query asked about), `match` (wrote/read: how a matched file matches the
//! file asked about: "path", "moved", "earlier" or "content"; the command
//! object carries its strongest), plus `file_count` (all files of the command) and
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
//! A file below the current directory is shown relative to it, as git shows
//! paths ([`shown_path`]); any other whole. JSON paths are always absolute.

use std::collections::HashSet;
use std::io::{self, Write};

pub use prov_export::text::{local, rfc3339};
use prov_model::escape::{escape, escape_text};
use prov_model::Access;
use prov_store::{CommandRow, FileRow, SessionRow};
use serde_json::Value;

use crate::stat::FileNow;
use crate::terminal::{Paint, Tone};

/// The files shown with a command: a selection of `total` when that is large.
#[derive(Clone, Copy)]
pub struct Listing<'a> {
    pub files: &'a [FileRow],
    pub matched: &'a [i64],
    /// File queries: how each matched event matched (event id, kind).
    pub how: &'a [(i64, prov_export::lineage::MatchKind)],
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
    if let Some((_, kind)) = l.how.iter().find(|(id, _)| *id == f.id) {
        o.insert("match".into(), kind.as_str().into());
    }
    if is_archived(l, f) {
        o.insert("archived".into(), true.into());
    }
    if let Some(now) = l.now.get(i) {
        o.insert("now".into(), now.json());
    }
    Value::Object(o)
}

/// A session of `prov query session`: `session`, `short` (the short form
/// listings show and filters take), `host`, `user`, `shell`,
/// `first`/`first_ns` (start of its first command), `last`/`last_ns` (end
/// of its last), `commands`.
pub fn session_json(s: &SessionRow) -> Value {
    serde_json::json!({
        "type": "session",
        "session": s.session,
        "short": prov_store::short_session(&s.session),
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
        escape(prov_store::short_session(&s.session).as_bytes()),
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

/// The widest status, `exit 255`: the column after it stays in place.
const STATUS_WIDTH: usize = 8;

/// A command's status in a word or two, and its tone: the one place that
/// decides how a status reads (`ok`, `exit 3`, `running`, `exit ?`), so a new
/// state of records is added here once.
pub fn status(c: &CommandRow) -> (String, Tone) {
    match (c.end_ns, c.exit_status) {
        (None, _) => ("running".into(), Tone::Unsure),
        (Some(_), None) => ("exit ?".into(), Tone::Unsure),
        (Some(_), Some(0)) => ("ok".into(), Tone::Good),
        (Some(_), Some(s)) => (format!("exit {s}"), Tone::Bad),
    }
}

/// A directory as a person writes it: `~` for the home directory, and only
/// the last components of a long path after `ellipsis`.
pub fn short_dir(dir: &[u8], home: Option<&[u8]>, ellipsis: &str) -> String {
    const WIDTH: usize = 32;
    let dir = match home {
        Some(h)
            if !h.is_empty() && h != b"/" && dir.starts_with(h) && matches!(dir.get(h.len()), None | Some(b'/')) =>
        {
            [b"~".as_slice(), &dir[h.len()..]].concat()
        }
        _ => dir.to_vec(),
    };
    let shown = escape(&dir);
    if shown.chars().count() <= WIDTH {
        return shown;
    }
    // Keep whole trailing components that fit, after an ellipsis.
    let mut kept: Vec<&str> = Vec::new();
    let mut len = ellipsis.chars().count();
    for part in shown.rsplit('/') {
        if !kept.is_empty() && len + part.chars().count() + 1 > WIDTH {
            break;
        }
        len += part.chars().count() + 1;
        kept.push(part);
    }
    kept.reverse();
    format!("{ellipsis}/{}", kept.join("/"))
}

/// The home directory, for [`short_dir`].
pub fn home() -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    std::env::var_os("HOME").map(|h| h.as_bytes().trim_ascii_end().strip_suffix(b"/").unwrap_or(h.as_bytes()).to_vec())
}

/// The current directory, which human output shows paths relative to.
pub fn current_dir() -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStringExt;
    std::env::current_dir().ok().map(|d| d.into_os_string().into_vec())
}

/// A recorded path for people: relative to `here` (the current directory)
/// when below it, else whole; escaped.
pub fn shown_path(path: &[u8], here: Option<&[u8]>) -> String {
    escape(here.map_or(path, |here| prov_export::text::relative_to(path, here)))
}

/// One line per command: `#id  time  status  directory  text`, then `how`
/// it matched a file asked about, then, when asked, its files (paths as
/// [`shown_path`] shows them).
#[allow(clippy::too_many_arguments)]
pub fn write_command(
    out: &mut impl Write,
    c: &CommandRow,
    how: Option<&str>,
    files: Option<Listing<'_>>,
    files_shown: usize,
    paint: Paint,
    home: Option<&[u8]>,
    here: Option<&[u8]>,
) -> io::Result<()> {
    let (status, tone) = status(c);
    // A command typed on several lines is shown on one, its line breaks marked.
    let text = escape_text(&c.text).replace('\n', &format!(" {} ", paint.glyphs.line_break));
    let incomplete = if c.is_complete() {
        String::new()
    } else {
        let reasons = escape_text(c.incomplete_reasons().join(", ").as_bytes());
        paint.paint(Tone::Unsure, &format!("  (incomplete record: {reasons})"))
    };
    writeln!(
        out,
        "{} {}  {}  {}  {text}{incomplete}",
        paint.paint(Tone::Id, &format!("#{:<4}", c.id)),
        paint.paint(Tone::Faint, &local(c.start_ns)),
        paint.paint(tone, &format!("{status:<STATUS_WIDTH$}")),
        short_dir(&c.cwd, home, paint.glyphs.ellipsis),
    )?;
    if let Some(how) = how {
        writeln!(out, "    {how}")?;
    }
    if let Some(l) = files {
        let Listing { files, matched, total, now, .. } = l;
        for (i, f) in files.iter().enumerate().take(files_shown) {
            let mark = if matched.contains(&f.id) { '*' } else { ' ' };
            let hash = f.hash.map_or("unreadable".to_string(), |h| format!("{h:016x}"));
            let mut state = now.get(i).map_or(String::new(), |n| format!("  [{}]", n.label()));
            if is_archived(&l, f) {
                state.push_str("  [archived]");
            }
            let access = match f.access {
                Access::Read => paint.paint(Tone::Read, "read "),
                Access::Write => paint.paint(Tone::Write, "write"),
            };
            writeln!(
                out,
                "    {mark} {access} {}  {}  {}  {hash}{state}",
                shown_path(&f.path, here),
                human_size(f.size),
                local(f.mtime_ns),
            )?;
        }
        let shown = files.len().min(files_shown) as u64;
        if total > shown {
            writeln!(
                out,
                "      {} and {} more files (--json --all-files lists all)",
                paint.glyphs.ellipsis,
                total - shown
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_shortened_as_a_person_writes_them() {
        let home = Some(b"/home/ana".as_slice());
        assert_eq!(short_dir(b"/home/ana", home, "…"), "~");
        assert_eq!(short_dir(b"/home/ana/proj", home, "…"), "~/proj");
        assert_eq!(short_dir(b"/home/anabel/proj", home, "…"), "/home/anabel/proj", "not a prefix by name");
        assert_eq!(short_dir(b"/tmp", None, "…"), "/tmp");
        let long = short_dir(b"/home/ana/data/2026/november/run-17/results/tables", home, "…");
        assert!(long.starts_with("…/") && long.ends_with("/results/tables") && long.chars().count() <= 34, "{long}");
    }

    #[test]
    fn one_place_decides_how_a_status_reads() {
        let mut c = CommandRow::fixture(1);
        c.end_ns = Some(c.start_ns + 1);
        c.exit_status = Some(0);
        assert_eq!(status(&c), ("ok".into(), Tone::Good));
        c.exit_status = Some(130);
        assert_eq!(status(&c), ("exit 130".into(), Tone::Bad));
        c.exit_status = None;
        assert_eq!(status(&c).0, "exit ?");
        c.end_ns = None;
        assert_eq!(status(&c).0, "running");
    }

    fn file(id: i64, access: Access, path: &[u8], size: u64) -> FileRow {
        FileRow {
            id,
            command_id: 1,
            access,
            path: path.to_vec(),
            size,
            mtime_ns: 1_700_000_000_000_000_000,
            hash: Some(0x9dbc_9cab_24d9_544e),
            hash_params: prov_model::hash::HashParams::default(),
            pid: Some(42),
        }
    }

    fn listing<'a>(
        files: &'a [FileRow],
        matched: &'a [i64],
        now: &'a [FileNow],
        archived: &'a HashSet<FileVersion>,
    ) -> Listing<'a> {
        Listing { files, matched, how: &[], total: files.len() as u64, now, archived }
    }

    fn plain() -> Paint {
        Paint { on: false, glyphs: prov_export::glyphs::ASCII }
    }

    fn shown(c: &CommandRow, how: Option<&str>, files: Option<Listing<'_>>, files_shown: usize) -> String {
        let mut out = Vec::new();
        write_command(&mut out, c, how, files, files_shown, plain(), Some(b"/home/ana"), None).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn sizes_read_in_binary_units_with_one_decimal() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1024), "1.0 KiB");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(10 << 20), "10.0 MiB");
        assert_eq!(human_size(3 << 30), "3.0 GiB");
        assert_eq!(human_size(2048 << 40), "2048.0 TiB", "TiB is the largest unit");
    }

    #[test]
    fn a_directory_with_control_characters_is_shown_escaped() {
        assert_eq!(short_dir(b"/tmp/a\x1b[2Jb", None, "..."), "/tmp/a\\e[2Jb");
        assert_eq!(short_dir(b"/tmp/\xff", None, "..."), "/tmp/\\xff");
        assert!(!short_dir(b"/tmp/\x1b]0;title\x07", None, "...").contains('\x1b'));
    }

    #[test]
    fn a_root_or_empty_home_abbreviates_nothing() {
        assert_eq!(short_dir(b"/etc", Some(b"/"), "..."), "/etc");
        assert_eq!(short_dir(b"/etc", Some(b""), "..."), "/etc");
    }

    #[test]
    fn a_long_directory_keeps_at_least_its_last_component() {
        let last = "x".repeat(40);
        let dir = format!("/data/{last}");
        assert_eq!(short_dir(dir.as_bytes(), None, "..."), format!(".../{last}"));
    }

    #[test]
    fn a_command_line_has_id_time_status_directory_and_text_in_columns() {
        let mut c = CommandRow::fixture(12);
        c.cwd = b"/home/ana/proj".to_vec();
        c.text = b"sort in.csv > sorted.csv".to_vec();
        c.exit_status = Some(3);
        let line = shown(&c, None, None, 30);
        let expected = format!("#12   {}  exit 3    ~/proj  sort in.csv > sorted.csv\n", local(c.start_ns));
        assert_eq!(line, expected);
        c.exit_status = Some(0);
        assert!(shown(&c, None, None, 30).contains("  ok        ~/proj  "), "the status column keeps its width");
    }

    #[test]
    fn a_text_on_several_lines_is_one_line_with_marks() {
        let mut c = CommandRow::fixture(1);
        c.text = b"for f in *; do\n  wc -l $f\ndone".to_vec();
        let out = shown(&c, None, None, 30);
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(out.ends_with("for f in *; do ^J   wc -l $f ^J done\n"), "{out}");
    }

    #[test]
    fn an_incomplete_record_says_why_on_its_line() {
        let mut c = CommandRow::fixture(1);
        c.completeness.unreadable = 2;
        c.untraced = Some("the helper is missing".into());
        let out = shown(&c, None, None, 30);
        assert!(
            out.trim_end().ends_with("(incomplete record: unreadable 2, untraced: the helper is missing)"),
            "{out}"
        );
        let complete = shown(&CommandRow::fixture(1), None, None, 30);
        assert!(!complete.contains("incomplete"), "{complete}");
    }

    #[test]
    fn how_a_command_matched_follows_on_its_own_line() {
        let c = CommandRow::fixture(5);
        let out = shown(&c, Some("wrote it as /w/old.csv (moved since)"), None, 30);
        assert_eq!(out.lines().nth(1), Some("    wrote it as /w/old.csv (moved since)"));
    }

    #[test]
    fn files_are_listed_with_the_matched_one_marked_and_their_state() {
        let c = CommandRow::fixture(1);
        let files = [file(10, Access::Write, b"/w/out.csv", 10), file(11, Access::Read, b"/w/in.csv", 2048)];
        let now = [FileNow::UpToDate, FileNow::Modified(vec!["mtime", "hash"])];
        let mut archived = HashSet::new();
        archived.insert((b"/w/in.csv".to_vec(), 2048, files[1].mtime_ns));
        let out = shown(&c, None, Some(listing(&files, &[10], &now, &archived)), 30);
        let lines: Vec<&str> = out.lines().collect();
        let mtime = local(files[0].mtime_ns);
        assert_eq!(lines[1], format!("    * write /w/out.csv  10 B  {mtime}  9dbc9cab24d9544e  [up to date]"));
        assert_eq!(
            lines[2],
            format!("      read  /w/in.csv  2.0 KiB  {mtime}  9dbc9cab24d9544e  [modified (mtime, hash)]  [archived]")
        );
    }

    #[test]
    fn files_beyond_the_shown_number_are_counted_not_listed() {
        let c = CommandRow::fixture(1);
        let mut files: Vec<FileRow> = (0..5).map(|i| file(i, Access::Read, format!("/w/{i}").as_bytes(), 1)).collect();
        files[4].hash = None;
        let archived = HashSet::new();
        let mut l = listing(&files, &[], &[], &archived);
        l.total = 40;
        let out = shown(&c, None, Some(l), 3);
        assert_eq!(out.lines().count(), 1 + 3 + 1, "{out}");
        assert!(out.ends_with("      ... and 37 more files (--json --all-files lists all)\n"), "{out}");
        let all = shown(&c, None, Some(listing(&files, &[], &[], &archived)), 30);
        assert!(all.contains("/w/4  1 B  ") && all.contains("  unreadable\n"), "no hash reads unreadable: {all}");
    }

    #[test]
    fn command_json_counts_files_and_says_when_the_list_is_cut() {
        let c = CommandRow::fixture(7);
        let files = [file(1, Access::Write, b"/w/a", 1), file(2, Access::Read, b"/w/\xff", 1)];
        let archived = HashSet::new();
        let mut l = listing(&files, &[1], &[], &archived);
        let whole = command_json(&c, Some(l));
        assert_eq!(whole["type"], "command");
        assert_eq!(whole["id"], 7);
        assert_eq!(whole["file_count"], 2);
        assert_eq!(whole["files_truncated"], false);
        assert_eq!(whole["files"][0]["matched"], true);
        assert_eq!(whole["files"][1]["matched"], false);
        assert_eq!(whole["files"][1]["path_hex"], "2f772fff", "exact bytes of a name that is not UTF-8");
        assert!(whole["files"][0].get("archived").is_none(), "archived only where true");
        assert!(whole["files"][0].get("now").is_none(), "now only with --stat");
        l.total = 1000;
        assert_eq!(command_json(&c, Some(l))["files_truncated"], true);
        assert!(command_json(&c, None).get("files").is_none(), "no files key when files are not listed");
    }

    #[test]
    fn file_json_carries_how_it_matched_and_its_state_now() {
        let c = CommandRow::fixture(1);
        let files = [file(3, Access::Read, b"/w/x", 1)];
        let now = [FileNow::Missing];
        let how = [(3, prov_export::lineage::MatchKind::Moved)];
        let archived = HashSet::new();
        let l = Listing { how: &how, ..listing(&files, &[3], &now, &archived) };
        let f = &command_json(&c, Some(l))["files"][0];
        assert_eq!(f["match"], "moved");
        assert_eq!(f["now"], serde_json::json!({"state": "missing", "differs": [], "error": null}));
    }

    #[test]
    fn sessions_show_their_short_form() {
        let s = SessionRow {
            session: "0193a0b2-7c4d-7e5f-8a9b-3f2a9c1d5e6f".into(),
            host: "node17".into(),
            user: "ana".into(),
            shell: "zsh".into(),
            first_ns: 1_700_000_000_000_000_000,
            last_ns: 1_700_000_060_000_000_000,
            commands: 12,
        };
        let v = session_json(&s);
        assert_eq!(v["type"], "session");
        assert_eq!(v["short"], "9c1d5e6f");
        assert_eq!(v["commands"], 12);
        let mut out = Vec::new();
        write_session(&mut out, &s).unwrap();
        let line = String::from_utf8(out).unwrap();
        assert!(line.starts_with("9c1d5e6f  "), "{line}");
        assert!(line.ends_with("     12 commands  ana@node17  zsh\n"), "{line}");
    }
}
