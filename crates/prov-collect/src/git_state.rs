//! The state of the git repository a command's working directory is in:
//! the commit and branch checked out, and whether tracked files were
//! changed. Read from the repository's files (HEAD, refs, packed-refs, the
//! index), never by running git: the collector reads it as the command
//! starts, off the shell's way, in the caller's mount namespace (nothing
//! read here is recorded as the command's).
//!
//! Dirty is what `git diff --quiet` answers: a tracked file whose content
//! differs from the index (changed, deleted, its mode or type changed), an
//! unmerged path, or one added with `git add -N`. A file whose size and
//! modification time match the index is taken as unchanged, as git takes
//! it; one whose times differ (or that may have changed within the
//! index's own second) is hashed as git hashes it. Changes already staged
//! (`git add`, not committed) are not seen: telling them needs the
//! committed tree, which is in git's compressed object store. Where the
//! answer would cost too much (more than `MAX_ENTRIES` tracked files or
//! `MAX_HASHED` bytes to hash) or the index is of a kind not read here
//! (split index, SHA-256 repositories), dirty is unknown, never guessed.

use std::fs;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use prov_model::env::GitState;

/// Tracked files looked at, at most (one lstat each).
const MAX_ENTRIES: usize = 20_000;
/// Bytes of changed-looking files hashed, at most.
const MAX_HASHED: u64 = 16 << 20;
/// Largest HEAD, ref or .git file read.
const SMALL: u64 = 64 << 10;
/// Largest packed-refs read.
const MAX_PACKED_REFS: u64 = 16 << 20;
/// Largest index read.
const MAX_INDEX: u64 = 256 << 20;

/// The repository `cwd` is in, if any.
pub fn of(cwd: &[u8]) -> Option<GitState> {
    let (root, git_dir) = find_repository(Path::new(std::ffi::OsStr::from_bytes(cwd)))?;
    let common = read_small(&git_dir.join("commondir"))
        .map(|c| git_dir.join(String::from_utf8_lossy(c.trim_ascii()).as_ref()))
        .unwrap_or_else(|| git_dir.clone());
    let head = read_small(&git_dir.join("HEAD"))?;
    let head = String::from_utf8_lossy(head.trim_ascii()).into_owned();
    let (branch, commit) = match head.strip_prefix("ref:") {
        Some(name) => {
            let name = name.trim();
            let branch = name.strip_prefix("refs/heads/").unwrap_or(name).to_string();
            (Some(branch), resolve_ref(&git_dir, &common, name, 0))
        }
        None => (None, is_object_id(&head).then_some(head)),
    };
    let dirty = if sha256_repository(&common) { None } else { dirty(&root, &git_dir.join("index")) };
    Some(GitState { root: root.into_os_string().into_vec(), commit, branch, dirty })
}

/// The work tree's top directory and its git directory: the nearest
/// directory at or above `dir` holding `.git` (a directory, or a file
/// naming one: a linked work tree or a submodule).
fn find_repository(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let mut at = Some(dir);
    while let Some(d) = at {
        let dot_git = d.join(".git");
        match fs::metadata(&dot_git) {
            Ok(m) if m.is_dir() => return Some((d.to_owned(), dot_git)),
            Ok(m) if m.is_file() => {
                let text = read_small(&dot_git)?;
                let named = String::from_utf8_lossy(text.trim_ascii()).strip_prefix("gitdir:")?.trim().to_string();
                return Some((d.to_owned(), d.join(named)));
            }
            _ => at = d.parent(),
        }
    }
    None
}

fn read_small(path: &Path) -> Option<Vec<u8>> {
    read_at_most(path, SMALL)
}

fn read_at_most(path: &Path, limit: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    fs::File::open(path).ok()?.take(limit).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

fn is_object_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The commit a ref names: its loose file (in the work tree's own git
/// directory, then the common one), else packed-refs; a symbolic ref is
/// followed a few times.
fn resolve_ref(git_dir: &Path, common: &Path, name: &str, depth: u32) -> Option<String> {
    if depth > 4 || name.split('/').any(|c| c == ".." || c.is_empty()) {
        return None;
    }
    for dir in [git_dir, common] {
        if let Some(text) = read_small(&dir.join(name)) {
            let text = String::from_utf8_lossy(text.trim_ascii()).into_owned();
            return match text.strip_prefix("ref:") {
                Some(next) => resolve_ref(git_dir, common, next.trim(), depth + 1),
                None => is_object_id(&text).then_some(text),
            };
        }
    }
    let packed = read_at_most(&common.join("packed-refs"), MAX_PACKED_REFS)?;
    String::from_utf8_lossy(&packed).lines().find_map(|line| {
        let (id, r) = line.split_once(' ')?;
        (r == name && is_object_id(id)).then(|| id.to_string())
    })
}

fn sha256_repository(common: &Path) -> bool {
    read_small(&common.join("config")).is_some_and(|c| {
        let c = String::from_utf8_lossy(&c).to_ascii_lowercase().replace([' ', '\t'], "");
        c.contains("objectformat=sha256")
    })
}

/// One entry of the index, as far as the check needs it.
struct Entry<'a> {
    path: Vec<u8>,
    mtime: (u32, u32),
    mode: u32,
    size: u32,
    oid: &'a [u8],
    /// Unmerged, or added with `git add -N`: dirty whatever the file is.
    dirty: bool,
    /// assume-unchanged or skip-worktree: git does not look at the file.
    skipped: bool,
}

/// Whether a tracked file of the work tree at `root` differs from the
/// index at `index`; None: not known (see the module's comment).
fn dirty(root: &Path, index: &Path) -> Option<bool> {
    let index_mtime = match fs::metadata(index) {
        Ok(m) => (m.mtime(), m.mtime_nsec()),
        // No index: nothing tracked yet.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(false),
        Err(_) => return None,
    };
    let data = read_at_most(index, MAX_INDEX)?;
    let entries = parse_index(&data)?;
    let mut hash_budget = MAX_HASHED;
    for e in entries {
        if e.dirty {
            return Some(true);
        }
        // A gitlink (submodule) or a sparse directory: not a file here.
        if e.skipped || e.mode & 0o170000 == 0o160000 || e.mode & 0o170000 == 0o040000 {
            continue;
        }
        let path = root.join(std::ffi::OsStr::from_bytes(&e.path));
        let Ok(meta) = fs::symlink_metadata(&path) else { return Some(true) };
        let is_link = meta.file_type().is_symlink();
        if is_link != (e.mode & 0o170000 == 0o120000) || (!is_link && !meta.is_file()) {
            return Some(true);
        }
        if !is_link && (meta.mode() & 0o100 != 0) != (e.mode & 0o100 != 0) {
            return Some(true);
        }
        if meta.size() as u32 != e.size {
            return Some(true);
        }
        let same_time = (meta.mtime() as u32, meta.mtime_nsec() as u32) == e.mtime;
        // Written in the same instant as the index: it may have changed
        // after the index took its times (git's "racy" entries).
        let racy = (i64::from(e.mtime.0), i64::from(e.mtime.1)) >= index_mtime;
        if same_time && !racy {
            continue;
        }
        hash_budget = hash_budget.checked_sub(meta.size())?;
        let content =
            if is_link { fs::read_link(&path).ok()?.into_os_string().into_vec() } else { fs::read(&path).ok()? };
        if blob_id(&content) != e.oid {
            return Some(true);
        }
    }
    Some(false)
}

/// Git's object id of a blob holding `content`.
fn blob_id(content: &[u8]) -> [u8; 20] {
    let mut h = sha1_smol::Sha1::new();
    h.update(format!("blob {}\0", content.len()).as_bytes());
    h.update(content);
    h.digest().bytes()
}

fn be32(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

fn be16(data: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(data.get(at..at + 2)?.try_into().ok()?))
}

/// The entries of an index file (versions 2, 3 and 4, SHA-1); None when it
/// is not one, too large, or a split index (its entries are elsewhere).
fn parse_index(data: &[u8]) -> Option<Vec<Entry<'_>>> {
    const OID: usize = 20;
    if data.get(..4)? != b"DIRC" {
        return None;
    }
    let version = be32(data, 4)?;
    let count = be32(data, 8)? as usize;
    if !(2..=4).contains(&version) || count > MAX_ENTRIES {
        return None;
    }
    let end = data.len().checked_sub(OID)?;
    let mut at = 12;
    let mut entries = Vec::with_capacity(count);
    let mut previous: Vec<u8> = Vec::new();
    for _ in 0..count {
        let start = at;
        let mtime = (be32(data, at + 8)?, be32(data, at + 12)?);
        let mode = be32(data, at + 24)?;
        let size = be32(data, at + 36)?;
        let oid = data.get(at + 40..at + 40 + OID)?;
        let flags = be16(data, at + 40 + OID)?;
        at += 40 + OID + 2;
        let extended = if version >= 3 && flags & 0x4000 != 0 {
            let x = be16(data, at)?;
            at += 2;
            x
        } else {
            0
        };
        let path = if version == 4 {
            let (strip, used) = varint(data.get(at..)?)?;
            at += used;
            let len = data.get(at..end)?.iter().position(|&b| b == 0)?;
            let keep = previous.len().checked_sub(strip)?;
            let mut path = previous[..keep].to_vec();
            path.extend_from_slice(&data[at..at + len]);
            at += len + 1;
            path
        } else {
            let len = data.get(at..end)?.iter().position(|&b| b == 0)?;
            let path = data[at..at + len].to_vec();
            // Entries are padded with NULs to a multiple of 8 bytes.
            at = start + (at - start + len + 8) / 8 * 8;
            path
        };
        if at > end {
            return None;
        }
        previous.clone_from(&path);
        entries.push(Entry {
            path,
            mtime,
            mode,
            size,
            oid,
            dirty: (flags >> 12) & 3 != 0 || extended & 0x2000 != 0,
            skipped: flags & 0x8000 != 0 || extended & 0x4000 != 0,
        });
    }
    // Extensions: a split index keeps its entries in another file.
    while at + 8 <= end {
        let signature = &data[at..at + 4];
        if signature == b"link" {
            return None;
        }
        at += 8 + be32(data, at + 4)? as usize;
    }
    Some(entries)
}

/// Git's offset varint (index v4 path compression): (value, bytes used).
fn varint(data: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    let mut c = *data.first()?;
    let mut value = usize::from(c & 127);
    while c & 128 != 0 {
        i += 1;
        c = *data.get(i)?;
        value = value.checked_add(1)?.checked_mul(128)?.checked_add(usize::from(c & 127))?;
    }
    Some((value, i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> bool {
        Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@e", "-c", "init.defaultBranch=main"])
            .args(args)
            .current_dir(dir)
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// The state as read here agrees with git's own answers.
    #[test]
    fn agrees_with_git() {
        let dir = std::env::temp_dir().join(format!("prov-git-state-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("sub")).unwrap();
        if !git(&dir, &["init", "-q"]) {
            eprintln!("no git here: skipped");
            return;
        }
        let cwd = dir.join("sub").into_os_string().into_vec();
        let state = of(&cwd).unwrap();
        assert_eq!((state.commit, state.branch.as_deref(), state.dirty), (None, Some("main"), Some(false)));
        fs::write(dir.join("sub/a.txt"), "one\n").unwrap();
        assert!(git(&dir, &["add", "."]) && git(&dir, &["commit", "-q", "-m", "x"]));
        let head = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(&dir).output().unwrap();
        let head = String::from_utf8(head.stdout).unwrap().trim().to_string();
        let state = of(&cwd).unwrap();
        assert_eq!(state.root, dir.as_os_str().as_bytes());
        assert_eq!((state.commit.as_deref(), state.dirty), (Some(head.as_str()), Some(false)));
        // Same size, new content: found by its hash.
        fs::write(dir.join("sub/a.txt"), "two\n").unwrap();
        assert_eq!(of(&cwd).unwrap().dirty, Some(true));
        // Same content again, new mtime: clean, as git says.
        fs::write(dir.join("sub/a.txt"), "one\n").unwrap();
        assert_eq!(of(&cwd).unwrap().dirty, Some(false));
        fs::remove_file(dir.join("sub/a.txt")).unwrap();
        assert_eq!(of(&cwd).unwrap().dirty, Some(true));
        assert!(git(&dir, &["checkout", "-q", "--", "."]));
        // Packed refs and a detached HEAD.
        assert!(git(&dir, &["pack-refs", "--all"]));
        assert_eq!(of(&cwd).unwrap().commit.as_deref(), Some(head.as_str()));
        assert!(git(&dir, &["checkout", "-q", "--detach"]));
        let state = of(&cwd).unwrap();
        assert_eq!((state.commit.as_deref(), state.branch), (Some(head.as_str()), None));
        // Index version 4 (compressed paths).
        assert!(git(&dir, &["update-index", "--index-version", "4"]));
        assert_eq!(of(&cwd).unwrap().dirty, Some(false));
        let _ = fs::remove_dir_all(&dir);
        assert!(of(b"/proc").is_none());
    }
}
