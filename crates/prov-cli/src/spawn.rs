//! The CLI's only unsafe code: placing descriptors in a child before exec,
//! asking who is at the other end of an inherited socket,
//! and signal dispositions while a command runs.

use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

/// In the child, make `fd` appear as `target` (inheritable).
pub fn map_fd(cmd: &mut Command, fd: RawFd, target: RawFd) {
    // SAFETY: dup2 and fcntl are async-signal-safe and touch only the
    // child's descriptor table.
    unsafe {
        cmd.pre_exec(move || {
            let r = if fd == target { libc::fcntl(fd, libc::F_SETFD, 0) } else { libc::dup2(fd, target) };
            if r < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Spawns `cmd` with these descriptors open in the child, at their numbers,
/// without a `pre_exec` step: std then starts the child with posix_spawn
/// (vfork) instead of fork, which copies no page tables (0.2 ms of prov's
/// 13 MB on `prov run`'s path). The descriptors are inheritable in this
/// process only during the call; for a single-threaded caller, as `prov
/// run` is when it starts its command, no other child can take them.
pub fn spawn_inheriting(
    cmd: &mut Command,
    fds: &[std::os::fd::BorrowedFd<'_>],
) -> std::io::Result<std::process::Child> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    let set_cloexec = |flags: FdFlag| fds.iter().try_for_each(|fd| fcntl(fd, FcntlArg::F_SETFD(flags)).map(drop));
    set_cloexec(FdFlag::empty())?;
    let child = cmd.spawn();
    // Not a reason to disown a child that started: the caller closes
    // these descriptors right after anyway.
    let _ = set_cloexec(FdFlag::FD_CLOEXEC);
    child
}

/// In the child, every descriptor from 3 up is closed at exec: a process
/// left running in the background (the sync) must not hold the shell
/// integration's socket open. Marked close-on-exec rather than closed, so
/// that std's own exec-error pipe keeps working.
pub fn close_fds_from_3(cmd: &mut Command) {
    const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;
    // SAFETY: close_range and fcntl are plain syscalls, async-signal-safe,
    // touching only the child's descriptor table.
    unsafe {
        cmd.pre_exec(|| {
            if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) < 0 {
                // Before Linux 5.11: one by one (EBADF for the unused ones).
                for fd in 3..4096 {
                    libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                }
            }
            Ok(())
        });
    }
}

/// In the child, a session of its own: no terminal's hang-up or job-control
/// signal reaches a process meant to outlive its starter.
pub fn new_session(cmd: &mut Command) {
    // SAFETY: setsid is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
}

/// While the command runs in the foreground, the terminal's SIGINT and
/// SIGQUIT are meant for it; prov stays to store the record.
pub fn ignore_terminal_signals() {
    // SAFETY: installing SIG_IGN has no memory-safety impact.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
}

/// SIGCHLD back to its default when whoever started us ignored it (an
/// ignored signal stays ignored across exec): ignored, the kernel reaps our
/// children as they exit, and their status is lost (`prov run` exited 1
/// whatever its command's status was; a collector's fate unknown). The
/// command then inherits the default, as most programs expect.
pub fn keep_children_status() {
    // SAFETY: installing SIG_DFL has no memory-safety impact.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
    }
}

/// The process `forward_termination` passes signals to (0: none).
static FORWARD_TO: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = FORWARD_TO.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

/// SIGTERM and SIGHUP (`timeout`, a batch system, a closed terminal) go to
/// the command, as they would without prov; prov stays to record how it
/// ended instead of leaving its record without an end.
pub fn forward_termination(pid: u32) {
    FORWARD_TO.store(i32::try_from(pid).unwrap_or(0), Ordering::Relaxed);
    // SAFETY: the handler only reads an atomic and calls kill, both
    // async-signal-safe; SA_RESTART keeps our waitpid going.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = forward as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        for sig in [libc::SIGTERM, libc::SIGHUP] {
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

pub fn no_new_privs() -> bool {
    // SAFETY: PR_GET_NO_NEW_PRIVS takes no pointer arguments.
    unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 }
}

/// The process at the other end of socket `fd`, if `fd` is a connected
/// Unix socket (its creator's pid, for a socketpair).
pub fn socket_peer_pid(fd: RawFd) -> Option<i32> {
    // SAFETY: the descriptor is only borrowed for one getsockopt; a number
    // that is not (or no longer) open makes it fail with EBADF.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    nix::sys::socket::getsockopt(&fd, nix::sys::socket::sockopt::PeerCredentials).ok().map(|c| c.pid())
}

/// Descriptor 3, where the shim hands `prov __prepare` its socket.
pub fn fd3() -> std::os::fd::BorrowedFd<'static> {
    // SAFETY: only used by `prov __prepare`, whose fd 3 the shim placed and
    // keeps open; the borrow never outlives the process.
    unsafe { std::os::fd::BorrowedFd::borrow_raw(3) }
}
