//! The CLI's only unsafe code: placing descriptors in a child before exec,
//! and signal dispositions while a command runs.

use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

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

/// In the child, keep these descriptors open across exec, at their numbers.
pub fn inherit_fds(cmd: &mut Command, fds: Vec<RawFd>) {
    // SAFETY: fcntl is async-signal-safe; the Vec was allocated before fork
    // and is only read.
    unsafe {
        cmd.pre_exec(move || {
            for &fd in &fds {
                if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
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

pub fn no_new_privs() -> bool {
    // SAFETY: PR_GET_NO_NEW_PRIVS takes no pointer arguments.
    unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 }
}

/// Descriptor 3, where the shim hands `prov __prepare` its socket.
pub fn fd3() -> std::os::fd::BorrowedFd<'static> {
    // SAFETY: only used by `prov __prepare`, whose fd 3 the shim placed and
    // keeps open; the borrow never outlives the process.
    unsafe { std::os::fd::BorrowedFd::borrow_raw(3) }
}
