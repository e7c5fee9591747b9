//! The collector's main loop: one observation, from the helper's exec until
//! the last process holding the tracker socket is gone and every event is
//! stored. An observation whose command left its namespace clean (see
//! `Observation::fit_for_another_record`) serves the next record on the same
//! control socket, with a new tracker: the run preparer hands it out again,
//! so the helper, collector and writer starts are paid once, not per command.

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use prov_model::env::EnvConfig;
use prov_model::redact::Redactor;
use prov_model::{CommandEnd, Completeness, FileEvent};
use prov_protocol::control::{BeginAnswer, EndSent, RecordIdentity, StoreReport, ToCaller, ToCollector};
use prov_protocol::helper::JoinReport;
use prov_protocol::writer_pipe::{SyncReport, ToWriter};
use prov_protocol::{ipc, long_text};

use crate::error::CollectorError;
use crate::fanotify::{RawEvent, Reader};
use crate::follow_namespaces::Follower;
use crate::members::Members;
use crate::nested_namespaces::NamespaceCalls;
use crate::new_mounts::MountWatch;
use crate::new_pids::NewPids;
use crate::resolve::Resolver;
use crate::writer_on_demand::OnDemandWriter;

/// What the helper handed over (see suid-helper `observe`).
pub struct Handover {
    pub ctl: OwnedFd,
    /// Shared with the thread that has new mounts marked (`new_mounts`).
    pub group: Arc<OwnedFd>,
    /// Held until the end: paths of events on the namespace's own mounts
    /// resolve fully only while the namespace lives.
    pub namespace: OwnedFd,
    pub ns_root: OwnedFd,
    pub tracker: OwnedFd,
    pub tracker_for_command: OwnedFd,
    /// Closing it lets the holder exit.
    pub holder_pipe: OwnedFd,
    pub holder_pid: i32,
    pub unmarked_mounts: u32,
    pub reports_fd_errors: bool,
}

/// Flush resolved events to the writer in batches of this size.
const BATCH: usize = 4096;
/// Events resolved between two reads of the kernel's queue.
const RESOLVE_CHUNK: usize = 256;
/// Rounds of read-and-resolve before control messages are looked at.
const PUMP_ROUNDS: usize = 16;
/// At most this many read events (each an open descriptor) wait to be
/// resolved, whatever RLIMIT_NOFILE allows: a few KiB of kernel memory each.
const BACKLOG_MAX: usize = 65_536;
/// How long an observation offered to a shell for another record waits to
/// be claimed (see `State::offered_to_shell`).
const UNCLAIMED_OFFER: Duration = Duration::from_secs(30);
/// While events flow, the queue is read again this long after it was
/// found empty, instead of sleeping until its next event: an event that
/// finds the collector asleep wakes it from inside the traced program's
/// close() (on a virtual machine, an inter-processor interrupt each).
const FLOW_PAUSE: Duration = Duration::from_millis(1);
/// A partly filled batch waits at most this long.
const IDLE_FLUSH: Duration = Duration::from_millis(200);
/// A caller that sent `End` with its pidfd (it exits right after) is waited
/// for at most this long before its record is finished.
pub const CALLER_EXIT_WAIT: Duration = Duration::from_millis(50);
/// While a process's arguments wait to be read (its exec not complete when
/// its event was resolved), /proc is looked at again this often.
const PROCESS_RETRY: Duration = Duration::from_millis(2);
/// Records one observation serves at most, and for at most this long since
/// it started: what a long-lived collector holds (its allocations, the
/// kernel's per-group state) cannot grow without bound, and its namespace,
/// a copy of the mount table made when it was prepared, is renewed now and
/// then even if no change was noticed.
const MAX_RECORDS: u32 = 1000;
const MAX_AGE: Duration = Duration::from_secs(3600);

struct State {
    reader: Reader,
    resolver: Option<Resolver>,
    /// Until `Begin`, resolved events wait here (the writer needs the record).
    identity: Option<RecordIdentity>,
    begun: bool,
    /// The start of a record whose text is not known yet (bash learns it
    /// from its history list at the end), held until the End or the first
    /// events. One that never got an End (a typed `exit`) is not written:
    /// there is nothing to say about it. A start with a text is written at
    /// once, so a record exists whatever dies later; unless the caller keeps
    /// the start itself (`prov run`'s start file): then it goes with the
    /// first events, the End (the collector's own, if the caller is gone),
    /// or at `begin_due`, whichever comes first.
    held_begin: Option<ToWriter>,
    /// When a start kept by the caller is written at the latest (IDLE_FLUSH
    /// after Begin): a running command is in the history as its files are,
    /// and a short one costs the writer one wake-up and one transaction,
    /// not two, while it runs (with the machine's other cores busy, each
    /// wake-up is paid in line with the command).
    begin_due: Option<Instant>,
    /// Why a process of the command ran outside the observation (the join
    /// helper's report on the tracker); the first reason is kept.
    untraced: Option<String>,
    /// Events read from the kernel's queue, not yet resolved (all of them
    /// until `Prepare` brings the settings). The queue is read as soon as
    /// events arrive, resolving in between: for every new event the kernel
    /// compares up to 128 queued ones (to merge repeats), in the traced
    /// process's close(), so a long kernel queue slows the command (a fifth
    /// of cp's CPU when copying the kernel tree, before this).
    backlog: VecDeque<RawEvent>,
    backlog_limit: usize,
    /// The last read of the queue found events: the next is made after
    /// FLOW_PAUSE rather than when poll() says an event came.
    flowing: bool,
    raw: Vec<RawEvent>,
    batch: Vec<FileEvent>,
    /// When the first event of the partly filled batch was resolved: it is
    /// sent at most IDLE_FLUSH later, also while events keep coming (a
    /// command polling a file every 50 ms would otherwise hold it back).
    batch_since: Option<Instant>,
    unobserved_setuid: u64,
    unmarked_mounts: u64,
    writer: OnDemandWriter,
    /// From `Prepare`: takes secrets out of the texts of `Begin` and `End`,
    /// before the writer stores or spools them.
    redactor: Option<Redactor>,
    /// From `Prepare`: which environment variables `Begin`'s are kept.
    env_config: EnvConfig,
    /// From `Prepare`: archived scripts go through the redactor too.
    redact_archived: bool,
    /// The command's last process is gone: every process record is final.
    processes_over: bool,
    /// The caller can hand the observation back for another record.
    reuse_asked: bool,
    /// The caller is a shell (it ends its records once the command is
    /// idle), kept for the offer below.
    caller_is_shell: bool,
    /// When this observation was offered to a shell for another record: the
    /// shell's preparer sends the next record's settings as soon as the shell
    /// hands it back, at its next prompt. One not claimed within
    /// `UNCLAIMED_OFFER` was left with the shell (its record was stored too
    /// late to be handed back) and only waits for the shell to close it at
    /// the next command's end: it ends now, so an idle shell does not keep
    /// two observations.
    offered_to_shell: Option<Instant>,
    /// Mounts the helper could not mark: missing from every record.
    unmarked_at_start: u64,
    /// CPU time used by this process and its writer before this record (an
    /// observation serving several records reports each one's own).
    cpu_before: u64,
    /// Mount namespaces the command's processes make or enter.
    namespace_calls: NamespaceCalls,
}

pub fn run(h: Handover, check_access: bool) -> Result<(), CollectorError> {
    // Before Ready: no process of the command has started yet, so the
    // command's processes are found among those started since.
    let new_pids = NewPids::open();
    handshake(&h)?;
    // Started after Ready, so the command does not wait for it.
    let mut st = State::new(OnDemandWriter::start(), u64::from(h.unmarked_mounts));
    let own_namespace = nix::sys::stat::fstat(h.namespace.as_fd()).map_or(0, |s| s.st_ino);
    st.namespace_calls = NamespaceCalls::new(own_namespace);
    match Follower::new(h.holder_pid, Arc::clone(&h.group)) {
        Ok(follower) => st.namespace_calls.follow_with(follower),
        Err(e) => st.writer.log(format!("cannot follow the mount namespaces the command makes: {e}")),
    }
    let started = Instant::now();
    let new_pids = new_pids
        .map_err(|e| st.writer.log(format!("each look for the command's processes reads all of /proc: {e}")))
        .ok();
    let members = Members::of(&h.namespace, h.holder_pid, new_pids);
    if let Err(e) = &members {
        st.writer.log(format!("cannot tell the command's processes by their namespace: {e}"));
    }
    let mounts = MountWatch::of_holder(h.holder_pid, Arc::clone(&h.group));
    if let Err(e) = &mounts {
        st.writer.log(format!("cannot watch the namespace for new mounts: {e}"));
    }
    let mut observation = Observation {
        group: &h.group,
        ctl: &h.ctl,
        tracker: h.tracker,
        command_end: Some(h.tracker_for_command),
        ns_root: Some(h.ns_root),
        check_access,
        ctl_open: true,
        tracker_open: true,
        ended: false,
        members: members.ok(),
        lingering: Vec::new(),
        mounts: mounts.ok(),
        mounts_moved: false,
        records_done: 0,
        started,
        writer_watched: true,
    };
    let result = observation.run(&mut st);
    if let Err(e) = &result {
        st.writer.log(format!("stopped early, the record may be incomplete or lost: {e}"));
    }
    // The namespace's root, if Prepare never took it, is closed first.
    drop(observation);
    // The writer stores what it got, then exits.
    drop(st);
    drop(h.holder_pipe);
    // The holder is our child and exits on the pipe's hang-up: reap it, so
    // no zombie is left where init does not reap (containers).
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(h.holder_pid), None);
    drop(h.namespace);
    result
}

/// Tells the caller the observation is set up, handing over the namespace's
/// root and the tracker the command's processes hold.
fn handshake(h: &Handover) -> Result<(), CollectorError> {
    let ready = ToCaller::Ready {
        holder_pid: h.holder_pid,
        unmarked_mounts: h.unmarked_mounts,
        reports_fd_errors: h.reports_fd_errors,
    };
    ipc::send_json(h.ctl.as_fd(), &ready, &[h.ns_root.as_raw_fd(), h.tracker_for_command.as_raw_fd()])
        .map_err(CollectorError::Caller)
}

/// The three sources the collector waits on and what it knows about them.
struct Observation<'a> {
    /// The fanotify group: the command's file events.
    group: &'a OwnedFd,
    /// The caller's control socket: Prepare, Begin, End.
    ctl: &'a OwnedFd,
    /// Held by every process of the command; hangs up when the last is gone.
    /// A new one for each record.
    tracker: OwnedFd,
    /// Our copy of the command's end of the tracker, until `Begin` (or, when
    /// the caller sends `End` only once it waits anyway, until `End`): while
    /// we hold it the tracker cannot hang up, and so cannot wake us. Only the
    /// command's processes may hold it after that, or the hang-up that says
    /// they are gone would never come.
    command_end: Option<OwnedFd>,
    /// Until Prepare hands it to the resolver.
    ns_root: Option<OwnedFd>,
    check_access: bool,
    ctl_open: bool,
    tracker_open: bool,
    ended: bool,
    /// Tells the command's processes by their mount namespace.
    members: Option<Members>,
    /// After the tracker's hang-up: pidfds of the command's processes still
    /// alive (a daemon that closed every inherited descriptor). Each exit
    /// brings a new look at who is left.
    lingering: Vec<OwnedFd>,
    /// The namespace's mount table, for mounts that appear while the
    /// command runs (see `new_mounts`).
    mounts: Option<MountWatch>,
    /// A mount came or went during this record (or while it waited for it).
    mounts_moved: bool,
    /// Records stored by this observation before the current one.
    records_done: u32,
    started: Instant,
    /// Whether the writer's exit is still looked for (once seen, its
    /// hang-up would wake every poll).
    writer_watched: bool,
}

/// Which sources poll() found ready.
struct ReadySources {
    events: bool,
    ctl: bool,
    tracker: bool,
    /// One of the lingering processes has exited.
    member_exited: bool,
    /// A mount came or went in the namespace.
    mounts_changed: bool,
    /// The writer has exited.
    writer_gone: bool,
    /// What poll() said of each namespace listener.
    listeners: Vec<PollFlags>,
}

impl Observation<'_> {
    /// The observation's loop, until the last process of the command is gone
    /// and its record is stored.
    fn run(&mut self, st: &mut State) -> Result<(), CollectorError> {
        loop {
            let busy = st.resolver.is_some() && !st.backlog.is_empty();
            let Some(ready) = self.wait(st, busy)? else { continue };
            if ready.events || busy || st.flowing {
                st.pump(self.group)?;
            }
            st.retry_processes();
            if ready.listeners.iter().any(|f| !f.is_empty()) {
                st.namespace_calls.serve(&ready.listeners);
            }
            if ready.tracker {
                self.read_tracker(st);
                if !self.tracker_open {
                    self.look_for_members(st);
                }
            }
            if ready.member_exited {
                self.look_for_members(st);
            }
            if ready.mounts_changed {
                self.mark_new_mounts(st);
            }
            if ready.ctl {
                self.read_control(st)?;
            }
            if ready.writer_gone {
                // Waiting for a record, the observation is of no use
                // without its writer: ended, so that it is never handed out
                // (its caller sees the control socket hang up). During a
                // record, the record says the writer stopped.
                if !st.begun {
                    return Ok(());
                }
                self.writer_watched = false;
                st.reuse_asked = false;
            }
            if st.batch_since.is_some_and(|since| since.elapsed() >= IDLE_FLUSH) {
                st.flush();
            }
            if st.begin_due.is_some_and(|due| Instant::now() >= due) {
                st.start_record();
            }
            st.writer.retire_if_idle(st.waiting_for_record());
            if st.offered_to_shell.is_some_and(|since| since.elapsed() >= UNCLAIMED_OFFER) {
                return Ok(());
            }
            if self.command_gone(st) && (self.ended || !self.ctl_open) {
                return self.finish(st);
            }
        }
    }

    /// Waits for a source to be ready, or until a partly filled batch or a
    /// held start is due (then written). None when interrupted by a signal.
    fn wait(&self, st: &mut State, busy: bool) -> Result<Option<ReadySources>, CollectorError> {
        let mut timeout = poll_timeout(st, busy);
        // A flowing queue is read again after a pause, not on its next
        // event: it is not polled meanwhile, for a poll() waiting on it is
        // woken by every event, however few it asks for.
        let mut fds = Vec::new();
        if st.flowing {
            timeout = timeout_at_most(timeout, FLOW_PAUSE);
        } else {
            fds.push(PollFd::new(self.group.as_fd(), PollFlags::POLLIN));
        }
        let ctl_watch = fds.len();
        if self.ctl_open {
            fds.push(PollFd::new(self.ctl.as_fd(), PollFlags::POLLIN));
        }
        let tracker_watch = fds.len();
        if self.tracker_open {
            fds.push(PollFd::new(self.tracker.as_fd(), PollFlags::POLLIN));
        }
        let mount_watch = fds.len();
        if let Some(w) = &self.mounts {
            fds.push(PollFd::new(w.fd(), PollFlags::POLLPRI));
        }
        let writer_watch = fds.len();
        let watching_writer = self.writer_watched && st.writer.exit_watch().is_some();
        if let Some(fd) = st.writer.exit_watch().filter(|_| self.writer_watched) {
            // No events asked for: only its hang-up (the writer's exit) shows.
            fds.push(PollFd::new(fd, PollFlags::empty()));
        }
        let first_listener = fds.len();
        fds.extend(st.namespace_calls.poll_fds());
        let first_member = fds.len();
        fds.extend(self.lingering.iter().map(|p| PollFd::new(p.as_fd(), PollFlags::POLLIN)));
        let polled = poll(&mut fds, timeout);
        let ready = |i: usize| fds.get(i).and_then(|f| f.revents()).is_some_and(|r| !r.is_empty());
        let sources = ReadySources {
            events: !st.flowing && ready(0),
            ctl: self.ctl_open && ready(ctl_watch),
            tracker: self.tracker_open && ready(tracker_watch),
            member_exited: (first_member..fds.len()).any(ready),
            mounts_changed: self.mounts.is_some() && ready(mount_watch),
            writer_gone: watching_writer && ready(writer_watch),
            listeners: fds[first_listener..first_member]
                .iter()
                .map(|f| f.revents().unwrap_or(PollFlags::empty()))
                .collect(),
        };
        drop(fds);
        match polled {
            Ok(0) if !busy && st.batch_since.is_some_and(|since| since.elapsed() >= IDLE_FLUSH) => st.flush(),
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => return Ok(None),
            Err(e) => return Err(CollectorError::Poll(e)),
        }
        Ok(Some(sources))
    }

    /// A message on the tracker counts a setuid program that ran unobserved
    /// or says why a process ran untraced; its hang-up means the command's
    /// last process is gone.
    fn read_tracker(&mut self, st: &mut State) {
        let (msg, fds) = match ipc::recv(self.tracker.as_fd()) {
            Ok(Some(received)) => received,
            Ok(None) | Err(_) => {
                self.tracker_open = false;
                return;
            }
        };
        match JoinReport::read(&msg) {
            Some((JoinReport::NamespaceListener, _)) => {
                fds.into_iter().for_each(|l| st.namespace_calls.add_listener(l));
            }
            Some((JoinReport::Enclosed, _)) => st.namespace_calls.enclosed(),
            Some((JoinReport::Unwatched, why)) => {
                st.namespace_calls.unwatched(String::from_utf8_lossy(why).into_owned());
            }
            Some((JoinReport::Unobserved, _)) => st.unobserved_setuid += 1,
            Some((JoinReport::Untraced, why)) => {
                st.untraced.get_or_insert(String::from_utf8_lossy(why).into_owned());
            }
            None => {}
        }
    }

    /// The command's last process is gone: the tracker has hung up, no
    /// process is left in the namespace, and none carries a namespace filter
    /// of the command (one may have left the namespace for its own).
    fn command_gone(&self, st: &State) -> bool {
        !self.tracker_open && self.lingering.is_empty() && !st.namespace_calls.watching()
    }

    /// Which of the command's processes are alive, now that the tracker is
    /// closed (see `members`).
    fn look_for_members(&mut self, st: &mut State) {
        // The watch's mount ids serve the look once it has seen every change.
        if self.mounts_changed_now() {
            self.mark_new_mounts(st);
        }
        let known_mounts = self.mounts.as_ref().map(MountWatch::mount_ids);
        self.lingering = self.members.as_mut().map(|m| m.alive(known_mounts)).unwrap_or_default();
    }

    /// Has the mounts that appeared since the last look marked, and counts
    /// them: writes made there before the mark are missing (see
    /// `new_mounts`).
    fn mark_new_mounts(&mut self, st: &mut State) {
        self.mounts_moved = true;
        let Some(watch) = self.mounts.as_mut() else { return };
        match watch.mark_new() {
            Ok(appeared) => st.unmarked_mounts += appeared,
            Err(e) => {
                st.writer.log(format!("stopped watching the namespace for new mounts: {e}"));
                self.mounts = None;
            }
        }
    }

    /// A change of the mount table not yet looked at (poll() without waiting).
    fn mounts_changed_now(&self) -> bool {
        let Some(watch) = &self.mounts else { return false };
        let mut fds = [PollFd::new(watch.fd(), PollFlags::POLLPRI)];
        matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
    }

    /// One control message, in the order Prepare, Begin, End; anything else
    /// ends the observation.
    fn read_control(&mut self, st: &mut State) -> Result<(), CollectorError> {
        let (msg, fds) = match ipc::recv(self.ctl.as_fd()) {
            Ok(Some(received)) => received,
            Ok(None) | Err(_) => {
                self.ctl_open = false;
                // No End will come: the processes' hang-up ends the record.
                self.command_end = None;
                return Ok(());
            }
        };
        match serde_json::from_slice::<ToCollector>(&msg) {
            Ok(ToCollector::Prepare { version, .. }) if version != prov_protocol::VERSION => {
                return Err(CollectorError::Protocol("Prepare of another protocol version"));
            }
            Ok(ToCollector::Prepare { settings, identity, .. }) if st.resolver.is_none() => {
                st.offered_to_shell = None;
                let root = self.ns_root.take().ok_or(CollectorError::Protocol("Prepare twice"))?;
                st.writer.send(ToWriter::Setup {
                    database: settings.database.clone(),
                    spool_dir: settings.spool_dir.clone(),
                    busy_timeout_ms: settings.busy_timeout_ms,
                });
                // Events already read belong to this record: a reused
                // observation's namespace was clean when the last record was
                // stored (its last process gone, every event read), and the
                // shell sends Prepare and Begin and runs the command without
                // waiting, so its first events can be read before Prepare.
                if let Some(state_dir) = settings.spool_dir.parent() {
                    st.namespace_calls.keep_notes_in(state_dir.join("nested"), &identity.host);
                }
                st.redactor = Some(Redactor::new(&settings.redact));
                st.env_config = settings.env.clone();
                st.redact_archived = settings.archive.redact;
                let mut resolver = Resolver::new(settings, self.check_access, root);
                if let Some(follower) = st.namespace_calls.follower() {
                    resolver.follow(Arc::clone(follower.followed()));
                }
                st.resolver = Some(resolver);
                st.identity = Some(identity);
            }
            Ok(ToCollector::Begin(mut start)) if !st.begun => {
                if let Err(e) = long_text::receive_text(&mut start, fds) {
                    st.writer.log(format!("the command's text could not be read: {e}"));
                }
                let identity = st.identity.take().ok_or(CollectorError::Protocol("Begin before Prepare"))?;
                let text_known = !start.text.is_empty();
                let awaits = start.awaits;
                st.reuse_asked = start.reuse;
                st.caller_is_shell = start.end == EndSent::WhenIdle;
                if start.end == EndSent::AtExit {
                    self.command_end = None;
                }
                if awaits == BeginAnswer::Watching {
                    let _ = ipc::send_json(self.ctl.as_fd(), &ToCaller::Watching, &[]);
                }
                let mut begin = identity.begin(start);
                if let Some(r) = &st.redactor {
                    begin = begin.redacted(r, &st.env_config);
                }
                if let Some(env) = &mut begin.env {
                    env.git = crate::git_state::of(&begin.cwd);
                }
                st.held_begin = Some(ToWriter::Begin(begin));
                st.begun = true;
                // A caller that keeps the start itself lets it wait for
                // the writer's next idle moment.
                if text_known && awaits == BeginAnswer::Watching {
                    st.begin_due = Some(Instant::now() + IDLE_FLUSH);
                } else if text_known {
                    st.start_record();
                }
                if awaits == BeginAnswer::Begun {
                    // The writer answers a sync once it has stored all it got.
                    let _ = st.writer.sync();
                    let _ = ipc::send_json(self.ctl.as_fd(), &ToCaller::Begun, &[]);
                }
            }
            Ok(ToCollector::End(mut end)) if st.begun && !self.ended => {
                // `prov run` handing the rest to its preparer exits right
                // after `End` and attaches its pidfd: finished once it is
                // gone, this work and the writer's do not hold up its exit
                // (on a busy machine every process woken takes the free CPU
                // in line with it). Events of processes it left behind
                // are read meanwhile.
                if let Some(caller) = fds.into_iter().next() {
                    self.await_exit_of(&caller, st)?;
                }
                // Closed first, so that the tracker hangs up now if no
                // process of the command holds it any more.
                self.command_end = None;
                if let (Some(r), Some(text)) = (&st.redactor, &end.text) {
                    end.text = Some(r.redact(text));
                }
                self.ended = true;
                if self.mounts_changed_now() {
                    self.mark_new_mounts(st);
                }
                // The command's last process was reaped before `End`: its
                // listeners have hung up, and the record need not wait for
                // a later look (which would store its last part after the
                // answer).
                st.catch_up_with_listeners();
                // Only where the observation may serve another record: the
                // others end as before.
                if st.reuse_asked {
                    self.catch_up_with_tracker(st);
                    // A mount that could not be marked: the namespace is no
                    // longer what was prepared (said now, not at the end).
                    for failure in self.mounts.as_ref().map(MountWatch::failures).unwrap_or_default() {
                        st.writer.log(failure);
                        self.mounts_moved = true;
                    }
                }
                // All processes gone (`prov run` ends after its command):
                // the reply must include their last events.
                if self.command_gone(st) {
                    st.settle(self.group)?;
                }
                st.processes_over = self.command_gone(st);
                let mut report = st.drain_and_sync(self.group, Some(end))?;
                let to_shell = st.caller_is_shell;
                let next_tracker = self.fit_for_another_record(st, &report).then(|| self.offer_again(st)).flatten();
                report.reusable = next_tracker.is_some();
                if report.reusable && to_shell {
                    st.offered_to_shell = Some(Instant::now());
                }
                // The next record's CPU time starts here: it includes the
                // closing of this one's database, and the idle time.
                st.cpu_before += report.collector_cpu_ns;
                let fds: Vec<_> = next_tracker.iter().map(AsRawFd::as_raw_fd).collect();
                let _ = ipc::send_json(self.ctl.as_fd(), &ToCaller::Stored(report), &fds);
                if next_tracker.is_some() {
                    // Not waited for: the next record's Setup comes after it.
                    st.writer.send(ToWriter::Close);
                }
            }
            _ => return Err(CollectorError::Protocol("out of order")),
        }
        Ok(())
    }

    /// Waits, at most CALLER_EXIT_WAIT, until `caller` (a pidfd) is readable:
    /// its process has exited. A hang-up or another message on the control
    /// socket ends the wait too; events that come meanwhile are read.
    fn await_exit_of(&self, caller: &OwnedFd, st: &mut State) -> Result<(), CollectorError> {
        let deadline = Instant::now() + CALLER_EXIT_WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            let mut fds = [
                PollFd::new(caller.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.ctl.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.group.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, whole_ms_up(left)) {
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(CollectorError::Poll(e)),
                Ok(0) => return Ok(()),
                Ok(_) => {}
            }
            let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
            if ready(&fds[0]) || ready(&fds[1]) {
                return Ok(());
            }
            st.pump(self.group)?;
        }
    }

    /// Reads what the tracker has for us now (prov run sends `End` once its
    /// command has exited, and its hang-up may not have been looked at yet),
    /// and on its hang-up looks for processes left in the namespace.
    fn catch_up_with_tracker(&mut self, st: &mut State) {
        let was_open = self.tracker_open;
        while self.tracker_open {
            let mut fds = [PollFd::new(self.tracker.as_fd(), PollFlags::POLLIN)];
            if !matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0) {
                break;
            }
            self.read_tracker(st);
        }
        if was_open && !self.tracker_open {
            self.look_for_members(st);
        }
    }

    /// Whether, its record stored, this observation may serve another: its
    /// caller can hand it back, the command's last process is gone (the
    /// tracker hung up and nobody is left in the namespace, so every event
    /// of it has been read), no mount came or went (the namespace is still
    /// what was prepared, and marked), both watches work, the record was
    /// kept, and the observation is within its limits of records and age.
    fn fit_for_another_record(&self, st: &State, report: &StoreReport) -> bool {
        st.reuse_asked
            && self.command_gone(st)
            && !self.mounts_moved
            && self.members.is_some()
            && self.mounts.is_some()
            && report.lost.is_none()
            && st.backlog.is_empty()
            && self.records_done + 1 < MAX_RECORDS
            && self.started.elapsed() < MAX_AGE
    }

    /// Makes ready for another record: the per-record state is forgotten,
    /// and a new tracker is made. Returns the command's end of it, to go with
    /// `Stored`; None if it cannot be made (the observation then ends as
    /// usual). The writer closes the database after `Stored` is sent
    /// (`ToWriter::Close`, not waited for), as it did when the collector
    /// exited then; a writer found gone at the next record costs that
    /// record, which its caller then ends itself, and ends the observation.
    fn offer_again(&mut self, st: &mut State) -> Option<OwnedFd> {
        let (mine, theirs) = nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::SeqPacket,
            None,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        )
        .ok()?;
        if let Some(resolver) = st.resolver.take() {
            self.ns_root = Some(resolver.into_ns_root());
        }
        st.next_record();
        self.tracker = mine;
        self.command_end = theirs.try_clone().ok();
        self.tracker_open = true;
        self.ended = false;
        self.lingering.clear();
        self.mounts_moved = false;
        self.records_done += 1;
        Some(theirs)
    }

    /// The last process is gone: the events still queued are stored. When
    /// the caller left before telling how the command ended (a typed `exit`,
    /// a shell hung up, `prov run` killed), the record is ended here, with
    /// what is known: now, status unknown, and why.
    fn finish(&mut self, st: &mut State) -> Result<(), CollectorError> {
        if self.mounts_changed_now() {
            self.mark_new_mounts(st);
        }
        for failure in self.mounts.as_ref().map(MountWatch::failures).unwrap_or_default() {
            st.writer.log(failure);
        }
        if let Some(why) = st.namespace_calls.unwatched_reason() {
            st.writer.log(why);
        }
        if st.begun {
            st.settle(self.group)?;
            let end = (!self.ended).then(|| CommandEnd {
                end_ns: now_ns(),
                exit_status: None,
                text: None,
                incomplete: Some(CALLER_GONE.into()),
                untraced: None,
            });
            st.processes_over = true;
            st.drain_and_sync(self.group, end)?;
        }
        Ok(())
    }
}

/// Why a record was ended by its collector rather than by its caller.
const CALLER_GONE: &str = "the shell or prov run was gone before the command ended: exit status unknown";

/// How long poll() may wait: not at all while resolving, and until the idle
/// flush while a batch waits or a start kept by the caller is due.
fn poll_timeout(st: &State, busy: bool) -> PollTimeout {
    if busy {
        return PollTimeout::ZERO;
    }
    let flush_in = (!st.batch.is_empty() && st.begun).then(|| {
        let waited = st.batch_since.map_or(Duration::ZERO, |since| since.elapsed());
        IDLE_FLUSH.saturating_sub(waited)
    });
    let retry_in = st.resolver.as_ref().is_some_and(|r| r.processes.wants_retry()).then_some(PROCESS_RETRY);
    let begin_in = st.begin_due.map(|due| due.saturating_duration_since(Instant::now()));
    let retire_in = st.writer.idle_left(st.waiting_for_record());
    let unclaimed_in = st.offered_to_shell.map(|since| UNCLAIMED_OFFER.saturating_sub(since.elapsed()));
    match flush_in.into_iter().chain(retry_in).chain(begin_in).chain(retire_in).chain(unclaimed_in).min() {
        Some(wait) => whole_ms_up(wait),
        None => PollTimeout::NONE,
    }
}

/// The shorter of `timeout` and `most`.
fn timeout_at_most(timeout: PollTimeout, most: Duration) -> PollTimeout {
    let most = whole_ms_up(most);
    // (PollTimeout::as_millis panics on NONE in nix 0.30.)
    if timeout.is_some() && timeout <= most {
        timeout
    } else {
        most
    }
}

/// `wait` as poll()'s timeout, rounded up to whole milliseconds: rounded
/// down, the last fraction of a millisecond before a deadline would be
/// spent in polls that return at once.
fn whole_ms_up(wait: Duration) -> PollTimeout {
    PollTimeout::try_from(wait.as_micros().div_ceil(1000)).unwrap_or(PollTimeout::MAX)
}

fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

impl State {
    fn new(writer: OnDemandWriter, unmarked_mounts: u64) -> State {
        let fd_budget = fd_budget();
        State {
            reader: Reader::with_fd_budget(fd_budget),
            resolver: None,
            identity: None,
            begun: false,
            held_begin: None,
            begin_due: None,
            untraced: None,
            backlog: VecDeque::new(),
            backlog_limit: fd_budget.min(BACKLOG_MAX),
            flowing: false,
            raw: Vec::new(),
            batch: Vec::new(),
            batch_since: None,
            unobserved_setuid: 0,
            unmarked_mounts,
            writer,
            redactor: None,
            env_config: EnvConfig::default(),
            redact_archived: false,
            processes_over: false,
            reuse_asked: false,
            caller_is_shell: false,
            offered_to_shell: None,
            unmarked_at_start: unmarked_mounts,
            cpu_before: 0,
            namespace_calls: NamespaceCalls::default(),
        }
    }

    /// No record has begun: the observation waits for its next command (a
    /// fresh one, or one given back after a stored record; the shell's come
    /// with the next record's settings at once).
    fn waiting_for_record(&self) -> bool {
        !self.begun
    }

    /// Forgets the stored record (its resolver already taken): the next
    /// `Prepare` brings the next record's settings and identity.
    fn next_record(&mut self) {
        self.identity = None;
        self.begun = false;
        self.held_begin = None;
        self.begin_due = None;
        self.untraced = None;
        self.batch.clear();
        self.batch_since = None;
        self.unobserved_setuid = 0;
        self.unmarked_mounts = self.unmarked_at_start;
        self.redactor = None;
        self.processes_over = false;
        self.reuse_asked = false;
        self.caller_is_shell = false;
        self.namespace_calls.next_record();
    }

    /// One read() of the kernel's queue into the backlog, as far as the
    /// backlog has room; false when the queue was empty.
    fn fill(&mut self, group: &OwnedFd) -> Result<bool, CollectorError> {
        let room = self.backlog_limit.saturating_sub(self.backlog.len());
        if room == 0 {
            return Ok(true);
        }
        let more = self.reader.read(group.as_fd(), &mut self.raw, room).map_err(CollectorError::Events)?;
        if let Some(r) = self.resolver.as_mut() {
            self.raw.iter().for_each(|ev| r.processes.early_look(ev));
        }
        self.backlog.extend(self.raw.drain(..));
        Ok(more)
    }

    /// Reads and resolves in turns, so the kernel's queue stays short.
    /// Bounded, so control messages are not starved by a flood.
    fn pump(&mut self, group: &OwnedFd) -> Result<(), CollectorError> {
        self.flowing = false;
        for _ in 0..PUMP_ROUNDS {
            let waiting = self.backlog.len();
            let more = self.fill(group)?;
            self.flowing |= self.backlog.len() > waiting;
            if self.resolver.is_none() || self.backlog.is_empty() {
                if !more {
                    break;
                }
                continue;
            }
            self.resolve_backlog(RESOLVE_CHUNK);
        }
        Ok(())
    }

    /// Reads and resolves until the kernel's queue is empty.
    fn drain(&mut self, group: &OwnedFd) -> Result<(), CollectorError> {
        loop {
            let more = self.fill(group)?;
            if self.resolver.is_none() {
                return Ok(());
            }
            self.resolve_backlog(usize::MAX);
            if !more {
                return Ok(());
            }
        }
    }

    /// Resolves up to `max` events of the backlog, oldest first.
    fn resolve_backlog(&mut self, max: usize) {
        for _ in 0..max {
            let Some(resolver) = self.resolver.as_mut() else { return };
            let Some(ev) = self.backlog.pop_front() else { break };
            resolver.resolve(ev, &mut self.batch);
            if !self.batch.is_empty() && self.batch_since.is_none() {
                self.batch_since = Some(Instant::now());
            }
            if self.begun && self.batch.len() >= BATCH {
                self.send_batch();
            }
        }
    }

    /// Sends the resolved events, and the contents archived with them, to
    /// the writer (after the record's start).
    fn send_batch(&mut self) {
        self.start_record();
        // A full batch is likely followed by more: keep the capacity.
        let capacity = if self.batch.len() >= BATCH { BATCH } else { 0 };
        let events = std::mem::replace(&mut self.batch, Vec::with_capacity(capacity));
        self.batch_since = None;
        self.writer.send(ToWriter::Events(events));
        let mut archived = self.resolver.as_mut().map(Resolver::take_archived).unwrap_or_default();
        // A script is synced and shown like a command text: a token in
        // deploy.sh goes as it would from the line that ran it.
        if let Some(r) = self.redactor.as_ref().filter(|_| self.redact_archived) {
            archived.iter_mut().for_each(|a| a.content = r.redact(&a.content));
        }
        self.writer.send_archived(archived);
        let processes = self.resolver.as_mut().map(|r| r.processes.take_done()).unwrap_or_default();
        self.send_processes(processes);
    }

    /// Final process records, after the events they point into.
    fn send_processes(&mut self, mut processes: Vec<prov_model::ProcessRecord>) {
        // Arguments carry what was typed (`mysql -pSECRET`, `sh -c '…'`):
        // redacted like the command's text, before anything stores them.
        if let Some(r) = &self.redactor {
            processes.iter_mut().for_each(|p| crate::processes::redact_args(p, r));
        }
        for chunk in processes.chunks(BATCH) {
            self.writer.send(ToWriter::Processes(chunk.to_vec()));
        }
    }

    /// Looks at /proc again for processes whose exec was not complete.
    fn retry_processes(&mut self) {
        if let Some(r) = self.resolver.as_mut() {
            r.processes.retry_pending();
        }
    }

    /// Sends the record's start to the writer, once.
    fn start_record(&mut self) {
        self.begin_due = None;
        if let Some(begin) = self.held_begin.take() {
            self.writer.send(begin);
        }
    }

    /// Answers the calls waiting on the namespace listeners and drops those
    /// that hung up, without waiting.
    fn catch_up_with_listeners(&mut self) {
        let mut fds: Vec<PollFd> = self.namespace_calls.poll_fds().collect();
        if fds.is_empty() || !matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0) {
            return;
        }
        let flags: Vec<PollFlags> = fds.iter().map(|f| f.revents().unwrap_or(PollFlags::empty())).collect();
        drop(fds);
        self.namespace_calls.serve(&flags);
    }

    fn flush(&mut self) {
        // Contents are archived only along with an event, so an empty
        // batch has none waiting either.
        if self.begun && !self.batch.is_empty() {
            self.send_batch();
        }
    }

    fn completeness(&self) -> Completeness {
        let mut c = self.resolver.as_ref().map(|r| r.completeness).unwrap_or_default();
        c.unobserved_setuid += self.unobserved_setuid;
        c.unmarked_mounts += self.unmarked_mounts;
        c.nested_namespaces += self.namespace_calls.count();
        c
    }

    /// The last process is gone (`Observation::command_gone`): every close
    /// the command made is in the kernel's queue, because a process counts
    /// as gone only once it has exited (see `members`), and the kernel
    /// queues a close event in the closing process itself. Reading the queue
    /// until it is empty brings all of them: nothing to wait for.
    fn settle(&mut self, group: &OwnedFd) -> Result<(), CollectorError> {
        self.drain(group)
    }

    /// Reads everything queued so far, stores it and waits until it is
    /// stored. A writer that is gone costs the record, not a hang: the
    /// report says it is lost.
    fn drain_and_sync(&mut self, group: &OwnedFd, end: Option<CommandEnd>) -> Result<StoreReport, CollectorError> {
        self.drain(group)?;
        let told = end.as_ref().is_some_and(|e| e.incomplete.is_none());
        // A start held for its text (not one the caller keeps, which is
        // only due later: `begin_due`).
        if !told && self.held_begin.is_some() && self.begin_due.is_none() {
            // Never told what the command was, and nothing stored yet.
            return Ok(StoreReport::default());
        }
        self.start_record();
        self.flush();
        if self.processes_over {
            let processes = self.resolver.as_mut().map(|r| r.processes.take_all()).unwrap_or_default();
            self.send_processes(processes);
        }
        self.namespace_calls.collect_notes();
        self.unmarked_mounts += self.namespace_calls.take_outcomes();
        let completeness = self.completeness();
        self.writer.send(ToWriter::Completeness(completeness));
        if let Some(mut end) = end {
            end.untraced = end.untraced.or_else(|| self.untraced.clone());
            end.incomplete = end.incomplete.or_else(|| self.namespace_calls.reason());
            self.writer.send(ToWriter::End(end));
        }
        let SyncReport { events, spooled, lost, cpu_ns, fallback } =
            self.writer.sync().unwrap_or_else(|e| SyncReport { lost: Some(e.to_string()), ..SyncReport::default() });
        let collector_cpu_ns = (own_cpu_ns() + cpu_ns).saturating_sub(self.cpu_before);
        Ok(StoreReport { events, completeness, spooled, lost, fallback, collector_cpu_ns, reusable: false })
    }
}

/// CPU time of this process, all threads.
fn own_cpu_ns() -> u64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF).map_or(0, |u| {
        let ns = |t: nix::sys::time::TimeVal| t.tv_sec() as u64 * 1_000_000_000 + t.tv_usec() as u64 * 1000;
        ns(u.user_time()) + ns(u.system_time())
    })
}

/// How many event descriptors one read() may bring: the kernel opens one per
/// event, and an open that fails on RLIMIT_NOFILE loses the event.
fn fd_budget() -> usize {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap_or((1024, 1024));
    let limit = if setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() { hard } else { soft };
    // Leave room for the database, spool and our own descriptors.
    usize::try_from(limit).unwrap_or(usize::MAX).saturating_sub(128).max(16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flowing_queue_waits_at_most_the_pause() {
        let pause = Duration::from_millis(1);
        assert_eq!(timeout_at_most(PollTimeout::NONE, pause), PollTimeout::from(1u8));
        assert_eq!(timeout_at_most(PollTimeout::from(200u8), pause), PollTimeout::from(1u8));
        assert_eq!(timeout_at_most(PollTimeout::ZERO, pause), PollTimeout::ZERO);
    }
}
