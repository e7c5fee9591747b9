//! `prov run`'s preparer: a process of the user's (one per host, mount
//! namespace and helper) that keeps an observation ready — helper, holder,
//! collector and writer already started — so that `prov run` only has to
//! take it: three program starts off each command's path. `prov run` starts
//! it when none answers (and runs that one command the direct way); it
//! lingers `PROV_RUN_LINGER` seconds after its last request and after the
//! last collector it handed out has ended, then exits (ssh's ControlPersist
//! does the same for connections).
//!
//! The ready observation knows neither settings nor record: `prov run`
//! sends both (`observe::prepare`), so the writer opens the database only
//! for a command, and an edited configuration applies at once. Its socket
//! is in a directory only the user can enter, and each side checks the
//! other's uid. A preparer serves only callers in its own context (mount
//! namespace, root, cgroup, ids, groups, umask: `Context`): its collector
//! runs with those, so it must have the caller's. The context, the boot,
//! and the prov build are in the socket's name, so each context gets a
//! preparer of its own and an upgraded prov never talks to an old one. A
//! ready observation is discarded when the mount table changes: its
//! namespace is a copy made when it was prepared.
//!
//! A collector whose command left its namespace clean offers itself for
//! another record (see prov-collect's `collector`): `prov run` then hands
//! the observation back on its connection (`give_back`) and the preparer
//! puts it among the ready ones, unless the mount table changed meanwhile.
//! Back-to-back runs are then served by one collector, and pay no program
//! start at all. A `prov run` whose command has ended hands the rest of its
//! record to us on the same connection and returns (`run::handover`): we
//! wait for `Stored`, take the observation back, remove the start file.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    accept4, bind, connect, getsockopt, listen, socket, sockopt, AddressFamily, Backlog, SockFlag, SockType, UnixAddr,
};
use prov_protocol::ipc;
use prov_protocol::run_preparer::{self as wire, FromPreparer, ToPreparer};

use super::handover::{next_deadline, Finishing, Heard};
use crate::observe::{self, CollectorProcess, Observation};

/// How long an idle preparer stays, unless `PROV_RUN_LINGER` (seconds) says
/// otherwise; 0 turns the preparer off.
const LINGER: Duration = Duration::from_secs(30);
/// How long `prov run` waits for the preparer's answer (a stopped or
/// starved preparer): after that it prepares its own observation.
const ANSWER_WAIT: Duration = Duration::from_millis(500);
/// How long runs go the direct way without asking, once one found the
/// preparer not answering (unless it answers someone meanwhile).
const UNRESPONSIVE_SKIP: Duration = Duration::from_secs(10);
/// Observations kept ready: one, two once a request found none (runs in
/// parallel, or faster than one can be prepared).
const MAX_READY: usize = 2;

/// How long a request that finds no observation ready waits for the
/// collectors of records being finished (run::handover) to answer, so that
/// one comes back: back-to-back runs then take it instead of starting an
/// observation of their own (three program starts, ~5 ms here). Its
/// collector stores the end once the run that handed it over has exited,
/// as the next run starts.
const BACK_SOON_WAIT: Duration = Duration::from_millis(5);

/// The longest `PROV_RUN_LINGER` taken: a day.
const LINGER_MAX: Duration = Duration::from_secs(86_400);

/// `PROV_RUN_LINGER`, or the default; Err with the warning for a value
/// that is no number of seconds in range.
fn linger_setting() -> Result<Duration, String> {
    prov_model::setting::seconds_from_env("PROV_RUN_LINGER", LINGER, LINGER_MAX)
}

fn linger() -> Duration {
    linger_setting().unwrap_or(LINGER)
}

/// Why no observation was taken from the preparer.
pub enum NotTaken {
    /// None listens at our place (or a dead one's socket is left there):
    /// the caller starts one (`start_preparer`) once it knows tracing can
    /// work here, for the next `prov run`.
    Absent,
    /// Off, not for us here, not answering, or none ready.
    Other,
}

/// A request sent to the preparer, its answer not yet read: the preparer
/// reads our context and picks an observation while we do our own work.
pub struct Asked {
    sock: OwnedFd,
    place: Place,
    helper: PathBuf,
}

/// Asks the preparer for a ready observation (`Asked::receive` takes it).
pub fn ask(helper: &Path) -> Result<Asked, NotTaken> {
    // Said here, in `prov run`: the preparer has no terminal.
    let linger = linger_setting().unwrap_or_else(|warning| {
        eprintln!("prov: warning: {warning}");
        LINGER
    });
    if linger.is_zero() || inside_observation() {
        return Err(NotTaken::Other);
    }
    let place = Place::of(helper).ok_or(NotTaken::Other)?;
    if place.found_unresponsive() {
        return Err(NotTaken::Other);
    }
    // Non-blocking: a stopped preparer (SIGSTOP, a frozen cgroup, a
    // suspended job) with a full listen queue would hold a blocking
    // connect until it is resumed.
    let flags = SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK;
    let sock = socket(AddressFamily::Unix, SockType::SeqPacket, flags, None).map_err(|_| NotTaken::Other)?;
    match connect(sock.as_raw_fd(), &place.address().map_err(|_| NotTaken::Other)?) {
        Ok(()) => {}
        // Its queue is full: it lives but does not accept.
        Err(nix::errno::Errno::EAGAIN) => return Err(NotTaken::Other),
        Err(_) => return Err(NotTaken::Absent),
    }
    // Our directory; a process of another user there would be no preparer.
    let peer = getsockopt(&sock, sockopt::PeerCredentials).map_err(|_| NotTaken::Other)?;
    if peer.uid() != nix::unistd::geteuid().as_raw() {
        return Err(NotTaken::Other);
    }
    Ok(Asked { sock, place, helper: helper.to_path_buf() })
}

impl Asked {
    /// The preparer's answer: a ready observation, or none.
    pub fn receive(self) -> Result<Observation, NotTaken> {
        let Asked { sock, place, helper } = self;
        if !ipc::readable_within(sock.as_fd(), ANSWER_WAIT) {
            place.mark_unresponsive();
            return Err(NotTaken::Other);
        }
        let answer = ipc::recv(sock.as_fd()).ok().flatten().and_then(|(msg, fds)| ready_observation(&msg, fds));
        let (ctl, ns_root, tracker, holder_pid, collector_pid) = answer.ok_or(NotTaken::Other)?;
        let collector = CollectorProcess::Pooled(sock);
        Ok(Observation { helper, ctl, holder_pid, ns_root, tracker: Some(tracker), collector, collector_pid })
    }
}

/// The parts of a `Ready` answer: control socket, namespace root,
/// tracker, holder and collector pids.
fn ready_observation(msg: &[u8], mut fds: Vec<OwnedFd>) -> Option<(OwnedFd, OwnedFd, OwnedFd, i32, u32)> {
    let (FromPreparer::Ready, body) = FromPreparer::read(msg)? else { return None };
    if fds.len() != 3 {
        return None;
    }
    let (holder_pid, collector_pid) = wire::read_ready(body)?;
    let tracker = fds.pop()?;
    let ns_root = fds.pop()?;
    let ctl = fds.pop()?;
    Some((ctl, ns_root, tracker, holder_pid, collector_pid))
}

/// Whether the collector of an observation has closed its control socket
/// (it sends nothing before `Begun`, so a hang-up is all there is to see),
/// or it or its holder has exited: a copy of the socket elsewhere would
/// hide the hang-up (seen once in a full run: a collector killed while it
/// waited was handed out, and its command ran untraced).
pub fn hung_up(obs: &Observation) -> bool {
    let mut fds = [PollFd::new(obs.ctl.as_fd(), PollFlags::empty())];
    let closed = matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0);
    let exited = |pid: i32| prov_protocol::fds::pidfd_open(pid).map_or(true, |pidfd| !process_lives(&pidfd));
    closed || exited(obs.collector_pid as i32) || exited(obs.holder_pid)
}

/// Whether this process is itself a command of an observation (`prov run`
/// typed in a traced shell, or run by another `prov run`): it holds that
/// observation's tracker, a socket whose other end is a collector. A
/// preparer started here would live on in that observation's namespace and
/// keep its record open (and have its own work recorded there).
fn inside_observation() -> bool {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else { return false };
    fds.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<std::os::fd::RawFd>().ok())
        .filter(|&fd| fd > 2)
        .filter_map(crate::spawn::socket_peer_pid)
        .any(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == "prov-collector"))
}

/// Hands an observation whose collector offered to serve another record
/// back to the preparer it came from, on the connection it came on. One
/// non-blocking send, never waited on: if it fails, our copies close when
/// we exit and the collector ends.
pub fn give_back(conn: &OwnedFd, obs: &Observation, tracker: OwnedFd) {
    let fds = [obs.ctl.as_raw_fd(), obs.ns_root.as_raw_fd(), tracker.as_raw_fd()];
    let _ = ipc::send(conn.as_fd(), &[ToPreparer::Again as u8], &fds);
}

/// How the collector of a taken observation ended, as the preparer (its
/// parent) saw it; waited for at most a second.
pub fn fate(conn: &OwnedFd) -> Option<String> {
    if !ipc::readable_within(conn.as_fd(), Duration::from_secs(1)) {
        return None;
    }
    let (msg, _) = ipc::recv(conn.as_fd()).ok()??;
    match FromPreparer::read(&msg)? {
        (FromPreparer::Fate, fate) => Some(String::from_utf8_lossy(fate).into_owned()),
        _ => None,
    }
}

/// Starts `prov __run-preparer` in a session of its own, holding none of
/// our descriptors (a caller reading our output until its end must not wait
/// for the preparer). Not waited for: it outlives us.
pub fn start_preparer() {
    let Ok(prov) = std::env::current_exe() else { return };
    let mut cmd = Command::new(prov);
    cmd.arg("__run-preparer").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).current_dir("/");
    crate::spawn::close_fds_from_3(&mut cmd);
    crate::spawn::new_session(&mut cmd);
    let _ = cmd.spawn();
}

/// Where the preparer of this host, mount namespace, user and helper
/// listens: `$XDG_RUNTIME_DIR/prov` when there is one of ours, else the
/// state directory; the name is a hash of the rest.
struct Place {
    /// Open, so the address stays short however deep the directory is.
    dir: OwnedFd,
    name: String,
}

impl Place {
    fn of(helper: &Path) -> Option<Place> {
        let runtime = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|d| d.is_absolute() && own_private_dir(d))
            .map(|d| d.join("prov"));
        let dir = match runtime {
            Some(d) => d,
            None => prov_model::paths::Locations::from_env().ok()?.state_dir,
        };
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).ok()?;
        if !own_private_dir(&dir) {
            return None;
        }
        // The boot as well as the host name: hosts of one name may share
        // an NFS home. The builds of prov and of the helper, so an upgrade
        // gets a new preparer.
        let boot = prov_model::observer::boot_id_bytes().unwrap_or_default();
        let key = [
            wire::SOCKET_NAME.as_bytes(),
            b" ",
            prov_protocol::VERSION.to_string().as_bytes(),
            b"\0",
            crate::setup::host_name().as_bytes(),
            b"\0",
            boot,
            b"\0",
            nix::unistd::geteuid().as_raw().to_string().as_bytes(),
            b"\0",
            // bin/prov, also in the full build it hands the preparer to.
            &file_identity(&crate::setup::user_prov().ok()?)?,
            b"\0",
            helper.as_os_str().as_bytes(),
            b"\0",
            &file_identity(helper)?,
            b"\0",
            &Context::own_key()?,
        ]
        .concat();
        let name = format!("run-{:016x}", xxhash_rust::xxh3::xxh3_64(&key));
        let dir = nix::fcntl::open(
            &dir,
            nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok()?;
        Some(Place { dir, name })
    }

    /// Through /proc/self/fd: a socket address holds at most 107 bytes.
    fn path(&self, suffix: &str) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}/{}{suffix}", self.dir.as_raw_fd(), self.name))
    }

    fn address(&self) -> nix::Result<UnixAddr> {
        UnixAddr::new(&self.path(".sock"))
    }

    /// Whether a run found the preparer not answering less than
    /// `UNRESPONSIVE_SKIP` ago (a `.stuck` file's mtime): a loop of runs
    /// against a stopped preparer then pays the answer wait once in a
    /// while, not each time. One `stat` when there is none.
    fn found_unresponsive(&self) -> bool {
        std::fs::symlink_metadata(self.path(".stuck"))
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age < UNRESPONSIVE_SKIP))
    }

    fn mark_unresponsive(&self) {
        let _ = std::fs::remove_file(self.path(".stuck"));
        let _ = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(self.path(".stuck"));
    }
}

/// A file's device, inode and modification time.
fn file_identity(path: &Path) -> Option<Vec<u8>> {
    let m = std::fs::metadata(path).ok()?;
    Some(format!("{} {} {}.{}", m.dev(), m.ino(), m.mtime(), m.mtime_nsec()).into_bytes())
}

/// What a process's collector inherits and must share with the process it
/// watches: mount namespace and root (what it sees), cgroup (whose end
/// kills it, what it is charged to), ids, groups and umask (the permission
/// re-check is done as the user, and the writer creates files); and
/// no_new_privs, which keeps the setuid join helper from working: a
/// caller served by a preparer skips the helper checks the preparer made
/// (`setup::tracing_unavailable`), so it must be a caller they hold for.
#[derive(PartialEq, Eq)]
struct Context(Vec<u8>);

impl Context {
    /// Of `pid` ("self" for ours); None when it cannot all be read.
    fn of(pid: &str) -> Option<Context> {
        let proc = PathBuf::from(format!("/proc/{pid}"));
        let root = std::fs::metadata(proc.join("root")).ok()?;
        let mut ids = format!("\0{} {}\0", root.dev(), root.ino()).into_bytes();
        let status = std::fs::read_to_string(proc.join("status")).ok()?;
        for line in status.lines() {
            if ["Uid:", "Gid:", "Groups:", "Umask:", "NoNewPrivs:"].iter().any(|f| line.starts_with(f)) {
                ids.extend_from_slice(line.as_bytes());
                ids.push(b'\n');
            }
        }
        Self::around(&proc, &ids).map(Context)
    }

    /// Our own context for the socket's name, from system calls where
    /// there are some: /proc/self/status and /proc/self/root were a tenth
    /// of `prov run`'s CPU. The same parts as `of`, in another form, so
    /// only as a name: the preparer still compares each caller's `of` with
    /// its own.
    fn own_key() -> Option<Vec<u8>> {
        use nix::unistd::{getgroups, getresgid, getresuid};
        let root = std::fs::metadata("/").ok()?;
        let (uid, gid) = (getresuid().ok()?, getresgid().ok()?);
        let groups: Vec<u32> = getgroups().ok()?.into_iter().map(|g| g.as_raw()).collect();
        // No call reads the umask without setting it: set and put back (no
        // other thread of ours creates files this early).
        let umask = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
        nix::sys::stat::umask(umask);
        let no_new_privs = nix::sys::prctl::get_no_new_privs().ok()?;
        let ids = format!(
            "\0{} {}\0{:?} {:?} {:?} {:?} {:?} {:?}\0{groups:?}\0{:o} {no_new_privs}\0",
            root.dev(),
            root.ino(),
            uid.real,
            uid.effective,
            uid.saved,
            gid.real,
            gid.effective,
            gid.saved,
            umask.bits()
        );
        Self::around(Path::new("/proc/self"), ids.as_bytes())
    }

    /// The parts only /proc has, around `ids` (root, ids, groups, umask,
    /// no_new_privs, in whichever form): the mount namespace, the cgroup,
    /// and the security label (an AppArmor profile, an SELinux context): a
    /// run confined so that it cannot trace must not be handed an
    /// observation prepared outside that confinement (the AppArmor check in
    /// the kernel guest caught it). No label without an LSM that has one.
    fn around(proc: &Path, ids: &[u8]) -> Option<Vec<u8>> {
        let mut out = std::fs::read_link(proc.join("ns/mnt")).ok()?.into_os_string().into_vec();
        out.extend_from_slice(ids);
        out.extend_from_slice(&std::fs::read(proc.join("cgroup")).ok()?);
        out.extend_from_slice(&std::fs::read(proc.join("attr/current")).unwrap_or_default());
        Some(out)
    }
}

/// A directory of ours that nobody else can write to.
fn own_private_dir(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir)
        .is_ok_and(|m| m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw() && m.mode() & 0o022 == 0)
}

/// An observation the preparer keeps ready: what `prov run` gets, and the
/// collector, our child.
struct Ready {
    ctl: OwnedFd,
    ns_root: OwnedFd,
    tracker: OwnedFd,
    holder_pid: i32,
    collector: Child,
    /// `Pool::generation` when it was prepared.
    generation: u64,
}

/// A collector handed out and not yet ended: reaped when its pidfd says it
/// has exited, and how it ended sent to its caller; or handed back by its
/// caller for another record (`ToPreparer::Again`), then ready again.
struct Handed {
    collector: Child,
    pidfd: OwnedFd,
    caller: Option<OwnedFd>,
    holder_pid: i32,
    generation: u64,
    /// The control socket's inode: what comes back must be the same one.
    ctl_inode: u64,
    /// Its record, finished for a caller that has returned (run::handover).
    finishing: Option<Finishing>,
}

/// Shared by the thread that prepares and the one that answers.
struct Pool {
    ready: Vec<Ready>,
    target: usize,
    /// Requests answered so far: after a failed preparation the preparing
    /// thread waits for the next one instead of trying again at once.
    requests: u64,
    /// Collectors handed out and still running. While one is, the next
    /// observation is prepared only if a request already found none: the
    /// three program starts would otherwise compete with that command for
    /// the CPU, at its start.
    running: usize,
    /// Counts changes of our mount table: an observation prepared before
    /// the last one has a stale copy of it.
    generation: u64,
    stop: bool,
}

/// `prov __run-preparer`: listens until it has been idle for the linger
/// time; exits at once if another preparer already listens at its place.
pub fn serve() -> anyhow::Result<ExitCode> {
    let helper = observe::usable_helper().map_err(anyhow::Error::msg)?;
    let place = Place::of(&helper).ok_or_else(|| anyhow::anyhow!("no private directory for the preparer's socket"))?;
    let context = Context::of("self").ok_or_else(|| anyhow::anyhow!("cannot read our own context"))?;
    // Polled for POLLPRI: the kernel flags a change of the mount table.
    let mounts = std::fs::File::open("/proc/self/mountinfo")?;
    // O_NOFOLLOW: a link planted in place of the lock file is not followed.
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(place.path(".lock"))?;
    if nix::fcntl::Flock::lock(lock.try_clone()?, nix::fcntl::FlockArg::LockExclusiveNonblock).is_err() {
        return Ok(ExitCode::SUCCESS);
    }
    let _ = std::fs::remove_file(place.path(".sock"));
    let listener = socket(AddressFamily::Unix, SockType::SeqPacket, SockFlag::SOCK_CLOEXEC, None)?;
    bind(listener.as_raw_fd(), &place.address()?)?;
    listen(&listener, Backlog::new(64)?)?;
    let pool = Arc::new((
        Mutex::new(Pool { ready: Vec::new(), target: 1, requests: 0, running: 0, generation: 0, stop: false }),
        Condvar::new(),
    ));
    let preparing = {
        let pool = Arc::clone(&pool);
        std::thread::spawn(move || keep_ready(&helper, &pool))
    };
    let mut handed: Vec<Handed> = Vec::new();
    let linger = linger();
    let mut last_request = Instant::now();
    loop {
        let idle_left = linger.saturating_sub(last_request.elapsed());
        if handed.is_empty() && idle_left.is_zero() {
            break;
        }
        let timeout = if handed.is_empty() { idle_left } else { Duration::from_secs(3600) };
        // Records finished for callers gone (run::handover): until `Stored`.
        let timeout =
            next_deadline(handed.iter().filter_map(|h| h.finishing.as_ref())).map_or(timeout, |d| d.min(timeout));
        let mut fds =
            vec![PollFd::new(listener.as_fd(), PollFlags::POLLIN), PollFd::new(mounts.as_fd(), PollFlags::POLLPRI)];
        fds.extend(handed.iter().map(|h| PollFd::new(h.pidfd.as_fd(), PollFlags::POLLIN)));
        // The callers' connections: an observation handed back, or the
        // caller gone.
        let callers: Vec<usize> = (0..handed.len()).filter(|&i| handed[i].caller.is_some()).collect();
        fds.extend(
            callers
                .iter()
                .filter_map(|&i| handed[i].caller.as_ref())
                .map(|c| PollFd::new(c.as_fd(), PollFlags::POLLIN)),
        );
        let finishing: Vec<usize> =
            (0..handed.len()).filter(|&i| handed[i].finishing.as_ref().is_some_and(|f| !f.hung_up)).collect();
        fds.extend(
            finishing
                .iter()
                .filter_map(|&i| handed[i].finishing.as_ref())
                .map(|f| PollFd::new(f.ctl.as_fd(), PollFlags::POLLIN)),
        );
        match poll(&mut fds, PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX)) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
        let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
        let ended: Vec<bool> = (0..handed.len()).map(|i| ready(&fds[2 + i])).collect();
        let mut heard = vec![false; handed.len()];
        for (k, &i) in callers.iter().enumerate() {
            heard[i] = ready(&fds[2 + handed.len() + k]);
        }
        let mut answered = vec![false; handed.len()];
        for (k, &i) in finishing.iter().enumerate() {
            answered[i] = ready(&fds[2 + handed.len() + callers.len() + k]);
        }
        let request = ready(&fds[0]);
        let remounted = ready(&fds[1]);
        drop(fds);
        if remounted {
            handed.extend(discard_ready(&pool));
        }
        let mut still = Vec::with_capacity(handed.len());
        for (i, mut h) in handed.drain(..).enumerate() {
            // First what its caller said: a record handed over just before
            // its collector ended is finished with that end.
            if heard[i] {
                match take_back(h, &pool) {
                    Some(kept) => h = kept,
                    None => continue,
                }
            }
            if ended.get(i) == Some(&true) {
                let fate = h
                    .collector
                    .wait()
                    .map_or_else(|e| format!("the collector's end is unknown: {e}"), observe::fate_of);
                if let Some(finishing) = h.finishing {
                    finishing.collector_ended(&fate);
                }
                if let Some(caller) = h.caller {
                    let _ = ipc::send(caller.as_fd(), &wire::message(FromPreparer::Fate as u8, fate.as_bytes()), &[]);
                }
            } else if h.finishing.is_some() {
                still.extend(finish(h, answered[i], &pool));
            } else {
                still.push(h);
            }
        }
        handed = still;
        if request {
            if let Ok(conn) = accept4(listener.as_raw_fd(), SockFlag::SOCK_CLOEXEC) {
                // accept4 returned a new descriptor nobody owns.
                let conn = prov_protocol::fds::own_new_fd(conn);
                last_request = Instant::now();
                // Answering again: runs need not skip us.
                let _ = std::fs::remove_file(place.path(".stuck"));
                handed = await_one_back(handed, &pool);
                // A change since the last poll: this request must not get
                // an observation prepared before it.
                if mounts_changed(&mounts) {
                    handed.extend(discard_ready(&pool));
                }
                handed.extend(answer(conn, &context, &pool));
            }
        }
        pool.0.lock().unwrap_or_else(|e| e.into_inner()).running = handed.len();
        pool.1.notify_all();
    }
    // Our place first, so no caller connects to a preparer that is leaving.
    let _ = std::fs::remove_file(place.path(".sock"));
    pool.0.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
    pool.1.notify_all();
    let _ = preparing.join();
    drop(lock);
    Ok(ExitCode::SUCCESS)
}

/// Answers one request: a ready observation (its collector then watched
/// until it ends, to reap it and say how it ended), or none.
fn answer(conn: OwnedFd, context: &Context, pool: &(Mutex<Pool>, Condvar)) -> Option<Handed> {
    let peer = getsockopt(&conn, sockopt::PeerCredentials).ok()?;
    if peer.uid() != nix::unistd::geteuid().as_raw() {
        return None;
    }
    let same_context = peer_context(&conn, peer.pid()).is_some_and(|c| c == *context);
    let Some(ready) = same_context.then(|| take_alive(pool)).flatten() else {
        let _ = ipc::send(conn.as_fd(), &[FromPreparer::NoneReady as u8], &[]);
        return None;
    };
    let Ready { ctl, ns_root, tracker, holder_pid, mut collector, generation } = ready;
    let fds = [ctl.as_raw_fd(), ns_root.as_raw_fd(), tracker.as_raw_fd()];
    let sent = ipc::send(conn.as_fd(), &wire::ready(holder_pid, collector.id()), &fds).is_ok();
    let ctl_inode = inode(&ctl);
    // Our copies closed: only the caller, then its command, holds them (the
    // tracker's hang-up must come when the command's last process is gone).
    drop((ctl, ns_root, tracker));
    // Not reaped yet, so the number is still the collector's.
    match prov_protocol::fds::pidfd_open(collector.id() as i32) {
        Ok(pidfd) => Some(Handed {
            collector,
            pidfd,
            caller: sent.then_some(conn),
            holder_pid,
            generation,
            ctl_inode,
            finishing: None,
        }),
        Err(_) => {
            let _ = collector.wait();
            None
        }
    }
}

/// Whether an observation given back is the one handed out: the same
/// control socket (by inode), and a tracker the collector made (it is the
/// tracker's peer). Whether that collector still lives is the caller's part.
pub(crate) fn handed_out(ctl: &OwnedFd, ctl_inode: u64, tracker: &OwnedFd, collector_pid: u32) -> bool {
    inode(ctl) == ctl_inode && crate::spawn::socket_peer_pid(tracker.as_raw_fd()) == Some(collector_pid as i32)
}

/// A socket's inode number (0 if it cannot be read).
pub(crate) fn inode(fd: &OwnedFd) -> u64 {
    nix::sys::stat::fstat(fd).map_or(0, |st| st.st_ino)
}

/// A message from the caller of a handed-out observation: the observation
/// back, clean, for another record (`ToPreparer::Again`, see
/// `ready_again`), its record to finish (`ToPreparer::Handover`), or the
/// caller gone.
/// Returns it when it stays handed out (watched until its collector ends).
fn take_back(mut h: Handed, pool: &(Mutex<Pool>, Condvar)) -> Option<Handed> {
    let message = h.caller.as_ref().and_then(|c| ipc::recv(c.as_fd()).ok().flatten());
    // Either way no more from this caller: it has exited or is exiting.
    h.caller = None;
    let Some((msg, mut fds)) = message else { return Some(h) };
    match ToPreparer::read(&msg) {
        Some((ToPreparer::Handover, body)) => {
            h.finishing = Finishing::receive(body, fds);
            return Some(h);
        }
        Some((ToPreparer::Again, [])) => {}
        _ => return Some(h),
    }
    let (Some(tracker), Some(ns_root), Some(ctl), true) = (fds.pop(), fds.pop(), fds.pop(), fds.is_empty()) else {
        return Some(h);
    };
    ready_again(h, ctl, ns_root, tracker, pool)
}

/// When no observation is ready: waits, at most BACK_SOON_WAIT, for the
/// collectors of records being finished to answer, and takes their answers
/// (`Stored`: the observation ready again). One poll over all of them, so a
/// record stuck in its writer (a database locked by a query) holds up no
/// request longer than that.
fn await_one_back(handed: Vec<Handed>, pool: &(Mutex<Pool>, Condvar)) -> Vec<Handed> {
    if !pool.0.lock().unwrap_or_else(|e| e.into_inner()).ready.is_empty() {
        return handed;
    }
    fn finishing(h: &Handed) -> Option<&Finishing> {
        h.finishing.as_ref().filter(|f| !f.hung_up)
    }
    let waiting: Vec<usize> = (0..handed.len()).filter(|&i| finishing(&handed[i]).is_some()).collect();
    if waiting.is_empty() {
        return handed;
    }
    let mut fds: Vec<PollFd> = waiting
        .iter()
        .filter_map(|&i| finishing(&handed[i]))
        .map(|f| PollFd::new(f.ctl.as_fd(), PollFlags::POLLIN))
        .collect();
    let timeout = PollTimeout::try_from(BACK_SOON_WAIT).unwrap_or(PollTimeout::ZERO);
    if !matches!(poll(&mut fds, timeout), Ok(n) if n > 0) {
        return handed;
    }
    let answered: Vec<usize> =
        waiting.iter().zip(&fds).filter(|(_, f)| f.revents().is_some_and(|r| !r.is_empty())).map(|(&i, _)| i).collect();
    drop(fds);
    let mut still = Vec::with_capacity(handed.len());
    for (i, h) in handed.into_iter().enumerate() {
        match answered.contains(&i) {
            true => still.extend(finish(h, true, pool)),
            false => still.push(h),
        }
    }
    still
}

/// A record finished for a caller that has returned (run::handover): the
/// collector answered (`answered`) or the time is up. Returns the
/// observation when it stays handed out.
fn finish(mut h: Handed, answered: bool, pool: &(Mutex<Pool>, Condvar)) -> Option<Handed> {
    let finishing = h.finishing.take()?;
    if !answered {
        match Instant::now() >= finishing.deadline {
            true => finishing.too_slow(),
            false => h.finishing = Some(finishing),
        }
        return Some(h);
    }
    match finishing.hear() {
        Heard::Waiting(finishing) => h.finishing = Some(finishing),
        Heard::Done(Some((ctl, ns_root, tracker))) => return ready_again(h, ctl, ns_root, tracker, pool),
        Heard::Done(None) => {}
        // What is said waits for how it ended (its pidfd).
        Heard::CollectorGone(mut finishing) => {
            finishing.hung_up = true;
            h.finishing = Some(finishing);
        }
    }
    Some(h)
}

/// An observation back for another record: ready again unless the mount
/// table changed since it was prepared, it is not the one handed out, its
/// collector is gone, or enough are ready. Returns it when it stays
/// handed out (watched until its collector ends).
fn ready_again(
    mut h: Handed,
    ctl: OwnedFd,
    ns_root: OwnedFd,
    tracker: OwnedFd,
    pool: &(Mutex<Pool>, Condvar),
) -> Option<Handed> {
    let genuine =
        handed_out(&ctl, h.ctl_inode, &tracker, h.collector.id()) && matches!(h.collector.try_wait(), Ok(None));
    let mut p = pool.0.lock().unwrap_or_else(|e| e.into_inner());
    if !genuine || p.generation != h.generation || p.ready.len() >= MAX_READY {
        // Our copies closed: the collector sees its control socket hang up
        // and ends; watched until it has.
        return Some(h);
    }
    let Handed { collector, holder_pid, generation, .. } = h;
    p.ready.push(Ready { ctl, ns_root, tracker, holder_pid, collector, generation });
    drop(p);
    pool.1.notify_all();
    None
}

/// The connecting process's context, read through /proc by the pid it
/// connected with. With `SO_PEERPIDFD` (Linux 6.5) the process is then
/// checked to be still alive, so the pid was still its own and not reused
/// by a process of another context; older kernels keep that small race.
fn peer_context(conn: &OwnedFd, pid: i32) -> Option<Context> {
    let pidfd = prov_protocol::fds::peer_pidfd(conn.as_fd()).ok();
    let context = Context::of(&pid.to_string())?;
    match pidfd {
        Some(pidfd) if !process_lives(&pidfd) => None,
        _ => Some(context),
    }
}

/// Whether the process of `pidfd` has not exited (a pidfd turns readable
/// when it has).
fn process_lives(pidfd: &OwnedFd) -> bool {
    !ipc::readable_within(pidfd.as_fd(), Duration::ZERO)
}

/// Whether our mount table changed since we last asked (the kernel flags
/// POLLPRI once per change, per open file).
pub(crate) fn mounts_changed(mounts: &std::fs::File) -> bool {
    let mut fds = [PollFd::new(mounts.as_fd(), PollFlags::POLLPRI)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
}

/// The mount table changed: every ready observation has a stale copy of
/// it. Their collectors are told to go (their control sockets closed) and
/// watched until they have, like those handed out; the preparing thread
/// makes new ones.
fn discard_ready(pool: &(Mutex<Pool>, Condvar)) -> Vec<Handed> {
    let stale = {
        let mut p = pool.0.lock().unwrap_or_else(|e| e.into_inner());
        p.generation += 1;
        std::mem::take(&mut p.ready)
    };
    pool.1.notify_all();
    stale
        .into_iter()
        .filter_map(|Ready { mut collector, holder_pid, generation, .. }| {
            match prov_protocol::fds::pidfd_open(collector.id() as i32) {
                Ok(pidfd) => Some(Handed {
                    collector,
                    pidfd,
                    caller: None,
                    holder_pid,
                    generation,
                    ctl_inode: 0,
                    finishing: None,
                }),
                Err(_) => {
                    let _ = collector.wait();
                    None
                }
            }
        })
        .collect()
}

/// Takes a ready observation whose collector still lives (one killed while
/// it waited is dropped, and reaped) and has the preparing thread make the
/// next one.
fn take_alive(pool: &(Mutex<Pool>, Condvar)) -> Option<Ready> {
    let mut p = pool.0.lock().unwrap_or_else(|e| e.into_inner());
    p.requests += 1;
    let mut found = None;
    while let Some(mut ready) = p.ready.pop() {
        // The collector sends nothing before Prepare: a hang-up means gone.
        let hung_up = {
            let mut fds = [PollFd::new(ready.ctl.as_fd(), PollFlags::empty())];
            !matches!(poll(&mut fds, PollTimeout::ZERO), Ok(0))
        };
        if !hung_up && matches!(ready.collector.try_wait(), Ok(None)) {
            found = Some(ready);
            break;
        }
        let Ready { mut collector, .. } = ready;
        let _ = collector.wait();
    }
    if found.is_none() {
        p.target = MAX_READY;
    }
    pool.1.notify_all();
    found
}

/// The preparing thread: keeps `target` observations ready.
fn keep_ready(helper: &Path, pool: &(Mutex<Pool>, Condvar)) {
    let mut failed_at: Option<u64> = None;
    loop {
        {
            let mut p = pool.0.lock().unwrap_or_else(|e| e.into_inner());
            let wait = |p: &Pool| {
                let outrun = p.target == MAX_READY && p.ready.is_empty();
                p.ready.len() >= p.target || failed_at == Some(p.requests) || (p.running > 0 && !outrun)
            };
            while !p.stop && wait(&p) {
                p = pool.1.wait(p).unwrap_or_else(|e| e.into_inner());
            }
            if p.stop {
                return;
            }
        }
        let (requests, generation) = {
            let p = pool.0.lock().unwrap_or_else(|e| e.into_inner());
            (p.requests, p.generation)
        };
        match observe::start_unprepared(helper) {
            Ok(Observation {
                ctl,
                ns_root,
                tracker: Some(tracker),
                holder_pid,
                collector: CollectorProcess::Child(collector),
                ..
            }) => {
                failed_at = None;
                let ready = Ready { ctl, ns_root, tracker, holder_pid, collector, generation };
                let mut p = pool.0.lock().unwrap_or_else(|e| e.into_inner());
                if p.generation == generation {
                    p.ready.push(ready);
                } else {
                    // The mounts changed while it was prepared: stale.
                    drop(p);
                    let Ready { ctl, ns_root, tracker, mut collector, .. } = ready;
                    drop((ctl, ns_root, tracker));
                    let _ = collector.wait();
                }
            }
            Ok(_) => failed_at = Some(requests),
            // Each `prov run` then says why itself, on the direct way.
            Err(_) => failed_at = Some(requests),
        }
    }
}
