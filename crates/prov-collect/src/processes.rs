//! The command's process table: one record per program image, from the
//! kernel's FAN_OPEN_EXEC events (the executed file's descriptor and the
//! pid, for every exec, static binaries included) and, best effort,
//! /proc/PID/{cmdline,cwd,stat} read when the image is first seen.
//!
//! What /proc shows is taken only when it is provably the image the event
//! was about: /proc/PID/exe must be the executed file (or its script's
//! interpreter) and the process must have started before the event was
//! read (a pid reused since fails that). Otherwise the record keeps the
//! executable and says the arguments are unknown; nothing is guessed.
//! /proc/PID/exe is readable only for processes the collector's user may
//! inspect (ptrace read access), so another user's process (a setuid
//! program) never has its arguments or directory read.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;

use prov_model::ProcessRecord;

use crate::fanotify::{EventFile, RawEvent, FAN_OPEN_EXEC};

/// The (device, inode) of a file.
type FileId = (u64, u64);

/// Arguments longer than this are cut (the record says so in its unknown
/// reason only when nothing could be read at all).
const MAX_ARGS: u64 = 128 << 10;
/// A pending image is retried on a timer for this long after its event was
/// read (the exec may not have finished when the event is resolved); later
/// only the process's own events retry it.
const RETRY_FOR_NS: u64 = 300_000_000;
/// Looks at a just-exec'd process at once: this many times, this far apart.
const SPIN_TRIES: usize = 8;
/// Early looks kept at most (each is used by its event's turn, soon after).
const MAX_EARLY: usize = 4096;
const SPIN_PAUSE: std::time::Duration = std::time::Duration::from_micros(100);

pub const GONE: &str = "the process ended before its arguments could be read";
const REPLACED: &str = "the process ran another program before its arguments could be read";
const NOT_INSPECTABLE: &str = "the process may not be inspected by the user (another user's or a setuid program)";
const NEVER_READ: &str = "its arguments could not be matched to the executed file before the command ended";

/// Why a later exec event of the same pid belongs to the same exec.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Interpreter {
    /// A script's `#!` interpreter: /proc/PID/exe will show it.
    Script,
    /// An ELF's PT_INTERP (the dynamic loader): /proc/PID/exe stays the ELF.
    Loader,
}

struct Image {
    /// None once sent to the writer (the slot remains, so later events of
    /// the same exiting process do not look like a new one).
    record: Option<ProcessRecord>,
    /// What /proc/PID/exe must be before /proc is believed; None for a
    /// process seen first by a file event (any executable is its own).
    exe_id: Option<FileId>,
    /// Waiting for a script's interpreter before /proc can be checked.
    awaiting_script_interpreter: bool,
    /// The next exec event of this pid with this file is the same exec.
    interpreter_next: Option<(FileId, Interpreter)>,
    /// The arguments are still to be read.
    pending: bool,
    /// When the event that started the image was read (CLOCK_BOOTTIME).
    read_at_ns: u64,
    ended: bool,
    /// /proc refused to show the process when last looked at.
    refused: bool,
    /// When /proc was last asked whether the pid is another process's now.
    reuse_checked_ns: u64,
}

/// How often, at most, a file event of a pid whose image may be over has
/// /proc asked whether the pid is another process's now.
const REUSE_CHECK_EVERY_NS: u64 = 100_000_000;

impl Image {
    /// Whether the pid may belong to another process by now: the image
    /// ended (its executable was closed), or it never exec'd (a fork, whose
    /// end is not seen); asked at most every REUSE_CHECK_EVERY_NS.
    fn may_be_reused(&self, now_ns: u64) -> bool {
        (self.ended || self.exe_id.is_none()) && now_ns.saturating_sub(self.reuse_checked_ns) >= REUSE_CHECK_EVERY_NS
    }
}

pub struct ProcessTable {
    images: HashMap<u32, Image>,
    /// Pids whose image is pending.
    pending: Vec<u32>,
    /// Records final and not yet sent.
    done: Vec<ProcessRecord>,
    ns_per_tick: u64,
    /// What /proc showed of a process when its exec event was read from
    /// the queue, by pid: used when the event's turn comes (see `early_look`).
    early: HashMap<u32, Vec<(FileId, ProcRead)>>,
    /// The same for processes first seen by a file event (no exec).
    early_forks: HashMap<u32, ProcRead>,
}

impl Default for ProcessTable {
    fn default() -> Self {
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().filter(|&hz| hz > 0);
        let hz = hz.map_or(100, |hz| hz as u64);
        ProcessTable {
            images: HashMap::new(),
            pending: Vec::new(),
            done: Vec::new(),
            ns_per_tick: 1_000_000_000 / hz,
            early: HashMap::new(),
            early_forks: HashMap::new(),
        }
    }
}

/// An exec event as the resolver saw it.
pub struct ExecEvent<'a> {
    pub pid: u32,
    pub file: &'a File,
    pub id: FileId,
    /// The file's path when the user may see it.
    pub shown_path: Option<Vec<u8>>,
    pub read_at_ns: u64,
    /// The command's file events recorded before this one.
    pub events_before: u64,
    /// The executed file's size, mtime and hash, when its path is shown.
    pub exe_file: Option<prov_model::ExeFile>,
}

impl ProcessTable {
    /// A FAN_OPEN_EXEC event: a new image of `pid`, or the interpreter its
    /// exec is loading.
    pub fn exec(&mut self, ev: ExecEvent<'_>, ns_root: &OwnedFd) {
        // A look taken as a fork is not about this program.
        self.early_forks.remove(&ev.pid);
        if let Some(img) = self.images.get_mut(&ev.pid) {
            if let Some((expected, kind)) = img.interpreter_next {
                // Also after the image's end: an exec event and the close of
                // the same file by a process that was already gone when
                // they were read are merged into one by the kernel.
                if expected == ev.id {
                    if kind == Interpreter::Script {
                        img.exe_id = Some(ev.id);
                        img.awaiting_script_interpreter = false;
                    }
                    img.interpreter_next = interpreter_of(ev.file, ns_root);
                    self.read_soon(ev.pid);
                    return;
                }
            }
            self.finish(ev.pid, REPLACED);
        }
        let interpreter_next = interpreter_of(ev.file, ns_root);
        let is_script = matches!(interpreter_next, Some((_, Interpreter::Script)));
        let record = ProcessRecord {
            pid: ev.pid,
            ppid: None,
            exe: ev.shown_path.unwrap_or_default(),
            args: Vec::new(),
            cwd: Vec::new(),
            unknown: Some(GONE.into()),
            start_ns: now_ns(),
            end_ns: None,
            first_event: ev.events_before,
            exe_file: ev.exe_file,
        };
        self.images.insert(
            ev.pid,
            Image {
                record: Some(record),
                exe_id: Some(ev.id),
                awaiting_script_interpreter: is_script,
                interpreter_next,
                pending: true,
                read_at_ns: ev.read_at_ns,
                ended: false,
                refused: false,
                reuse_checked_ns: ev.read_at_ns,
            },
        );
        self.pending.push(ev.pid);
        self.read_soon(ev.pid);
    }

    /// Reads a just-exec'd process: its exec usually completes within a
    /// fraction of a millisecond of its event, and a short-lived process
    /// (a static binary that touches no file) may be gone when the timer
    /// comes back, so it is looked at a few times at once.
    fn read_soon(&mut self, pid: u32) {
        for _ in 0..SPIN_TRIES {
            self.try_read(pid);
            if !self.images.get(&pid).is_some_and(|img| img.pending && !img.awaiting_script_interpreter) {
                return;
            }
            std::thread::sleep(SPIN_PAUSE);
        }
    }

    /// An event just read from the queue: for an exec, /proc is looked at
    /// once now, before the events queued ahead of it are resolved, so a
    /// process that is quick to exit is still there while the collector
    /// catches up. Kept only when /proc shows the executed file.
    pub fn early_look(&mut self, ev: &RawEvent) {
        let EventFile::Open(fd) = &ev.file else { return };
        if ev.pid <= 0 {
            return;
        }
        if ev.mask & FAN_OPEN_EXEC == 0 {
            // A file event of a process not seen yet (a fork that did not
            // exec, such as a multiprocessing worker): looked at once, too.
            let pid = ev.pid as u32;
            // (A pid with an exec read in this batch is not a fork.)
            let known = self.images.contains_key(&pid) || self.early.contains_key(&pid);
            if !known && !self.early_forks.contains_key(&pid) {
                if let read @ ProcRead::Read { .. } = read_proc(pid, None, ev.read_at_ns, self.ns_per_tick) {
                    if self.early_forks.len() >= MAX_EARLY {
                        self.early_forks.clear();
                    }
                    self.early_forks.insert(pid, read);
                }
            }
            return;
        }
        let Ok(st) = nix::sys::stat::fstat(fd.as_fd()) else { return };
        let id = (st.st_dev, st.st_ino);
        let pid = ev.pid as u32;
        if let read @ ProcRead::Read { .. } = read_proc(pid, Some(id), ev.read_at_ns, self.ns_per_tick) {
            if self.early.len() >= MAX_EARLY {
                self.early.clear();
            }
            self.early.entry(pid).or_default().push((id, read));
        }
    }

    /// A file event of `pid` was recorded: a process not seen yet (one that
    /// never exec'd inside the command, such as a forked shell) gets its
    /// image now; a pending one is retried (its exec is surely complete).
    pub fn saw(&mut self, pid: u32, read_at_ns: u64, events_before: u64) {
        let ns_per_tick = self.ns_per_tick;
        match self.images.get_mut(&pid) {
            Some(img) if img.pending => self.try_read(pid),
            Some(img) if !img.may_be_reused(read_at_ns) => {}
            // The pid of a process that exited (or of a fork, whose end is
            // not seen) may be another process's now: a new image when
            // /proc shows a process started after the old one was seen.
            Some(img) => {
                img.reuse_checked_ns = read_at_ns;
                let started_after = Stat::read(&format!("/proc/{pid}"))
                    .is_some_and(|st| st.start_ticks.saturating_mul(ns_per_tick) > img.read_at_ns);
                if started_after {
                    self.finish(pid, GONE);
                    self.images.remove(&pid);
                    self.saw(pid, read_at_ns, events_before);
                }
            }
            None => {
                let record = ProcessRecord {
                    pid,
                    ppid: None,
                    exe: Vec::new(),
                    args: Vec::new(),
                    cwd: Vec::new(),
                    unknown: Some(GONE.into()),
                    start_ns: now_ns(),
                    end_ns: None,
                    first_event: events_before,
                    exe_file: None,
                };
                self.images.insert(
                    pid,
                    Image {
                        record: Some(record),
                        exe_id: None,
                        awaiting_script_interpreter: false,
                        interpreter_next: None,
                        pending: true,
                        read_at_ns,
                        ended: false,
                        refused: false,
                        reuse_checked_ns: read_at_ns,
                    },
                );
                self.pending.push(pid);
                self.try_read(pid);
            }
        }
    }

    /// A file closed by `pid` without writing: when it is the image's
    /// executable, the image has ended (exit, or the next exec).
    pub fn closed(&mut self, pid: u32, id: FileId) {
        let Some(img) = self.images.get_mut(&pid) else { return };
        if img.ended || img.exe_id != Some(id) || img.awaiting_script_interpreter {
            return;
        }
        img.ended = true;
        if let Some(r) = img.record.as_mut() {
            r.end_ns = Some(now_ns());
        }
        if img.pending {
            self.try_read(pid);
        }
        self.finish(pid, GONE);
    }

    /// Retries the pending images whose events are recent: the timer's turn.
    pub fn retry_pending(&mut self) {
        let now = crate::fanotify::boot_time_ns();
        let pids: Vec<u32> = self.pending.clone();
        for pid in pids {
            if self.images.get(&pid).is_some_and(|img| now.saturating_sub(img.read_at_ns) < RETRY_FOR_NS) {
                self.try_read(pid);
            }
        }
    }

    /// Whether a timer should retry pending images soon.
    pub fn wants_retry(&self) -> bool {
        let now = crate::fanotify::boot_time_ns();
        self.pending
            .iter()
            .any(|pid| self.images.get(pid).is_some_and(|img| now.saturating_sub(img.read_at_ns) < RETRY_FOR_NS))
    }

    /// The records that are final, to be sent with the next batch.
    pub fn take_done(&mut self) -> Vec<ProcessRecord> {
        std::mem::take(&mut self.done)
    }

    /// Every record not sent yet: the command is over.
    pub fn take_all(&mut self) -> Vec<ProcessRecord> {
        let pids: Vec<u32> = self.images.keys().copied().collect();
        for pid in pids {
            if self.images.get(&pid).is_some_and(|img| img.pending) {
                self.try_read(pid);
            }
            self.finish(pid, NEVER_READ);
        }
        self.pending.clear();
        self.take_done()
    }

    /// Moves the image's record, if not sent, to `done`; still pending, it
    /// is kept with its arguments unknown, for `why`.
    fn finish(&mut self, pid: u32, why: &str) {
        let Some(img) = self.images.get_mut(&pid) else { return };
        let Some(mut record) = img.record.take() else { return };
        if img.pending {
            img.pending = false;
            record.unknown = Some(if img.refused { NOT_INSPECTABLE } else { why }.into());
            self.pending.retain(|&p| p != pid);
        }
        if record.end_ns.is_none() && why == REPLACED {
            record.end_ns = Some(now_ns());
        }
        self.done.push(record);
    }

    /// Reads /proc for `pid`'s pending image if it shows that image.
    fn try_read(&mut self, pid: u32) {
        let ns_per_tick = self.ns_per_tick;
        let Some(img) = self.images.get_mut(&pid) else { return };
        if !img.pending || img.awaiting_script_interpreter {
            return;
        }
        let early = match img.exe_id {
            Some(id) => take_early(&mut self.early, pid, id),
            None => self.early_forks.remove(&pid),
        };
        let read = match early {
            Some(read) => read,
            None => read_proc(pid, img.exe_id, img.read_at_ns, ns_per_tick),
        };
        let keep_ppid = |img: &mut Image, ppid: Option<u32>| {
            if let (Some(r), Some(ppid)) = (img.record.as_mut(), ppid) {
                r.ppid.get_or_insert(ppid);
            }
        };
        match read {
            ProcRead::NotYet { ppid } => return keep_ppid(img, ppid),
            ProcRead::Refused { ppid } => {
                img.refused = true;
                return keep_ppid(img, ppid);
            }
            ProcRead::Unknown(why, ppid) => {
                keep_ppid(img, ppid);
                if let Some(r) = img.record.as_mut() {
                    r.unknown = Some(why.into());
                }
            }
            ProcRead::Read { ppid, args, cwd, exe } => {
                if let Some(r) = img.record.as_mut() {
                    r.ppid = ppid;
                    r.args = args;
                    r.cwd = cwd;
                    r.unknown = None;
                    if r.exe.is_empty() && img.exe_id.is_none() {
                        r.exe = exe;
                    }
                }
            }
        }
        img.pending = false;
        self.pending.retain(|&p| p != pid);
    }
}

/// Takes secrets out of a record's arguments. The redactor's patterns need
/// their context (`mysql … -pSECRET`), so they run over the arguments joined
/// by spaces, as a command line; only when that finds something is each
/// argument redacted after the ones before it (its part of the redacted
/// line; the whole argument when a match crossed into it).
pub fn redact_args(record: &mut ProcessRecord, redactor: &prov_model::redact::Redactor) {
    let Some(args) = record.argv() else { return };
    let line = args.join(&b' ');
    if redactor.redact(&line) == line {
        return;
    }
    let mut out = Vec::with_capacity(record.args.len());
    let mut prefix: Vec<u8> = Vec::new();
    for arg in &args {
        let before = redactor.redact(&prefix);
        let mut with_arg = prefix.clone();
        with_arg.extend_from_slice(arg);
        let redacted = redactor.redact(&with_arg);
        match redacted.strip_prefix(before.as_slice()) {
            Some(own) => out.extend_from_slice(own),
            None => out.extend_from_slice(b"[REDACTED]"),
        }
        out.push(0);
        prefix = with_arg;
        prefix.push(b' ');
    }
    record.args = out;
}

/// What `early_look` kept for this pid and executable, taken.
fn take_early(early: &mut HashMap<u32, Vec<(FileId, ProcRead)>>, pid: u32, id: FileId) -> Option<ProcRead> {
    let list = early.get_mut(&pid)?;
    let i = list.iter().position(|(seen, _)| *seen == id)?;
    let (_, read) = list.swap_remove(i);
    if list.is_empty() {
        early.remove(&pid);
    }
    Some(read)
}

enum ProcRead {
    /// /proc does not show the image yet (its exec is still under way).
    NotYet {
        ppid: Option<u32>,
    },
    /// The user may not inspect the process: final for another user's
    /// process, passing for one in the middle of its exec from a
    /// non-dumpable one (prov's setuid helper starts the command).
    Refused {
        ppid: Option<u32>,
    },
    /// The parent is kept when /proc/PID/stat could still be read (a zombie).
    Unknown(&'static str, Option<u32>),
    Read {
        ppid: Option<u32>,
        args: Vec<u8>,
        cwd: Vec<u8>,
        exe: Vec<u8>,
    },
}

/// What /proc says of `pid`, if it is provably the image expected.
///
/// Everything is read through one descriptor of `/proc/PID`: it stays the
/// process it was opened for (once that process is reaped, reads through it
/// fail, whoever has the number by then), so one look at its start time
/// tells a reused pid, and each file is one lookup, not a walk from /proc.
fn read_proc(pid: u32, exe_id: Option<FileId>, read_at_ns: u64, ns_per_tick: u64) -> ProcRead {
    use nix::fcntl::{open, readlinkat, OFlag};
    use nix::sys::stat::{fstatat, Mode};
    let Ok(dir) =
        open(format!("/proc/{pid}").as_str(), OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
    else {
        return ProcRead::Unknown(GONE, None);
    };
    let Some(stat) = Stat::read_at(&dir) else { return ProcRead::Unknown(GONE, None) };
    // Started after the event was read: another process with a reused pid.
    if stat.start_ticks.saturating_mul(ns_per_tick) > read_at_ns {
        return ProcRead::Unknown(GONE, None);
    }
    let ppid = stat.ppid;
    let exe_of = || fstatat(&dir, "exe", nix::fcntl::AtFlags::empty()).map(|m| (m.st_dev, m.st_ino));
    let exe_now = match exe_of() {
        Ok(id) => id,
        Err(nix::errno::Errno::EACCES | nix::errno::Errno::EPERM) => return ProcRead::Refused { ppid },
        Err(_) => return ProcRead::Unknown(GONE, ppid),
    };
    if exe_id.is_some_and(|id| id != exe_now) {
        return ProcRead::NotYet { ppid };
    }
    let Some(args) = read_capped_at(&dir, "cmdline", MAX_ARGS) else { return ProcRead::Unknown(GONE, ppid) };
    let link = |name: &str| readlinkat(&dir, name).map(std::os::unix::ffi::OsStringExt::into_vec).unwrap_or_default();
    let cwd = link("cwd");
    let exe = link("exe");
    // Still the same program after the reads (the descriptor keeps the
    // process the same).
    if exe_of() != Ok(exe_now) {
        return ProcRead::Unknown(REPLACED, ppid);
    }
    // A zombie's cmdline is empty: nothing is known then. A live process
    // shows empty arguments for a moment during its exec, after its
    // executable changed (execve gives every program at least an empty
    // argv[0], so a complete exec never shows none).
    if args.is_empty() {
        return if stat.zombie { ProcRead::Unknown(GONE, ppid) } else { ProcRead::NotYet { ppid } };
    }
    let cwd = if cwd.starts_with(b"/") { cwd } else { Vec::new() };
    ProcRead::Read { ppid, args, cwd, exe }
}

struct Stat {
    ppid: Option<u32>,
    start_ticks: u64,
    zombie: bool,
}

impl Stat {
    /// /proc/PID/stat's state, ppid and start time (fields 3, 4 and 22);
    /// the command name before them is in parentheses and may hold anything.
    fn read(dir: &str) -> Option<Stat> {
        Stat::parse(&std::fs::read(format!("{dir}/stat")).ok()?)
    }

    /// The same, through a descriptor of the process's /proc directory.
    fn read_at(dir: &OwnedFd) -> Option<Stat> {
        Stat::parse(&read_capped_at(dir, "stat", 4096)?)
    }

    fn parse(text: &[u8]) -> Option<Stat> {
        let close = text.iter().rposition(|&b| b == b')')?;
        let rest = std::str::from_utf8(&text[close + 1..]).ok()?;
        let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
        // fields[0] is field 3 (state).
        Some(Stat {
            zombie: fields.first().is_some_and(|s| *s == "Z" || *s == "X"),
            ppid: fields.get(1)?.parse().ok().filter(|&p: &u32| p > 0),
            start_ticks: fields.get(19)?.parse().ok()?,
        })
    }
}

/// At most `max` bytes of the file `name` in the directory `dir`.
fn read_capped_at(dir: &OwnedFd, name: &str, max: u64) -> Option<Vec<u8>> {
    use nix::fcntl::{openat, OFlag};
    use std::io::Read;
    let fd = openat(dir, name, OFlag::O_RDONLY | OFlag::O_CLOEXEC, nix::sys::stat::Mode::empty()).ok()?;
    let mut out = Vec::new();
    File::from(fd).take(max).read_to_end(&mut out).ok()?;
    Some(out)
}

/// The interpreter the kernel opens next for this executable, if any: a
/// script's `#!` program or an ELF's PT_INTERP, found in the command's
/// namespace (the file's identity, through an O_PATH open: no event).
fn interpreter_of(file: &File, ns_root: &OwnedFd) -> Option<(FileId, Interpreter)> {
    let mut head = [0u8; 256];
    let n = prov_model::hash::read_up_to(file, &mut head).ok()?;
    let head = &head[..n];
    let (path, kind) = if let Some(line) = head.strip_prefix(b"#!") {
        let line = line.split(|&b| b == b'\n').next()?;
        let path = line.split(|&b| b == b' ' || b == b'\t').find(|w| !w.is_empty())?.to_vec();
        (path, Interpreter::Script)
    } else {
        (elf_interpreter(file, head)?, Interpreter::Loader)
    };
    if !path.starts_with(b"/") {
        return None;
    }
    Some((identity_in(ns_root, &path)?, kind))
}

/// An ELF's PT_INTERP path (little-endian ELF32/ELF64).
fn elf_interpreter(file: &File, head: &[u8]) -> Option<Vec<u8>> {
    if head.len() < 64 || &head[..4] != b"\x7fELF" || head[5] != 1 {
        return None;
    }
    let u16_at =
        |b: &[u8], o: usize| -> Option<u64> { Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?).into()) };
    let u32_at =
        |b: &[u8], o: usize| -> Option<u64> { Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?).into()) };
    let u64_at = |b: &[u8], o: usize| -> Option<u64> { Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?)) };
    let wide = match head[4] {
        1 => false,
        2 => true,
        _ => return None,
    };
    let (phoff, phentsize, phnum) = if wide {
        (u64_at(head, 0x20)?, u16_at(head, 0x36)?, u16_at(head, 0x38)?)
    } else {
        (u32_at(head, 0x1c)?, u16_at(head, 0x2a)?, u16_at(head, 0x2c)?)
    };
    if phnum > 128 || phentsize < if wide { 56 } else { 32 } {
        return None;
    }
    let mut table = vec![0u8; usize::try_from(phentsize * phnum).ok()?];
    file.read_exact_at(&mut table, phoff).ok()?;
    for entry in table.chunks_exact(usize::try_from(phentsize).ok()?) {
        const PT_INTERP: u64 = 3;
        if u32_at(entry, 0)? != PT_INTERP {
            continue;
        }
        let (offset, size) =
            if wide { (u64_at(entry, 8)?, u64_at(entry, 32)?) } else { (u32_at(entry, 4)?, u32_at(entry, 16)?) };
        if size == 0 || size > 4096 {
            return None;
        }
        let mut path = vec![0u8; usize::try_from(size).ok()?];
        file.read_exact_at(&mut path, offset).ok()?;
        let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
        path.truncate(end);
        return Some(path);
    }
    None
}

/// The identity of `path` inside the namespace whose root is `root`.
fn identity_in(root: &OwnedFd, path: &[u8]) -> Option<FileId> {
    use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
    use std::os::unix::ffi::OsStrExt;
    let how = OpenHow::new().flags(OFlag::O_PATH | OFlag::O_CLOEXEC).resolve(ResolveFlag::RESOLVE_IN_ROOT);
    let fd = openat2(root.as_fd(), std::ffi::OsStr::from_bytes(path), how).ok()?;
    let st = nix::sys::stat::fstat(fd).ok()?;
    Some((st.st_dev, st.st_ino))
}

fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn finds_the_loader_of_a_dynamic_program_and_none_of_a_script_body() {
        let file = File::open("/bin/sh").unwrap();
        let mut head = [0u8; 256];
        let n = prov_model::hash::read_up_to(&file, &mut head).unwrap();
        let interp = elf_interpreter(&file, &head[..n]).expect("/bin/sh is dynamically linked");
        assert!(interp.starts_with(b"/lib"), "{}", String::from_utf8_lossy(&interp));
        assert_eq!(elf_interpreter(&file, b"#!/bin/sh\n"), None);
    }

    #[test]
    fn arguments_are_redacted_in_their_context() {
        let redactor = prov_model::redact::Redactor::new(&Default::default());
        let mut r = ProcessRecord {
            pid: 1,
            ppid: None,
            exe: b"/usr/bin/mysql".to_vec(),
            args: b"mysql\0-u\0root\0-pHunter2Secret\0".to_vec(),
            cwd: Vec::new(),
            unknown: None,
            start_ns: 0,
            end_ns: None,
            first_event: 0,
            exe_file: None,
        };
        redact_args(&mut r, &redactor);
        let args = r.argv().unwrap();
        assert_eq!(args.len(), 4);
        assert!(!r.args.windows(13).any(|w| w == b"Hunter2Secret"), "{:?}", String::from_utf8_lossy(&r.args));
        assert_eq!(args[..3], [b"mysql".as_slice(), b"-u", b"root"]);
        assert_eq!(args[3], b"-p[REDACTED]");
        // Nothing to take out: the arguments stay as they are.
        let before = r.args.clone();
        redact_args(&mut r, &redactor);
        assert_eq!(r.args, before);
    }

    #[test]
    fn a_pid_seen_again_after_its_process_is_a_new_image_only_if_another_process_has_it() {
        let me = std::process::id();
        let now = crate::fanotify::boot_time_ns();
        let mut table = ProcessTable::default();
        table.saw(me, now, 0);
        assert!(table.images[&me].record.as_ref().unwrap().unknown.is_none(), "own process read");
        // Soon after, or the same process: the same image.
        table.saw(me, now + 1, 1);
        table.saw(me, now + REUSE_CHECK_EVERY_NS, 2);
        assert!(table.take_done().is_empty());
        // As if the image had been seen before this process started: the
        // pid is another process's now.
        table.images.get_mut(&me).unwrap().read_at_ns = 0;
        table.saw(me, now + 2 * REUSE_CHECK_EVERY_NS, 3);
        let done = table.take_done();
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].first_event, 0);
        assert_eq!(table.images[&me].record.as_ref().unwrap().first_event, 3);
    }

    #[test]
    fn reads_its_own_process() {
        let me = std::process::id();
        let exe = std::fs::metadata("/proc/self/exe").unwrap();
        let table = ProcessTable::default();
        match read_proc(me, Some((exe.dev(), exe.ino())), crate::fanotify::boot_time_ns(), table.ns_per_tick) {
            ProcRead::Read { args, ppid, cwd, .. } => {
                assert!(!args.is_empty() && args.ends_with(b"\0"));
                assert!(ppid.is_some());
                assert!(cwd.starts_with(b"/"));
            }
            _ => panic!("own process not read"),
        }
        // An event read before this process started is not about it.
        assert!(matches!(read_proc(me, None, 0, table.ns_per_tick), ProcRead::Unknown(GONE, None)));
        // Another executable: not yet the image expected.
        assert!(matches!(
            read_proc(me, Some((0, 1)), crate::fanotify::boot_time_ns(), table.ns_per_tick),
            ProcRead::NotYet { ppid: Some(_) }
        ));
    }
}
