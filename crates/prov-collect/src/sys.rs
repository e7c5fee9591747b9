//! The only module of the collector with `unsafe`: taking ownership of the
//! descriptors the kernel or the helper installed in this process, and what
//! the writer's child does between fork and exec.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

/// Takes the `N` descriptors the helper placed from `first` on, marking each
/// close-on-exec (the writer must inherit none of them). Works once per
/// process: a second call could hand out a descriptor that is owned already.
pub fn take_inherited_fds<const N: usize>(first: RawFd) -> io::Result<[OwnedFd; N]> {
    static TAKEN: AtomicBool = AtomicBool::new(false);
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Err(io::Error::other("inherited descriptors taken twice"));
    }
    let numbers: [RawFd; N] = std::array::from_fn(|i| first + i as RawFd);
    for fd in numbers {
        // SAFETY: F_SETFD only flags a descriptor number; an unused number
        // fails with EBADF and changes nothing.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("descriptor {fd} missing")));
        }
    }
    // SAFETY: each number was checked open above; the helper placed them for
    // us before exec, nothing in this process refers to them yet, and this
    // runs once (TAKEN), so each gets exactly one owner.
    Ok(numbers.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Makes every descriptor but stdin, stdout and stderr close on exec in the
/// child `cmd` starts, whatever flags they had: the writer must never get
/// the fanotify group or an event's file, even one some code forgot to mark.
/// (Kernels before 5.11 lack close_range; there every descriptor of ours is
/// opened close-on-exec already.)
pub fn only_stdio_across_exec(cmd: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec; it makes a
    // single raw system call (async-signal-safe), allocates nothing and
    // takes no lock.
    unsafe {
        cmd.pre_exec(|| {
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
            Ok(())
        });
    }
}

/// As `only_stdio_across_exec`, but `keep` too crosses the exec (the
/// fanotify group, handed to the setuid helper to mark new mounts on).
pub fn only_stdio_and_across_exec(cmd: &mut Command, keep: RawFd) {
    // SAFETY: the closure runs in the forked child before exec; it makes two
    // raw system calls (async-signal-safe), allocates nothing and takes no
    // lock.
    unsafe {
        cmd.pre_exec(move || {
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
            if libc::fcntl(keep, libc::F_SETFD, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// One call a process of the command made that the namespace filter stopped
/// (`struct seccomp_notif`): it waits in the kernel until answered.
pub struct StoppedCall {
    pub id: u64,
    pub pid: u32,
    pub nr: i32,
    pub arch: u32,
    pub args: [u64; 6],
}

/// Takes the next stopped call from a seccomp listener (SECCOMP_IOCTL_NOTIF_RECV).
/// ENOENT: the caller was killed before it was read.
pub fn receive_stopped_call(listener: std::os::fd::BorrowedFd<'_>) -> io::Result<StoppedCall> {
    use std::os::fd::AsRawFd;
    // SAFETY: an all-zero seccomp_notif is valid, and the kernel requires
    // it zeroed before RECV.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: RECV writes one seccomp_notif into the struct we own.
    let r = unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &raw mut notif) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(StoppedCall { id: notif.id, pid: notif.pid, nr: notif.data.nr, arch: notif.data.arch, args: notif.data.args })
}

/// Lets a stopped call go on exactly as the process made it
/// (SECCOMP_USER_NOTIF_FLAG_CONTINUE): the listener never changes a result.
/// ENOENT: the caller is gone (killed while it waited).
pub fn continue_call(listener: std::os::fd::BorrowedFd<'_>, id: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut resp =
        libc::seccomp_notif_resp { id, val: 0, error: 0, flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32 };
    // SAFETY: SEND reads one seccomp_notif_resp from the struct we own.
    let r = unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, &raw mut resp) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The id of the mount an open file lies on (statx STATX_MNT_ID, Linux
/// 5.8+), as /proc/PID/mountinfo numbers mounts.
pub fn mount_id(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<u64> {
    use std::os::fd::AsRawFd;
    // SAFETY: an all-zero statx is a valid value to be overwritten.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: "" with AT_EMPTY_PATH describes fd itself; stx is a valid
    // out-pointer we own.
    let r = unsafe { libc::statx(fd.as_raw_fd(), c"".as_ptr(), libc::AT_EMPTY_PATH, libc::STATX_MNT_ID, &raw mut stx) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    if stx.stx_mask & libc::STATX_MNT_ID == 0 {
        return Err(io::Error::from_raw_os_error(libc::ENOSYS));
    }
    Ok(stx.stx_mnt_id)
}
