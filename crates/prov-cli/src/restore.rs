//! `prov restore`: writes archived scripts back (see the script archive in
//! prov-store). Each file goes to DIR + its recorded absolute path, so the
//! files of one command keep their layout and never collide.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::{BufRead, BufWriter, IsTerminal, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use prov_model::record::bytes_as_hex;
use prov_store::{ArchivedFile, Store};
use serde_json::{json, Value};

use crate::query::{absolute, open_store};

#[derive(Args)]
pub struct RestoreArgs {
    /// The command whose archived files to restore (its `id` in `prov query`).
    #[arg(required_unless_present = "file", value_name = "COMMAND_ID")]
    id: Option<i64>,
    /// Only the file read at PATH: its newest archived version, or the one
    /// COMMAND_ID read when that is given too.
    #[arg(long, value_name = "PATH")]
    file: Option<OsString>,
    /// Write under DIR (created if missing): DIR/<recorded absolute path>.
    #[arg(long, value_name = "DIR", default_value = ".")]
    to: PathBuf,
    /// Replace existing files without asking. Without it an existing file
    /// is replaced only after a yes on a terminal, and never otherwise.
    #[arg(long)]
    force: bool,
    /// Write nothing; list what is archived (mode, size, digest, path).
    #[arg(long, conflicts_with_all = ["force", "stdout"])]
    list: bool,
    /// With --list: JSON Lines, one object per file (see README.md).
    #[arg(long, requires = "list")]
    json: bool,
    /// Write the one selected file's content to standard output instead.
    #[arg(long, conflicts_with = "force")]
    stdout: bool,
}

pub fn restore(args: RestoreArgs) -> Result<ExitCode> {
    let Some(store) = open_store()? else {
        eprintln!("prov: no records yet");
        return Ok(ExitCode::from(1));
    };
    let files = select(&store, &args)?;
    if args.list {
        list(&files, args.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.stdout {
        let [file] = files.as_slice() else {
            bail!("--stdout writes one file, but {} are selected (choose one with --file)", files.len());
        };
        let content = store.archived_content(file)?;
        let mut out = std::io::stdout().lock();
        out.write_all(&content)?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut failed = false;
    let mut ask = Asker::new();
    let mut out = std::io::stdout().lock();
    for file in &files {
        match restore_one(&store, file, &args, &mut ask) {
            Ok(Some(target)) => {
                out.write_all(b"restored ")?;
                out.write_all(target.as_os_str().as_bytes())?;
                out.write_all(b"\n")?;
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!("prov: {e:#}");
                failed = true;
            }
        }
    }
    out.flush()?;
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// The archived files the arguments select, in the order they were read.
fn select(store: &Store, args: &RestoreArgs) -> Result<Vec<ArchivedFile>> {
    let path = args.file.as_deref().map(|f| absolute(Path::new(f))).transpose()?;
    let path_bytes = path.as_ref().map(|p| p.as_os_str().as_bytes());
    match (args.id, path_bytes) {
        (Some(id), wanted) => {
            if store.command(id)?.is_none() {
                bail!("no command with id {id}");
            }
            let mut files = store.archived_of(id)?;
            if files.is_empty() {
                bail!("command {id} has no archived files");
            }
            if let Some(wanted) = wanted {
                files.retain(|f| f.path == wanted);
                if files.is_empty() {
                    bail!("command {id} has no archived file {}", show(wanted));
                }
            }
            Ok(files)
        }
        (None, Some(wanted)) => match store.newest_archived_at(wanted)? {
            Some(f) => Ok(vec![f]),
            None => bail!("no archived file {}", show(wanted)),
        },
        (None, None) => unreachable!("clap requires COMMAND_ID or --file"),
    }
}

fn list(files: &[ArchivedFile], json: bool) -> Result<()> {
    let mut out = BufWriter::new(std::io::stdout().lock());
    for f in files {
        if json {
            let mut o = json!({
                "type": "archived",
                "command_id": f.command_id,
                "path": String::from_utf8_lossy(&f.path),
                "mode": format!("{:04o}", f.mode),
                "size": f.size,
                "mtime_ns": f.mtime_ns,
                "digest": f.digest.to_string(),
            });
            if std::str::from_utf8(&f.path).is_err() {
                o["path_hex"] = Value::from(bytes_as_hex::encode(&f.path));
            }
            serde_json::to_writer(&mut out, &o)?;
            out.write_all(b"\n")?;
        } else {
            write!(out, "{:04o} {:>9} {}  ", f.mode, f.size, f.digest)?;
            out.write_all(&f.path)?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Writes one file; `Ok(None)` when the user declined to overwrite.
fn restore_one(store: &Store, file: &ArchivedFile, args: &RestoreArgs, ask: &mut Asker) -> Result<Option<PathBuf>> {
    let target = args.to.join(relative(&file.path)?);
    let content = store.archived_content(file)?;
    // Set-id bits are not given back: the restored file is a new file of
    // the user's, not the one that was run.
    let mode = file.mode & 0o777;
    let existing = match std::fs::symlink_metadata(&target) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot inspect {}", target.display())),
    };
    let mut replace = false;
    if let Some(meta) = existing {
        if meta.is_dir() {
            bail!("{} is a directory; not restored", target.display());
        }
        if meta.is_file() && meta.len() == file.size && std::fs::read(&target).is_ok_and(|c| c == content) {
            if meta.permissions().mode() & 0o7777 != mode {
                std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode))
                    .with_context(|| format!("cannot set the mode of {}", target.display()))?;
            }
            return Ok(Some(target));
        }
        replace = args.force || ask.overwrite(&target)?;
        if !replace {
            if ask.is_terminal {
                eprintln!("prov: {} kept as it is", target.display());
                return Ok(None);
            }
            bail!("{} exists and differs; not overwritten (use --force)", target.display());
        }
    }
    write_new(&target, &content, mode, replace)?;
    Ok(Some(target))
}

/// Writes `content` to a temporary file beside `target` and renames it into
/// place: a reader never sees half a file, and without `replace` a file
/// that appeared meanwhile is not clobbered (RENAME_NOREPLACE).
fn write_new(target: &Path, content: &[u8], mode: u32, replace: bool) -> Result<()> {
    let dir = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create directory {}", dir.display()))?;
    // Short, whatever the target's name (which may be NAME_MAX long).
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(".prov-restore-{}-{nanos}", std::process::id()));
    let written = (|| -> std::io::Result<()> {
        let mut f = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        f.write_all(content)?;
        // Exactly the recorded bits, whatever the umask.
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.sync_data()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("cannot write {}", tmp.display()));
    }
    let flags = if replace { nix::fcntl::RenameFlags::empty() } else { nix::fcntl::RenameFlags::RENAME_NOREPLACE };
    let at = nix::fcntl::AT_FDCWD;
    let renamed = match nix::fcntl::renameat2(at, &tmp, at, target, flags) {
        // A filesystem without RENAME_NOREPLACE: a hard link does not
        // replace either.
        Err(nix::errno::Errno::EINVAL) if !replace => std::fs::hard_link(&tmp, target).map_err(anyhow::Error::from),
        other => other.map_err(anyhow::Error::from),
    };
    if !replace || renamed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    match renamed {
        Ok(()) => Ok(()),
        Err(e) if e.downcast_ref::<nix::errno::Errno>() == Some(&nix::errno::Errno::EEXIST) => {
            bail!("{} appeared meanwhile; not overwritten (use --force)", target.display())
        }
        Err(e) => Err(e).with_context(|| format!("cannot write {}", target.display())),
    }
}

/// The recorded absolute path as a path relative to the restore directory.
/// A path with `.` or `..` components is refused: the kernel never records
/// one, and it could point outside the directory.
fn relative(recorded: &[u8]) -> Result<PathBuf> {
    let path = Path::new(std::ffi::OsStr::from_bytes(recorded));
    let mut rel = PathBuf::new();
    let mut components = path.components();
    if components.next() != Some(Component::RootDir) {
        bail!("recorded path {} is not absolute; not restored", show(recorded));
    }
    for c in components {
        match c {
            Component::Normal(name) => rel.push(name),
            _ => bail!("recorded path {} is not a plain absolute path; not restored", show(recorded)),
        }
    }
    if rel.as_os_str().is_empty() {
        bail!("recorded path {} names no file; not restored", show(recorded));
    }
    Ok(rel)
}

/// Asks before overwriting, when standard input is a terminal.
struct Asker {
    is_terminal: bool,
}

impl Asker {
    fn new() -> Asker {
        Asker { is_terminal: std::io::stdin().is_terminal() }
    }

    fn overwrite(&mut self, target: &Path) -> Result<bool> {
        if !self.is_terminal {
            return Ok(false);
        }
        eprint!("prov: {} exists and differs; overwrite? [y/N] ", target.display());
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "Yes"))
    }
}

fn show(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_paths_stay_inside_the_directory() {
        assert_eq!(relative(b"/home/u/run.sh").unwrap(), PathBuf::from("home/u/run.sh"));
        assert_eq!(relative(b"/home/u/\xff.sh").unwrap().as_os_str().as_bytes(), b"home/u/\xff.sh");
        for bad in [&b"/home/../../etc/passwd"[..], b"relative/x.sh", b"/", b""] {
            assert!(relative(bad).is_err(), "{}", show(bad));
        }
    }
}
