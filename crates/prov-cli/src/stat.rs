//! `--stat`: is a recorded file still what the command saw? Compared are
//! the size, the mtime and the partial hash, computed with the parameters
//! the file was recorded with.

use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
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
