//! Where prov keeps its files, following the XDG base directory spec:
//! configuration under `$XDG_CONFIG_HOME/prov`, the database under
//! `$XDG_DATA_HOME/prov`, the spool under `$XDG_STATE_HOME/prov`.

use std::env;
use std::path::{Path, PathBuf};

/// The user's XDG locations, resolved once from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locations {
    pub home: PathBuf,
    pub config_dir: PathBuf,
    pub data_dir: PathBuf,
    pub state_dir: PathBuf,
}

impl Locations {
    /// Resolves from `HOME` and the `XDG_*_HOME` variables. Relative XDG
    /// values are ignored, as the spec demands.
    pub fn from_env() -> Result<Locations, String> {
        let home = env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .ok_or_else(|| "HOME is not set to an absolute path".to_string())?;
        let xdg = |var: &str, fallback: &str| {
            env::var_os(var)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .unwrap_or_else(|| home.join(fallback))
                .join("prov")
        };
        Ok(Locations {
            config_dir: xdg("XDG_CONFIG_HOME", ".config"),
            data_dir: xdg("XDG_DATA_HOME", ".local/share"),
            state_dir: xdg("XDG_STATE_HOME", ".local/state"),
            home,
        })
    }

    pub fn config_file(&self) -> PathBuf {
        self.config_dir.join("config.toml")
    }

    pub fn default_database(&self) -> PathBuf {
        self.data_dir.join("prov.db")
    }

    /// Records that could not be written to the database wait here.
    pub fn spool_dir(&self) -> PathBuf {
        self.state_dir.join("spool")
    }

    /// What collectors could not do (a record spooled or lost, a collector
    /// that stopped early): they run detached, with nowhere else to say it.
    pub fn collector_log(&self) -> PathBuf {
        collector_log_beside(&self.spool_dir())
    }
}

/// The collector log of the state directory holding `spool_dir` (the
/// collector knows only its settings' spool directory).
pub fn collector_log_beside(spool_dir: &std::path::Path) -> PathBuf {
    spool_dir.parent().unwrap_or(spool_dir).join("collector.log")
}

/// A directory on the way to one of prov's files that someone other than
/// the expected owner could change (see [`check_private_path`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotPrivate {
    pub dir: PathBuf,
    pub problem: Problem,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Owned by this uid instead.
    OwnedBy(u32),
    /// Writable by group or others (the mode's permission bits).
    WritableByOthers(u32),
    /// It could not be looked at.
    Unreadable(String),
    /// Links that lead to links, more than the kernel would follow.
    TooManyLinks,
}

/// Checks, like OpenSSH's StrictModes, that nobody but `owner` can change
/// where `path` leads: every directory on the way, the directories of the
/// symbolic links on the way included, is owned by `owner` and writable by
/// nobody else. A root-owned sticky directory (`/tmp`) may be on the way,
/// since nobody else can rename or remove what is in it, but it may not be
/// the last directory that exists, in which prov's files are (or will be)
/// created: there another user could plant them first.
pub fn check_private_path(path: &Path, owner: u32) -> Result<(), NotPrivate> {
    use std::os::unix::fs::MetadataExt;
    const MAX_LINKS: usize = 40;
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        env::current_dir()
            .map_err(|e| NotPrivate { dir: ".".into(), problem: Problem::Unreadable(e.to_string()) })?
            .join(path)
    };
    let lstat = |p: &Path| std::fs::symlink_metadata(p);
    let unreadable =
        |dir: &Path, e: std::io::Error| NotPrivate { dir: dir.to_owned(), problem: Problem::Unreadable(e.to_string()) };
    let allowed = |dir: &Path, meta: &std::fs::Metadata| -> Result<(), NotPrivate> {
        if meta.uid() != owner && meta.uid() != 0 {
            return Err(NotPrivate { dir: dir.to_owned(), problem: Problem::OwnedBy(meta.uid()) });
        }
        let sticky_root = meta.uid() == 0 && meta.mode() & 0o1000 != 0;
        if meta.mode() & 0o022 != 0 && !sticky_root {
            return Err(NotPrivate { dir: dir.to_owned(), problem: Problem::WritableByOthers(meta.mode() & 0o7777) });
        }
        Ok(())
    };
    // Components still to walk, the next one last; `dir` never holds a link.
    let mut pending: Vec<std::ffi::OsString> = Vec::new();
    push_components(&mut pending, &absolute);
    let mut dir = PathBuf::from("/");
    let mut meta = lstat(&dir).map_err(|e| unreadable(&dir, e))?;
    allowed(&dir, &meta)?;
    let mut links = 0;
    while let Some(name) = pending.pop() {
        if name == ".." {
            dir.pop();
            meta = lstat(&dir).map_err(|e| unreadable(&dir, e))?;
            continue;
        }
        let next = dir.join(&name);
        let next_meta = match lstat(&next) {
            Ok(m) => m,
            // prov creates the rest, in `dir`.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) => return Err(unreadable(&next, e)),
        };
        if next_meta.file_type().is_symlink() {
            links += 1;
            if links > MAX_LINKS {
                return Err(NotPrivate { dir: next, problem: Problem::TooManyLinks });
            }
            let target = std::fs::read_link(&next).map_err(|e| unreadable(&next, e))?;
            if target.is_absolute() {
                dir = PathBuf::from("/");
                meta = lstat(&dir).map_err(|e| unreadable(&dir, e))?;
            }
            push_components(&mut pending, &target);
            continue;
        }
        if !next_meta.is_dir() {
            // prov's file itself, in `dir`.
            break;
        }
        allowed(&next, &next_meta)?;
        dir = next;
        meta = next_meta;
    }
    if meta.mode() & 0o022 != 0 {
        return Err(NotPrivate { dir, problem: Problem::WritableByOthers(meta.mode() & 0o7777) });
    }
    Ok(())
}

/// Puts `path`'s names on the stack `pending` so that the first comes off first.
fn push_components(pending: &mut Vec<std::ffi::OsString>, path: &Path) {
    use std::path::Component;
    let names: Vec<std::ffi::OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some("..".into()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    pending.extend(names.into_iter().rev());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    /// A scratch directory of this process's own, mode 0755.
    fn scratch(name: &str) -> PathBuf {
        let dir = env::temp_dir().join(format!("prov-paths-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir
    }

    fn uid_of(p: &Path) -> u32 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).unwrap().uid()
    }

    #[test]
    fn own_directories_pass_and_missing_ones_are_made_in_them() {
        let dir = scratch("own");
        let me = uid_of(&dir);
        std::fs::create_dir_all(dir.join("data")).unwrap();
        assert_eq!(check_private_path(&dir.join("data/prov.db"), me), Ok(()));
        assert_eq!(check_private_path(&dir.join("not/yet/prov.db"), me), Ok(()));
        // temp_dir (/tmp) is root's and sticky: fine on the way.
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn directories_others_can_write_are_refused() {
        let dir = scratch("writable");
        let me = uid_of(&dir);
        let open = dir.join("open");
        std::fs::create_dir_all(open.join("inner")).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let refused = check_private_path(&open.join("inner/prov.db"), me).unwrap_err();
        assert_eq!(refused, NotPrivate { dir: open.clone(), problem: Problem::WritableByOthers(0o777) });
        // Sticky but not root's (unless the tests run as root): refused too;
        // sticky and last, refused always.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let last = check_private_path(&open.join("prov.db"), me).unwrap_err();
        assert_eq!(last.dir, open);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn links_are_followed_and_their_targets_checked() {
        let dir = scratch("links");
        let me = uid_of(&dir);
        let open = dir.join("open");
        std::fs::create_dir_all(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        symlink(&open, dir.join("data")).unwrap();
        let refused = check_private_path(&dir.join("data/prov.db"), me).unwrap_err();
        assert_eq!(refused.dir, open, "the link's target is what counts");
        symlink("loop", dir.join("loop")).unwrap();
        assert_eq!(check_private_path(&dir.join("loop/x"), me).unwrap_err().problem, Problem::TooManyLinks);
        symlink(Path::new("..").join(dir.file_name().unwrap()), dir.join("up")).unwrap();
        std::fs::create_dir_all(dir.join("fine")).unwrap();
        assert_eq!(check_private_path(&dir.join("up/fine/prov.db"), me), Ok(()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn directories_of_another_owner_are_refused() {
        let dir = scratch("owner");
        let me = uid_of(&dir);
        if me == 0 {
            std::os::unix::fs::chown(&dir, Some(4_000_000), None).unwrap();
            let refused = check_private_path(&dir.join("prov.db"), 0).unwrap_err();
            assert_eq!(refused, NotPrivate { dir: dir.clone(), problem: Problem::OwnedBy(4_000_000) });
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
