//! Per-directory `.provignore` files (gitignore syntax): a file matched by
//! the nearest `.provignore` above it that says anything about it is not
//! recorded (`!pattern` in a nearer one takes it back).
//!
//! Read once per directory and observation, so an edited `.provignore`
//! applies from the next command on. Only files owned by the observed user
//! or root count: anyone may create `/tmp/.provignore`, and it must not hide
//! another user's files from their own journal.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};

pub const FILE_NAME: &str = ".provignore";

pub struct ProvIgnore {
    uid: u32,
    /// Directory → its parsed `.provignore`, or None when it has none.
    dirs: HashMap<PathBuf, Option<Gitignore>>,
    /// Directories with no `.provignore` in them or above them: a file
    /// there is decided by one lookup, not one per ancestor (every event
    /// asks; a kernel-tree path has a dozen ancestors).
    clear: HashSet<Vec<u8>>,
}

impl ProvIgnore {
    pub fn new(uid: u32) -> ProvIgnore {
        ProvIgnore { uid, dirs: HashMap::new(), clear: HashSet::new() }
    }

    /// Whether a `.provignore` above the file at absolute `path` leaves it out.
    pub fn ignores(&mut self, path: &[u8]) -> bool {
        let parent = &path[..path.iter().rposition(|&b| b == b'/').unwrap_or(0)];
        if self.clear.contains(parent) {
            return false;
        }
        let path = Path::new(OsStr::from_bytes(path));
        let mut any_rules = false;
        for dir in path.ancestors().skip(1) {
            let Some(rules) = self.rules_of(dir) else { continue };
            any_rules = true;
            match rules.matched(path, false) {
                ignore::Match::None => {
                    // A pattern may name a directory above the file (`build/`).
                    match rules.matched_path_or_any_parents(path, false) {
                        ignore::Match::None => continue,
                        m => return m.is_ignore(),
                    }
                }
                m => return m.is_ignore(),
            }
        }
        if !any_rules {
            self.clear.insert(parent.to_vec());
        }
        false
    }

    fn rules_of(&mut self, dir: &Path) -> Option<&Gitignore> {
        if !self.dirs.contains_key(dir) {
            let rules = self.load(dir);
            self.dirs.insert(dir.to_owned(), rules);
        }
        self.dirs.get(dir).and_then(Option::as_ref)
    }

    fn load(&self, dir: &Path) -> Option<Gitignore> {
        let file = dir.join(FILE_NAME);
        // A FIFO or a link to a device named .provignore must not stall
        // the collector: only a regular file of a sane size is read.
        let opened = prov_model::small_file::open_regular(&file).ok()?;
        let meta = opened.metadata().ok()?;
        if meta.uid() != self.uid && meta.uid() != 0 {
            return None;
        }
        let content = prov_model::small_file::read_opened(&opened, prov_model::small_file::CONFIG_LIMIT).ok()?;
        let text = prov_model::small_file::text(content).ok()?;
        let mut builder = GitignoreBuilder::new(dir);
        for line in text.lines() {
            // A line that does not parse is skipped; the others still apply.
            let _ = builder.add_line(Some(file.clone()), line);
        }
        builder.build().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    #[test]
    fn nearest_provignore_decides_for_files_below_it() {
        let tmp = std::env::temp_dir().join(format!("provignore-test-{}", std::process::id()));
        let proj = tmp.join("proj");
        std::fs::create_dir_all(proj.join("sub/build")).unwrap();
        std::fs::write(proj.join(FILE_NAME), "*.tmp\nbuild/\n# a comment\nscratch.csv\n").unwrap();
        std::fs::write(proj.join("sub").join(FILE_NAME), "!keep.tmp\n").unwrap();
        let mut p = ProvIgnore::new(nix::unistd::getuid().as_raw());
        let at = |rel: &str| proj.join(rel).into_os_string().into_vec();
        assert!(p.ignores(&at("a.tmp")));
        assert!(p.ignores(&at("sub/deep/b.tmp")));
        assert!(p.ignores(&at("sub/build/out.o")));
        assert!(p.ignores(&at("scratch.csv")));
        assert!(!p.ignores(&at("sub/keep.tmp")), "a nearer ! takes it back");
        assert!(!p.ignores(&at("data.csv")));
        assert!(!p.ignores(&tmp.join("a.tmp").into_os_string().into_vec()), "not above its directory");
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn answers_stay_the_same_when_asked_again() {
        let tmp = std::env::temp_dir().join(format!("provignore-again-{}", std::process::id()));
        let proj = tmp.join("proj");
        std::fs::create_dir_all(proj.join("deep/er")).unwrap();
        std::fs::create_dir_all(tmp.join("plain/deep")).unwrap();
        std::fs::write(proj.join(FILE_NAME), "*.tmp\n").unwrap();
        let mut p = ProvIgnore::new(nix::unistd::getuid().as_raw());
        let at = |rel: &str| tmp.join(rel).into_os_string().into_vec();
        for _ in 0..3 {
            // A directory without rules above it, then one with.
            assert!(!p.ignores(&at("plain/deep/a.tmp")));
            assert!(p.ignores(&at("proj/deep/er/a.tmp")));
            assert!(!p.ignores(&at("proj/deep/er/a.csv")));
            assert!(p.ignores(&at("proj/deep/er/b.tmp")), "a sibling in a directory with rules is matched");
        }
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
