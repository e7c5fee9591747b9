//! `--stat`: is a recorded file still what the command saw? Compared are
//! the size, the mtime and the partial hash, computed with the parameters
//! the file was recorded with.

use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use prov_model::hash::partial_hash;
use prov_store::FileRow;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileNow {
    UpToDate,
    /// What differs: any of "size", "mtime", "hash".
    Modified(Vec<&'static str>),
    Missing,
    /// It exists but cannot be read (or the record has no hash to compare).
    Unreadable(String),
}

impl FileNow {
    pub fn label(&self) -> String {
        match self {
            FileNow::UpToDate => "up to date".into(),
            FileNow::Modified(what) => format!("modified ({})", what.join(", ")),
            FileNow::Missing => "missing".into(),
            FileNow::Unreadable(why) => format!("cannot check: {why}"),
        }
    }

    /// The JSON value of a file's `now` field.
    pub fn json(&self) -> serde_json::Value {
        let (state, differs, why) = match self {
            FileNow::UpToDate => ("up-to-date", vec![], None),
            FileNow::Modified(what) => ("modified", what.clone(), None),
            FileNow::Missing => ("missing", vec![], None),
            FileNow::Unreadable(why) => ("unreadable", vec![], Some(why.clone())),
        };
        serde_json::json!({ "state": state, "differs": differs, "error": why })
    }
}

pub fn file_now(f: &FileRow) -> FileNow {
    let path = Path::new(OsStr::from_bytes(&f.path));
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return FileNow::Missing,
        Err(e) => return FileNow::Unreadable(e.to_string()),
    };
    if !meta.is_file() {
        return FileNow::Modified(vec!["type"]);
    }
    let mut differs = Vec::new();
    if meta.size() != f.size {
        differs.push("size");
    }
    let mtime_ns = meta.mtime().saturating_mul(1_000_000_000).saturating_add(meta.mtime_nsec());
    if mtime_ns != f.mtime_ns {
        differs.push("mtime");
    }
    if meta.size() == f.size {
        match (f.hash, File::open(path).and_then(|file| partial_hash(&file, meta.size(), f.hash_params))) {
            (Some(recorded), Ok(now)) if recorded != now => differs.push("hash"),
            (Some(_), Ok(_)) => {}
            // What already differs is the answer; only an otherwise
            // identical file needs the hash to decide.
            (None, _) if differs.is_empty() => {
                return FileNow::Unreadable("its content was unreadable when recorded".into())
            }
            (Some(_), Err(e)) if differs.is_empty() => return FileNow::Unreadable(e.to_string()),
            (None, _) | (Some(_), Err(_)) => {}
        }
    }
    if differs.is_empty() {
        FileNow::UpToDate
    } else {
        FileNow::Modified(differs)
    }
}

/// The answer to "is the file I asked about stale?": the file at `asked`
/// now against the version command #`command` recorded (`verb`: "wrote" or
/// "read"). Said apart from the listing's per-file states, where a missing
/// input (renamed since, say) is no statement about the asked file.
pub fn target_summary(asked: &Path, recorded: &FileRow, command: i64, verb: &str) -> String {
    let name = prov_model::escape::escape(asked.as_os_str().as_bytes());
    let now = file_now(&FileRow { path: asked.as_os_str().as_bytes().to_vec(), ..recorded.clone() });
    match now {
        FileNow::UpToDate => format!("{name} is up to date: as #{command} {verb} it"),
        FileNow::Modified(what) => {
            format!("{name} was modified since #{command} {verb} it ({} differ)", what.join(", "))
        }
        FileNow::Missing => format!("{name} is missing now"),
        FileNow::Unreadable(why) => format!("{name} cannot be checked: {why}"),
    }
}

/// Where the system's own files live: a changed library or config there
/// is not a change of the user's inputs.
const SYSTEM_DIRS: [&[u8]; 10] =
    [b"/usr/", b"/lib/", b"/lib32/", b"/lib64/", b"/bin/", b"/sbin/", b"/etc/", b"/proc/", b"/sys/", b"/dev/"];

/// The read events of an upstream lineage whose file a later step of the
/// same lineage rewrote (an intermediate file `sed -i` replaced, a temp
/// file moved into place), each with the command that did: such a file is
/// expected to differ from what was read.
pub fn rewritten_later(lineage: &prov_export::lineage::Lineage) -> std::collections::HashMap<i64, i64> {
    use prov_export::lineage::MatchKind;
    use prov_model::Access;
    // Where each write of the lineage ended up: its own path, or the name
    // it was moved to; with its command's start.
    let mut destinations: Vec<((i64, i64), i64, &[u8])> = Vec::new();
    for step in lineage.steps.values() {
        let at = (step.command.start_ns, step.command.id);
        destinations.extend(step.files.iter().filter(|f| f.access == Access::Write).map(|f| (at, f.id, &f.path[..])));
    }
    let at_of = |command: i64| lineage.steps.get(&command).map(|s| (s.command.start_ns, s.command.id));
    for fl in lineage.flows.iter().filter(|fl| fl.by == MatchKind::Moved) {
        if let (Some(r), Some(at)) = (lineage.file(fl.reader, fl.read), at_of(fl.writer)) {
            destinations.push((at, fl.written, &r.path));
        }
    }
    for (&(c, event), &kind) in lineage.start.iter().zip(&lineage.start_kinds) {
        if let (MatchKind::Moved, Some(at)) = (kind, at_of(c)) {
            destinations.push((at, event, &lineage.target.path));
        }
    }
    let mut out = std::collections::HashMap::new();
    for step in lineage.steps.values() {
        let here = (step.command.start_ns, step.command.id);
        for f in step.files.iter().filter(|f| f.access == Access::Read) {
            let later =
                destinations.iter().find(|&&(at, w, path)| path == f.path && (at > here || (at == here && w > f.id)));
            if let Some(&(at, _, _)) = later {
                out.insert(f.id, at.1);
            }
        }
    }
    out
}

/// One line on whether the file an upstream `lineage` leads to is stale:
/// any file its commands read (outside the system's directories) whose
/// content (size or partial hash) differs now, other than the ones a later
/// step rewrote ([`rewritten_later`]). A file that is gone is said apart.
pub fn staleness(lineage: &prov_export::lineage::Lineage) -> String {
    use prov_model::Access;
    let rewritten = rewritten_later(lineage);
    let cwd = std::env::current_dir().ok().map(|d| d.into_os_string().into_vec());
    let shown =
        |p: &[u8]| prov_model::escape::escape(cwd.as_deref().map_or(p, |d| prov_export::text::relative_to(p, d)));
    let (mut changed, mut gone, mut checked) = (Vec::new(), Vec::new(), 0usize);
    let mut seen = std::collections::HashSet::new();
    for step in lineage.steps.values() {
        for f in step.files.iter().filter(|f| f.access == Access::Read) {
            let skipped = lineage.own_reads.contains(&f.id)
                || rewritten.contains_key(&f.id)
                || SYSTEM_DIRS.iter().any(|d| f.path.starts_with(d));
            if skipped || !seen.insert(f.path.clone()) {
                continue;
            }
            checked += 1;
            match file_now(f) {
                FileNow::Modified(what) if what.iter().any(|w| *w != "mtime") => changed.push(shown(&f.path)),
                FileNow::Missing => gone.push(shown(&f.path)),
                _ => {}
            }
        }
    }
    let gone_note =
        if gone.is_empty() { String::new() } else { format!(" ({} gone since: {})", gone.len(), gone.join(", ")) };
    if changed.is_empty() {
        format!("up to date: no input upstream changed since it was read ({checked} checked){gone_note}")
    } else {
        let s = if changed.len() == 1 { "" } else { "s" };
        format!("stale: {} input{s} upstream changed since: {}{gone_note}", changed.len(), changed.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prov_model::{Access, HashParams};
    use std::os::unix::fs::MetadataExt;

    /// A scratch directory of this test process, removed at the end.
    struct Dir(std::path::PathBuf);
    impl Dir {
        fn new(name: &str) -> Dir {
            let dir = std::env::temp_dir().join(format!("prov-cli-stat-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The row a writer would have recorded for `path` as it is now.
    fn recorded(path: &Path) -> FileRow {
        let meta = std::fs::metadata(path).unwrap();
        let params = HashParams::default();
        let hash = partial_hash(&File::open(path).unwrap(), meta.size(), params).ok();
        FileRow {
            id: 1,
            command_id: 7,
            access: Access::Write,
            path: path.as_os_str().as_bytes().to_vec(),
            size: meta.size(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            hash,
            hash_params: params,
            pid: None,
        }
    }

    fn set_mtime(path: &Path, mtime_ns: i64) {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(mtime_ns as u64);
        File::options().write(true).open(path).unwrap().set_modified(t).unwrap();
    }

    #[test]
    fn a_file_as_recorded_is_up_to_date_and_each_change_is_named() {
        let dir = Dir::new("changes");
        let path = dir.0.join("result.csv");
        std::fs::write(&path, "a,b\n1,2\n").unwrap();
        let row = recorded(&path);
        assert_eq!(file_now(&row), FileNow::UpToDate);

        // Same size and mtime, other content: only the hash tells.
        std::fs::write(&path, "a,b\n3,4\n").unwrap();
        set_mtime(&path, row.mtime_ns);
        assert_eq!(file_now(&row), FileNow::Modified(vec!["hash"]));

        // Touched only: the content is what was recorded.
        std::fs::write(&path, "a,b\n1,2\n").unwrap();
        set_mtime(&path, row.mtime_ns + 1_000_000_000);
        assert_eq!(file_now(&row), FileNow::Modified(vec!["mtime"]));

        // Longer: size and mtime; the hash is not read.
        std::fs::write(&path, "a,b\n1,2\n5,6\n").unwrap();
        set_mtime(&path, row.mtime_ns + 2_000_000_000);
        assert_eq!(file_now(&row), FileNow::Modified(vec!["size", "mtime"]));

        // A directory in its place.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert_eq!(file_now(&row), FileNow::Modified(vec!["type"]));
        std::fs::remove_dir(&path).unwrap();
        assert_eq!(file_now(&row), FileNow::Missing);
    }

    #[test]
    fn a_file_unreadable_when_recorded_cannot_be_called_up_to_date() {
        let dir = Dir::new("nohash");
        let path = dir.0.join("secret");
        std::fs::write(&path, "x").unwrap();
        let row = FileRow { hash: None, ..recorded(&path) };
        assert!(matches!(file_now(&row), FileNow::Unreadable(why) if why.contains("unreadable when recorded")));
        // What already differs is said all the same.
        std::fs::write(&path, "xy").unwrap();
        assert!(matches!(file_now(&row), FileNow::Modified(what) if what.contains(&"size")));
    }

    #[test]
    fn states_read_as_labels_and_as_the_json_now_field() {
        assert_eq!(FileNow::UpToDate.label(), "up to date");
        assert_eq!(FileNow::Modified(vec!["size", "hash"]).label(), "modified (size, hash)");
        assert_eq!(FileNow::Missing.label(), "missing");
        assert_eq!(FileNow::Unreadable("denied".into()).label(), "cannot check: denied");
        assert_eq!(
            FileNow::Modified(vec!["mtime"]).json(),
            serde_json::json!({ "state": "modified", "differs": ["mtime"], "error": null })
        );
        assert_eq!(
            FileNow::UpToDate.json(),
            serde_json::json!({ "state": "up-to-date", "differs": [], "error": null })
        );
        assert_eq!(FileNow::Missing.json()["state"], "missing");
        assert_eq!(
            FileNow::Unreadable("denied".into()).json(),
            serde_json::json!({ "state": "unreadable", "differs": [], "error": "denied" })
        );
    }

    #[test]
    fn the_asked_file_is_summed_up_against_its_command() {
        let dir = Dir::new("summary");
        let path = dir.0.join("out.txt");
        std::fs::write(&path, "made\n").unwrap();
        let row = recorded(&path);
        let name = path.display().to_string();
        assert_eq!(target_summary(&path, &row, 42, "wrote"), format!("{name} is up to date: as #42 wrote it"));
        std::fs::write(&path, "made again\n").unwrap();
        assert!(
            target_summary(&path, &row, 42, "wrote")
                .starts_with(&format!("{name} was modified since #42 wrote it (size")),
            "{}",
            target_summary(&path, &row, 42, "wrote")
        );
        // The path asked about is checked, not the recorded one (a copy
        // found by content).
        let copy = dir.0.join("copy.txt");
        assert_eq!(target_summary(&copy, &row, 42, "read"), format!("{} is missing now", copy.display()));
    }
}
