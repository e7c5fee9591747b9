//! Turns one kernel event into a `FileEvent`: path, permission re-check,
//! metadata, content hash, and for scripts their whole content (the script
//! archive) — all through the descriptor the kernel gave us, never by
//! opening the file again (that would be a new event, forever).

use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::Arc;

use nix::fcntl::AtFlags;
use nix::unistd::{faccessat, AccessFlags};
use prov_model::config::extension;
use prov_model::{partial_hash, Access, ArchivedRead, Completeness, FileEvent};
use prov_protocol::writer_pipe::MAX_ARCHIVED_FILE;

use crate::fanotify::{EventFile, RawEvent, FAN_CLOSE_NOWRITE, FAN_CLOSE_WRITE, FAN_OPEN_EXEC, FAN_Q_OVERFLOW};
use crate::follow_namespaces::Followed;
use crate::processes::{ExecEvent, ProcessTable};
use crate::provignore::ProvIgnore;
use prov_protocol::control::Settings;

/// What makes an event a repeat: access, device, inode, mtime, size.
type SeenKey = (Access, u64, u64, i64, u64);

/// Per-observation state: filters, limits, what was already recorded.
pub struct Resolver {
    settings: Settings,
    private_paths: Vec<Vec<u8>>,
    /// Root may read everything; the re-check is for ordinary users.
    check_access: bool,
    uid: u32,
    /// `/` of the observed namespace, where paths are checked.
    ns_root: OwnedFd,
    /// `/proc/self/fd`, opened once: each event's path is then one lookup
    /// of its descriptor's number, not a walk of four components (1.4 µs
    /// instead of 2.25 µs per event here).
    proc_fds: Option<OwnedFd>,
    seen: HashSet<SeenKey>,
    recorded: [u64; 2],
    /// Contents archived since the last `take_archived`.
    archived: Vec<ArchivedRead>,
    /// Contents archived in this observation (bounded by max_per_command).
    archived_count: u32,
    pub completeness: Completeness,
    /// The `.provignore` files above the recorded paths.
    provignore: ProvIgnore,
    /// The command's processes (exec events and the pids of file events).
    pub processes: ProcessTable,
    /// File events resolved so far: the index of the next one.
    events_out: u64,
    /// The mount namespaces the command made that are followed: their
    /// events name files as seen inside.
    followed: Option<Arc<Followed>>,
}

/// An event's file as the record names it.
struct Located {
    /// The path stored: as the observed namespace has it, or as seen inside
    /// a namespace of the command's own, behind a marker (`[bwrap:4711]`).
    path: Vec<u8>,
    /// The length of that marker (0: none).
    marker: usize,
}

impl Located {
    /// The path as the process that used the file saw it: what filters,
    /// `.provignore` and prov's own paths are tested on.
    fn seen(&self) -> &[u8] {
        &self.path[self.marker..]
    }
}

impl Resolver {
    pub fn new(settings: Settings, check_access: bool, ns_root: OwnedFd) -> Resolver {
        use std::os::unix::ffi::OsStrExt;
        let private_paths =
            settings.private_paths.iter().map(|p: &PathBuf| p.as_os_str().as_bytes().to_vec()).collect();
        Resolver {
            settings,
            private_paths,
            check_access,
            uid: nix::unistd::getuid().as_raw(),
            provignore: ProvIgnore::new(nix::unistd::getuid().as_raw()),
            ns_root,
            proc_fds: File::open("/proc/self/fd").ok().map(OwnedFd::from),
            seen: HashSet::new(),
            recorded: [0, 0],
            archived: Vec::new(),
            archived_count: 0,
            completeness: Completeness::default(),
            processes: ProcessTable::default(),
            events_out: 0,
            followed: None,
        }
    }

    /// Events on the mounts of these namespaces are named by where the
    /// host has their files (see `follow_namespaces`).
    pub fn follow(&mut self, followed: Arc<Followed>) {
        self.followed = Some(followed);
    }

    /// The namespace's root, back from a resolver whose record is done: an
    /// observation serving another record hands it to the next resolver.
    pub fn into_ns_root(self) -> OwnedFd {
        self.ns_root
    }

    /// Resolves `ev`, pushing zero, one or two (read and write merged by the
    /// kernel) file events; the descriptor is closed on return. Cheapest
    /// tests first: one fstat decides most repeats (a header read by every
    /// compiler process) and everything that is not a regular file
    /// (/dev/null, ttys, pipes) before the path is looked up.
    pub fn resolve(&mut self, ev: RawEvent, out: &mut Vec<FileEvent>) {
        if ev.mask & FAN_Q_OVERFLOW != 0 {
            self.completeness.queue_overflows += 1;
            return;
        }
        let closes = ev.mask & (FAN_CLOSE_WRITE | FAN_CLOSE_NOWRITE) != 0;
        let file = match ev.file {
            EventFile::Open(fd) => File::from(fd),
            // An exec whose file the kernel could not open for us is no
            // file event; the process shows up by its file events, if any.
            EventFile::None | EventFile::Error(_) if !closes && ev.mask & FAN_OPEN_EXEC != 0 => return,
            EventFile::None | EventFile::Error(_) => {
                self.completeness.unreadable += 1;
                return;
            }
        };
        let Ok(meta) = file.metadata() else {
            self.completeness.unreadable += 1;
            return;
        };
        if !meta.file_type().is_file() {
            return;
        }
        if ev.mask & FAN_OPEN_EXEC != 0 {
            self.exec_event(&file, &meta, ev.pid, ev.read_at_ns);
        }
        if ev.mask & FAN_CLOSE_NOWRITE != 0 && ev.pid > 0 {
            self.processes.closed(ev.pid as u32, (meta.dev(), meta.ino()));
        }
        if !closes {
            return;
        }
        let mtime_ns = meta.mtime() * 1_000_000_000 + meta.mtime_nsec();
        let new_accesses =
            [(FAN_CLOSE_WRITE, Access::Write), (FAN_CLOSE_NOWRITE, Access::Read)].map(|(bit, access)| {
                let key = (access, meta.dev(), meta.ino(), mtime_ns, meta.size());
                (ev.mask & bit != 0 && !self.seen.contains(&key)).then_some(key)
            });
        if new_accesses.iter().all(Option::is_none) {
            return;
        }
        let fd_name = file.as_raw_fd().to_string();
        let Some(located) = self.locate(&file, &fd_name, &meta) else {
            self.completeness.unreadable += 1;
            return;
        };
        // prov's own files (its database, a traced `prov query` read):
        // closed at once, like every event's file (this process holds no
        // lock on them: the writer process does).
        if self.is_private(located.seen()) {
            return;
        }
        for key in new_accesses.into_iter().flatten() {
            if let Some(e) = self.resolve_one(&file, &fd_name, &located, &meta, key, ev.pid) {
                if let Some(pid) = e.pid {
                    self.processes.saw(pid, ev.read_at_ns, self.events_out);
                }
                self.events_out += 1;
                out.push(e);
            }
        }
    }

    /// An executed file: a new process image, or the interpreter of one.
    /// Its path is shown under the rules of a read (private, ignored or
    /// unreadable for the user: not shown).
    fn exec_event(&mut self, file: &File, meta: &std::fs::Metadata, pid: i32, read_at_ns: u64) {
        let Ok(pid) = u32::try_from(pid) else { return };
        if pid == 0 {
            return;
        }
        let fd_name = file.as_raw_fd().to_string();
        let shown_path = self.locate(file, &fd_name, meta).filter(|l| {
            !self.is_private(l.seen())
                && (l.marker > 0 || !self.provignore.ignores(&l.path))
                && (!self.check_access || self.user_may_read(meta, &fd_name, l))
        });
        let shown_path = shown_path.map(|l| l.path);
        // Which version of the program ran: what a read of it records, from
        // the descriptor the kernel gave (three short reads of the file).
        let exe_file = shown_path.as_ref().map(|_| prov_model::ExeFile {
            size: meta.size(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            hash: partial_hash(file, meta.size(), self.settings.hash).ok(),
            hash_params: self.settings.hash,
        });
        let exec = ExecEvent {
            pid,
            file,
            id: (meta.dev(), meta.ino()),
            shown_path,
            exe_file,
            read_at_ns,
            events_before: self.events_out,
        };
        self.processes.exec(exec, &self.ns_root);
    }

    /// The path of the event's file, through its magic link in
    /// `/proc/self/fd` (raw bytes; a deleted file without the kernel's
    /// " (deleted)" suffix).
    fn path_of(&self, fd_name: &str, meta: &std::fs::Metadata) -> Option<Vec<u8>> {
        let target = match &self.proc_fds {
            Some(dir) => nix::fcntl::readlinkat(dir, fd_name),
            None => nix::fcntl::readlink(format!("/proc/self/fd/{fd_name}").as_str()),
        };
        let mut path = std::os::unix::ffi::OsStringExt::into_vec(target.ok()?);
        // Not absolute: the file's mount is no longer reachable (the
        // namespace went away or it was lazily unmounted).
        if !path.starts_with(b"/") {
            return None;
        }
        if meta.nlink() == 0 {
            // Deleted before we looked: the kernel appends " (deleted)".
            if let Some(stripped) = path.strip_suffix(b" (deleted)") {
                path.truncate(stripped.len());
            }
        }
        Some(path)
    }

    /// The event's file as the record names it (see `Located`).
    fn locate(&self, file: &File, fd_name: &str, meta: &std::fs::Metadata) -> Option<Located> {
        let path = self.path_of(fd_name, meta)?;
        let Some(followed) = self.followed.as_ref().filter(|f| f.any()) else {
            return Some(Located { path, marker: 0 });
        };
        let Ok(mount_id) = crate::sys::mount_id(file.as_fd()) else {
            return Some(Located { path, marker: 0 });
        };
        let Some(mut place) = followed.place(mount_id, &path) else {
            return Some(Located { path, marker: 0 });
        };
        // The first host path that reaches this very file; if none does, the
        // table may be older than the event (a pivot_root just moved the
        // mounts): again with the table as it is now, for as long as it
        // changed since the last look (`read_again`).
        loop {
            if let Some(host) = place.host.iter().find(|p| self.reaches(p, meta)) {
                return Some(Located { path: host.clone(), marker: 0 });
            }
            match followed.read_again(mount_id).then(|| followed.place(mount_id, &path)).flatten() {
                Some(again) => place = again,
                None => break,
            }
        }
        let marker = format!("[{}]", place.label).into_bytes();
        Some(Located { marker: marker.len(), path: [marker, place.inside].concat() })
    }

    /// Whether `path` leads to the file `meta` describes in the observed
    /// namespace (an O_PATH open there, no symlinks followed).
    fn reaches(&self, path: &[u8], meta: &std::fs::Metadata) -> bool {
        use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
        use std::os::unix::ffi::OsStrExt;
        let how = OpenHow::new()
            .flags(OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        let reached = openat2(self.ns_root.as_fd(), std::ffi::OsStr::from_bytes(path), how)
            .ok()
            .and_then(|fd| nix::sys::stat::fstat(fd).ok());
        reached.is_some_and(|st| st.st_dev == meta.dev() && st.st_ino == meta.ino())
    }

    fn resolve_one(
        &mut self,
        file: &File,
        fd_name: &str,
        located: &Located,
        meta: &std::fs::Metadata,
        key: SeenKey,
        pid: i32,
    ) -> Option<FileEvent> {
        let access = key.0;
        let filter = match access {
            Access::Read => &self.settings.read,
            Access::Write => &self.settings.write,
        };
        // A .provignore is looked for on the host: only above a host path.
        if !filter.allows(located.seen()) || (located.marker == 0 && self.provignore.ignores(&located.path)) {
            return None;
        }
        let path = located.path.as_slice();
        if self.check_access && !self.user_may_read(meta, fd_name, located) {
            self.completeness.denied += 1;
            return None;
        }
        let slot = access as usize;
        if self.recorded[slot] >= filter.max_events {
            match access {
                Access::Read => self.completeness.dropped_read_limit += 1,
                Access::Write => self.completeness.dropped_write_limit += 1,
            }
            return None;
        }
        self.recorded[slot] += 1;
        self.seen.insert(key);
        let archived = match access {
            Access::Read => self.archive(file, path, meta, key.3),
            Access::Write => None,
        };
        // An archived file is hashed from the bytes kept, so the event's
        // hash always describes the archived content (and no second read).
        let hash = match &archived {
            Some(a) => partial_hash(&InMemory(&a.content), meta.size(), self.settings.hash).ok(),
            None => partial_hash(file, meta.size(), self.settings.hash).ok(),
        };
        self.archived.extend(archived);
        Some(FileEvent {
            access,
            path: path.to_vec(),
            size: meta.size(),
            mtime_ns: key.3,
            hash,
            hash_params: self.settings.hash,
            pid: u32::try_from(pid).ok().filter(|&p| p > 0),
        })
    }

    /// The kernel opened the event file without a permission check, so a
    /// privileged descendant's files would reach the user's database. Without
    /// opening the file again (that would be a new event), the user must be
    /// able to read the inode (checked through the magic link) and to reach
    /// it by its path *inside the observed namespace* (an O_PATH open there,
    /// as the user, must find the same inode: no rename or other namespace
    /// can stand in for it).
    ///
    /// The user's own files need no check (the common case, and two path
    /// walks saved per event): whatever wrote them, their content is theirs,
    /// whatever their mode (tar's mode-0 placeholders for symlinks included;
    /// the owner may chmod them at will). A deleted file of someone else
    /// cannot be reached by path: dropped.
    /// A file as seen inside a namespace of the command's own has no path
    /// to check in the observed one: only the user's own files pass.
    fn user_may_read(&self, meta: &std::fs::Metadata, fd_name: &str, located: &Located) -> bool {
        if meta.uid() == self.uid {
            return true;
        }
        if located.marker > 0 {
            return false;
        }
        let inode_readable = match &self.proc_fds {
            Some(dir) => faccessat(dir, fd_name, AccessFlags::R_OK, AtFlags::AT_EACCESS),
            None => faccessat(
                nix::fcntl::AT_FDCWD,
                format!("/proc/self/fd/{fd_name}").as_str(),
                AccessFlags::R_OK,
                AtFlags::AT_EACCESS,
            ),
        }
        .is_ok();
        inode_readable && meta.nlink() > 0 && self.reaches(&located.path, meta)
    }

    /// The contents archived since the last call.
    pub fn take_archived(&mut self) -> Vec<ArchivedRead> {
        std::mem::take(&mut self.archived)
    }

    /// The whole content of a read file the archive keeps: at most
    /// `max_size` bytes (and what fits in one frame to the writer), at most `max_per_command` files, with a configured
    /// name or extension or starting with `#!`. Files that fail the
    /// name and size tests cost no system call. The `#!` test (a 2-byte
    /// read) is made only for files without an extension or with an execute
    /// bit: a script run as a program has one of these, while the bulk of
    /// what commands read (data.csv, main.c) has neither.
    fn archive(&mut self, file: &File, path: &[u8], meta: &std::fs::Metadata, mtime_ns: i64) -> Option<ArchivedRead> {
        let cfg = &self.settings.archive;
        let max_size = cfg.max_size.min(MAX_ARCHIVED_FILE);
        if !cfg.enabled || self.archived_count >= cfg.max_per_command || meta.size() > max_size {
            return None;
        }
        let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
        if !cfg.matches_name(name) {
            let may_be_program = extension(name).is_none() || meta.mode() & 0o111 != 0;
            if !cfg.shebang || !may_be_program || meta.size() < 2 {
                return None;
            }
            let mut magic = [0u8; 2];
            if file.read_exact_at(&mut magic, 0).is_err() || &magic != b"#!" {
                return None;
            }
        }
        let content = read_exactly(file, meta.size())?;
        self.archived_count += 1;
        Some(ArchivedRead { path: path.to_vec(), mode: meta.mode() & 0o7777, mtime_ns, content })
    }

    fn is_private(&self, path: &[u8]) -> bool {
        self.private_paths.iter().any(|d| prov_model::config::is_within(path, d))
    }
}

/// The file's content, if it has exactly `size` bytes now (a file that
/// changed size since fstat is not archived: its record describes another
/// content).
fn read_exactly(file: &File, size: u64) -> Option<Vec<u8>> {
    // One byte more than expected, to notice growth.
    let mut buf = vec![0u8; usize::try_from(size).ok()?.checked_add(1)?];
    let got = prov_model::hash::read_up_to(file, &mut buf).ok()?;
    (got as u64 == size).then(|| {
        buf.truncate(got);
        buf
    })
}

/// Bytes already read, for hashing them as the file they came from.
struct InMemory<'a>(&'a [u8]);

impl FileExt for InMemory<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(self.0.len());
        let n = buf.len().min(self.0.len() - start);
        buf[..n].copy_from_slice(&self.0[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, _: &[u8], _: u64) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prov_model::HashParams;

    #[test]
    fn content_in_memory_hashes_like_the_file() {
        let dir = std::env::temp_dir().join(format!("prov-resolve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for size in [0usize, 1, 767, 768, 769, 5000, 100_003] {
            let content: Vec<u8> = (0..size).map(|i| (i * 31 % 257) as u8).collect();
            let path = dir.join(format!("f{size}"));
            std::fs::write(&path, &content).unwrap();
            let file = File::open(&path).unwrap();
            let read = read_exactly(&file, size as u64).unwrap();
            assert_eq!(read, content);
            for params in [HashParams::default(), HashParams { chunk_size: 4096, chunks: 5 }] {
                assert_eq!(
                    partial_hash(&InMemory(&read), size as u64, params).unwrap(),
                    partial_hash(&file, size as u64, params).unwrap(),
                    "size {size}"
                );
            }
            // A file that is not the size fstat said is not archived.
            assert_eq!(read_exactly(&file, size as u64 + 1), None);
            if size > 0 {
                assert_eq!(read_exactly(&file, size as u64 - 1), None);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
