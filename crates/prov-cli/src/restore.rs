//! `prov restore`: writes archived scripts back (see the script archive in
//! prov-store). Each file goes to DIR + its recorded absolute path, so the
//! files of one command keep their layout and never collide. Everything is
//! written beneath DIR, reached from one descriptor of it without following
//! any symbolic link.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufWriter, IsTerminal, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use nix::errno::Errno;
use nix::fcntl::{openat, openat2, AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fstatat, mkdirat, Mode};
use nix::unistd::{linkat, unlinkat, UnlinkatFlags};
use prov_model::escape::{escape, escape_controls};
use prov_model::record::bytes_as_hex;
use prov_store::{ArchivedFile, Store};
use rustix::fs::{renameat_with, RenameFlags};
use serde_json::{json, Value};

use crate::file_args::absolute;
use crate::journal::{self, Reach};

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
    /// Without --to or --in-place nothing is written: prov says what would
    /// be restored, and where.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["list", "stdout"])]
    to: Option<PathBuf>,
    /// Write each file back at its recorded path. An existing different
    /// file is replaced only after a yes on a terminal (or with --force).
    #[arg(long, conflicts_with_all = ["to", "list", "stdout"])]
    in_place: bool,
    /// Replace existing files without asking. Without it an existing file
    /// is replaced only after a yes on a terminal, and never otherwise.
    #[arg(long)]
    force: bool,
    /// Write nothing; list what is archived (mode, size, digest, path).
    #[arg(long, conflicts_with_all = ["force", "stdout"])]
    list: bool,
    /// With --list: JSON Lines, one object per file.
    ///
    /// Each object has "type": "archived", command_id, path (with path_hex,
    /// the exact bytes, when the path is not UTF-8), mode (4 octal digits),
    /// size, mtime_ns and digest (of the archived content).
    #[arg(long, requires = "list")]
    json: bool,
    /// Write the one selected file's content to standard output instead.
    #[arg(long, conflicts_with = "force")]
    stdout: bool,
}

pub fn restore(args: RestoreArgs, reach: Reach) -> Result<ExitCode> {
    let Some(store) = journal::open_for(reach)? else {
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
    let to_path = match (&args.to, args.in_place) {
        (Some(dir), _) => dir.clone(),
        (None, true) => PathBuf::from("/"),
        (None, false) => {
            plan(&store, &files)?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    let to = RestoreDir::open(&to_path)?;
    let mut failed = false;
    let mut ask = Asker::new();
    let mut out = std::io::stdout().lock();
    for file in &files {
        match restore_one(&store, file, &to, &to_path, &args, &mut ask) {
            Ok(Some(target)) => writeln!(out, "restored {}", shown(&target))?,
            Ok(None) => {}
            Err(e) => {
                eprintln!("prov: {}", escape_controls(&format!("{e:#}")));
                failed = true;
            }
        }
    }
    out.flush()?;
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Without --to or --in-place: what would be restored, and how the file
/// at its recorded path compares, written to standard output; how to write
/// them, on standard error.
fn plan(store: &Store, files: &[ArchivedFile]) -> Result<()> {
    let mut out = BufWriter::new(std::io::stdout().lock());
    for f in files {
        let now = match std::fs::read(OsStr::from_bytes(&f.path)) {
            Ok(content) if content == store.archived_content(f)? => "same as the archived version",
            Ok(_) => "differs now",
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "missing now",
            Err(_) => "unreadable now",
        };
        writeln!(out, "would restore {}  ({:04o}, {} bytes; {now})", show(&f.path), f.mode & 0o777, f.size)?;
    }
    out.flush()?;
    eprintln!(
        "prov: nothing written; add --to DIR to write each file as DIR/<its recorded path>, or --in-place to write it back where it was"
    );
    Ok(())
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
            writeln!(out, "{:04o} {:>9} {}  {}", f.mode, f.size, f.digest, escape(&f.path))?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Writes one file; `Ok(None)` when the user declined to overwrite.
fn restore_one(
    store: &Store,
    file: &ArchivedFile,
    to: &RestoreDir,
    to_path: &Path,
    args: &RestoreArgs,
    ask: &mut Asker,
) -> Result<Option<PathBuf>> {
    let rel = relative(&file.path)?;
    let target = to_path.join(&rel);
    let content = store.archived_content(file)?;
    // Set-id bits are not given back: the restored file is a new file of
    // the user's, not the one that was run.
    let mode = file.mode & 0o777;
    let (dir, name) = to.parent_of(&rel)?;
    let existing = match fstatat(&dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => Some(st),
        Err(Errno::ENOENT) => None,
        Err(e) => return Err(e).with_context(|| format!("cannot inspect {}", shown(&target))),
    };
    let mut replace = false;
    if let Some(st) = existing {
        let kind = st.st_mode & libc::S_IFMT;
        if kind == libc::S_IFDIR {
            bail!("{} is a directory; not restored", shown(&target));
        }
        if kind == libc::S_IFREG && st.st_size as u64 == file.size {
            // Through a descriptor, so the mode is set on the file that was
            // compared, whatever replaces the name meanwhile (O_NONBLOCK:
            // a FIFO put there instead must not hang us).
            let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK;
            let same = open_beneath(&dir, name, flags, Mode::empty()).ok().map(std::fs::File::from);
            if let Some(f) = same.filter(|f| read_all(f).is_ok_and(|c| c == content)) {
                if st.st_mode & 0o7777 != mode {
                    f.set_permissions(std::fs::Permissions::from_mode(mode))
                        .with_context(|| format!("cannot set the mode of {}", shown(&target)))?;
                }
                return Ok(Some(target));
            }
        }
        replace = args.force || ask.overwrite(&target)?;
        if !replace {
            if ask.is_terminal {
                eprintln!("prov: {} kept as it is", shown(&target));
                return Ok(None);
            }
            bail!("{} exists and differs; not overwritten (use --force)", shown(&target));
        }
    }
    write_new(&dir, name, &target, &content, mode, replace)?;
    Ok(Some(target))
}

fn read_all(mut f: &std::fs::File) -> std::io::Result<Vec<u8>> {
    let mut content = Vec::new();
    f.read_to_end(&mut content)?;
    Ok(content)
}

/// The directory of `--to`, opened once. Every directory and file beneath
/// it is reached one name at a time from there, never through a symbolic
/// link: in a shared directory (`/tmp`) another user could plant one that
/// leads the writes elsewhere (as root, anywhere).
struct RestoreDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl RestoreDir {
    /// Opens DIR, creating it if missing. DIR itself is the user's choice
    /// and may be reached through links.
    fn open(path: &Path) -> Result<RestoreDir> {
        std::fs::create_dir_all(path).with_context(|| format!("cannot create directory {}", shown(path)))?;
        let fd = nix::fcntl::open(path, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
            .with_context(|| format!("cannot open directory {}", shown(path)))?;
        Ok(RestoreDir { fd, path: path.to_owned() })
    }

    /// The directory that holds `rel` (created as needed) and its last name.
    fn parent_of<'a>(&self, rel: &'a Path) -> Result<(OwnedFd, &'a OsStr)> {
        let name = rel.file_name().ok_or_else(|| anyhow!("{} names no file", shown(rel)))?;
        let mut dir = self.fd.try_clone()?;
        let mut reached = self.path.clone();
        for component in rel.parent().into_iter().flat_map(Path::components) {
            let Component::Normal(part) = component else { bail!("{} is not a plain relative path", shown(rel)) };
            reached.push(part);
            dir = match subdirectory(&dir, part) {
                Ok(fd) => fd,
                // ELOOP, or ENOTDIR (O_DIRECTORY on the link itself).
                Err(Errno::ELOOP | Errno::ENOTDIR) if is_link(&dir, part) => {
                    bail!("{} is a symbolic link; not followed (restore writes beneath --to only)", shown(&reached))
                }
                Err(Errno::ENOTDIR) => bail!("{} is not a directory", shown(&reached)),
                Err(e) => return Err(e).with_context(|| format!("cannot create directory {}", shown(&reached))),
            };
        }
        Ok((dir, name))
    }
}

fn is_link(dir: &OwnedFd, name: &OsStr) -> bool {
    fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK)
}

/// `dir/name`, a directory, made if missing; never through a link.
fn subdirectory(dir: &OwnedFd, name: &OsStr) -> nix::Result<OwnedFd> {
    let open = || open_beneath(dir, name, OFlag::O_RDONLY | OFlag::O_DIRECTORY, Mode::empty());
    match open() {
        Err(Errno::ENOENT) => match mkdirat(dir, name, Mode::from_bits_truncate(0o777)) {
            Ok(()) | Err(Errno::EEXIST) => open(),
            Err(e) => Err(e),
        },
        other => other,
    }
}

/// Opens `name` in `dir` without following a symbolic link (nor leaving
/// `dir`): openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS.
fn open_beneath(dir: &OwnedFd, name: &OsStr, flags: OFlag, mode: Mode) -> nix::Result<OwnedFd> {
    let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let resolve = ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS;
    match openat2(dir, name, OpenHow::new().flags(flags).mode(mode).resolve(resolve)) {
        // Kernels before 5.6 (RHEL 8): `name` is one plain name (no `/`, no
        // `..`), so O_NOFOLLOW refuses the same links.
        Err(Errno::ENOSYS) => openat(dir, name, flags, mode),
        other => other,
    }
}

/// Writes `content` to a new temporary file beside the target (in `dir`)
/// and renames it to `name`: a reader never sees half a file, and without
/// `replace` a file that appeared meanwhile is not clobbered
/// (RENAME_NOREPLACE).
fn write_new(dir: &OwnedFd, name: &OsStr, target: &Path, content: &[u8], mode: u32, replace: bool) -> Result<()> {
    // Short, whatever the target's name (which may be NAME_MAX long).
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let tmp = OsString::from(format!(".prov-restore-{}-{nanos}", std::process::id()));
    let created = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL;
    let written = open_beneath(dir, &tmp, created, Mode::from_bits_truncate(0o600))
        .map_err(std::io::Error::from)
        .and_then(|fd| {
            let mut f = std::fs::File::from(fd);
            f.write_all(content)?;
            // Exactly the recorded bits, whatever the umask.
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
            f.sync_data()
        });
    let remove_tmp = || {
        let _ = unlinkat(dir, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
    };
    if let Err(e) = written {
        remove_tmp();
        return Err(e).with_context(|| format!("cannot write {}", shown(&target.with_file_name(&tmp))));
    }
    let flags = if replace { RenameFlags::empty() } else { RenameFlags::NOREPLACE };
    let renamed = renameat_with(dir, tmp.as_os_str(), dir, name, flags).map_err(|e| Errno::from_raw(e.raw_os_error()));
    let renamed = match renamed {
        // A filesystem without RENAME_NOREPLACE: a hard link does not
        // replace either.
        Err(Errno::EINVAL) if !replace => linkat(dir, tmp.as_os_str(), dir, name, AtFlags::empty()),
        other => other,
    };
    if !replace || renamed.is_err() {
        remove_tmp();
    }
    match renamed {
        Ok(()) => Ok(()),
        Err(Errno::EEXIST) => bail!("{} appeared meanwhile; not overwritten (use --force)", shown(target)),
        Err(e) => Err(e).with_context(|| format!("cannot write {}", shown(target))),
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
        eprint!("prov: {} exists and differs; overwrite? [y/N] ", shown(target));
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "Yes"))
    }
}

fn show(path: &[u8]) -> String {
    escape(path)
}

fn shown(path: &Path) -> String {
    escape(path.as_os_str().as_bytes())
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
