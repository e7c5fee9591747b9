//! The only module of this crate with `unsafe`: the descriptors that travel
//! with messages. A descriptor received with SCM_RIGHTS is taken into
//! ownership here, and a process is named to its peer by a pidfd (the
//! caller's own, attached to `End` when it hands its record over; a socket
//! peer's, taken with `SO_PEERPIDFD`).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Owns a descriptor the kernel has just installed in this process: an
/// event's file from one read() of the fanotify group, or one received with
/// SCM_RIGHTS. Callers pass only numbers taken from that very read or
/// message, each once.
pub fn own_new_fd(fd: RawFd) -> OwnedFd {
    debug_assert!(fd >= 0);
    // SAFETY: per the contract above, the number names an open descriptor
    // that the kernel created for this read and that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// A pidfd of `pid` (Linux 5.3+): readable (POLLIN) once the process has
/// exited, and it pins the number, so a check made after opening it is
/// about this very process.
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: a raw system call with two integer arguments; on success it
    // returns a new descriptor that nothing else owns.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(own_new_fd(fd as RawFd))
}

/// A pidfd of the process that connected to the Unix socket `sock`
/// (`SO_PEERPIDFD`, Linux 6.5+): unlike the pid of `SO_PEERCRED`, it cannot
/// come to name another process. Err(ENOPROTOOPT) on older kernels.
pub fn peer_pidfd(sock: std::os::fd::BorrowedFd<'_>) -> io::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    /// Not in every libc release; the same number on the architectures
    /// prov is built for (x86_64, aarch64).
    const SO_PEERPIDFD: libc::c_int = 77;
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `fd`, an int we
    // own; on success the kernel installed a new descriptor nothing owns.
    let r = unsafe {
        libc::getsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, SO_PEERPIDFD, (&raw mut fd).cast(), &raw mut len)
    };
    if r != 0 || fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(own_new_fd(fd))
}
