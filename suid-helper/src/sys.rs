//! The only module with `unsafe`: thin wrappers over the libc calls the
//! helper needs. Each returns `io::Result` so callers cannot ignore errors.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

pub fn getresuid() -> (u32, u32, u32) {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: three valid out-pointers; getresuid cannot fail with them.
    unsafe { libc::getresuid(&mut r, &mut e, &mut s) };
    (r, e, s)
}

pub fn getresgid() -> (u32, u32, u32) {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: three valid out-pointers; getresgid cannot fail with them.
    unsafe { libc::getresgid(&mut r, &mut e, &mut s) };
    (r, e, s)
}

/// `u32::MAX` means "unchanged", as for the raw syscall.
pub fn setresuid(r: u32, e: u32, s: u32) -> io::Result<()> {
    // SAFETY: plain syscall wrapper without pointers.
    check(unsafe { libc::setresuid(r, e, s) }).map(drop)
}

pub fn setresgid(r: u32, e: u32, s: u32) -> io::Result<()> {
    // SAFETY: plain syscall wrapper without pointers.
    check(unsafe { libc::setresgid(r, e, s) }).map(drop)
}

pub fn no_new_privs() -> bool {
    // SAFETY: PR_GET_NO_NEW_PRIVS takes no pointer arguments.
    unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 }
}

pub fn set_keepcaps(on: bool) -> io::Result<()> {
    // SAFETY: PR_SET_KEEPCAPS takes an integer flag.
    check(unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, libc::c_ulong::from(on), 0, 0, 0) }).map(drop)
}

/// Whether the process may be traced and its /proc files are its euid's.
pub fn set_dumpable(on: bool) -> io::Result<()> {
    // SAFETY: PR_SET_DUMPABLE takes an integer flag.
    check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, libc::c_ulong::from(on), 0, 0, 0) }).map(drop)
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_VERSION_3: u32 = 0x2008_0522;
pub const CAP_SYS_ADMIN: u32 = 21;

/// (effective, permitted) capability sets as 64-bit masks.
pub fn capabilities() -> io::Result<(u64, u64)> {
    let mut hdr = CapHeader { version: CAP_VERSION_3, pid: 0 };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget with a v3 header writes exactly two CapData structs.
    check(unsafe { libc::syscall(libc::SYS_capget, &mut hdr, data.as_mut_ptr()) } as libc::c_int)?;
    let join = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
    Ok((join(data[0].effective, data[1].effective), join(data[0].permitted, data[1].permitted)))
}

/// Sets the effective set to `effective` (a subset of the permitted set, which
/// stays as it is) and clears the inheritable set.
pub fn set_effective_capabilities(effective: u64) -> io::Result<()> {
    let (_, permitted) = capabilities()?;
    let mut hdr = CapHeader { version: CAP_VERSION_3, pid: 0 };
    let data = [
        CapData { effective: effective as u32, permitted: permitted as u32, inheritable: 0 },
        CapData { effective: (effective >> 32) as u32, permitted: (permitted >> 32) as u32, inheritable: 0 },
    ];
    // SAFETY: capset with a v3 header reads exactly two CapData structs.
    check(unsafe { libc::syscall(libc::SYS_capset, &mut hdr, data.as_ptr()) } as libc::c_int).map(drop)
}

pub fn open(path: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    openat(None, path, flags)
}

pub fn openat(dir: Option<BorrowedFd<'_>>, path: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let dirfd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: path is NUL-terminated; O_CLOEXEC keeps the fd from leaking into
    // exec'd programs unless we hand it over on purpose.
    let fd = check(unsafe { libc::openat(dirfd, path.as_ptr(), flags | libc::O_CLOEXEC) })?;
    // SAFETY: fd was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    // SAFETY: an all-zero stat is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is a live descriptor and st a valid out-pointer.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

pub fn stat(path: &CStr) -> io::Result<libc::stat> {
    // SAFETY: an all-zero stat is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: path is NUL-terminated and st a valid out-pointer.
    check(unsafe { libc::stat(path.as_ptr(), &mut st) })?;
    Ok(st)
}

pub fn unshare_mount_namespace() -> io::Result<()> {
    // SAFETY: plain syscall; the process is single-threaded (a requirement
    // of CLONE_NEWNS sharing semantics we rely on).
    check(unsafe { libc::unshare(libc::CLONE_NEWNS) }).map(drop)
}

/// Makes every mount of the current namespace a slave: host mount changes
/// still propagate in, nothing done in here propagates out.
pub fn make_mounts_slave() -> io::Result<()> {
    // SAFETY: all pointers are NULL or NUL-terminated literals.
    check(unsafe {
        libc::mount(std::ptr::null(), c"/".as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_SLAVE, std::ptr::null())
    })
    .map(drop)
}

/// A pidfd of this very process: setns() through it enters the namespaces
/// the process is in now, whatever a chroot jail has at /proc.
pub fn pidfd_of_self() -> io::Result<OwnedFd> {
    // SAFETY: getpid takes no arguments and cannot fail.
    pidfd_open(unsafe { libc::getpid() })
}

/// A pidfd of `pid` (Linux 5.3+): it names that very process for good,
/// whatever comes to hold the number later.
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with integer arguments.
    let fd = check(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int)?;
    // SAFETY: fd was just returned by the kernel and is ours alone (pidfds
    // are always close-on-exec).
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether the process of a pidfd is still running (signal 0 through the
/// pidfd: ESRCH once it has exited, even if its number was reused).
pub fn pidfd_alive(pidfd: BorrowedFd<'_>) -> bool {
    // SAFETY: signal 0 with no siginfo only checks that the process exists.
    unsafe { libc::syscall(libc::SYS_pidfd_send_signal, pidfd.as_raw_fd(), 0, std::ptr::null::<u8>(), 0) == 0 }
}

/// Enters the mount namespace of `fd` (a namespace file or a pidfd). The
/// kernel resets root and working directory to that namespace's root.
pub fn setns(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: plain syscall on a live descriptor.
    check(unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNS) }).map(drop)
}

/// NS_GET_USERNS: the user namespace owning a namespace.
pub fn owning_user_namespace(ns: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    const NS_GET_USERNS: libc::Ioctl = 0xb701;
    // SAFETY: this ioctl takes no argument and returns a new descriptor.
    let fd = check(unsafe { libc::ioctl(ns.as_raw_fd(), NS_GET_USERNS) })?;
    // SAFETY: fd was just returned by the kernel and is ours alone.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    set_cloexec(std::os::fd::AsFd::as_fd(&fd), true)?;
    Ok(fd)
}

/// NS_GET_OWNER_UID: the uid (in this process's user namespace) of the
/// user who made the user namespace `userns`.
pub fn user_namespace_owner(userns: BorrowedFd<'_>) -> io::Result<u32> {
    const NS_GET_OWNER_UID: libc::Ioctl = 0xb704;
    let mut uid: libc::uid_t = u32::MAX;
    // SAFETY: this ioctl writes one uid_t into `uid`, which we own.
    check(unsafe { libc::ioctl(userns.as_raw_fd(), NS_GET_OWNER_UID, &raw mut uid) })?;
    Ok(uid)
}

pub fn set_cloexec(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    let flag = if on { libc::FD_CLOEXEC } else { 0 };
    // SAFETY: F_SETFD on a live descriptor.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, flag) }).map(drop)
}

// fanotify constants; libc lacks the 6.x ones.
pub const FAN_CLOEXEC: libc::c_uint = 0x1;
pub const FAN_NONBLOCK: libc::c_uint = 0x2;
pub const FAN_CLASS_NOTIF: libc::c_uint = 0x0;
pub const FAN_REPORT_FD_ERROR: libc::c_uint = 0x2000;
pub const FAN_MARK_ADD: libc::c_uint = 0x1;
pub const FAN_MARK_MOUNT: libc::c_uint = 0x10;
pub const FAN_CLOSE_WRITE: u64 = 0x8;
pub const FAN_CLOSE_NOWRITE: u64 = 0x10;
/// A file opened by execve (and the interpreters it loads): the process table.
pub const FAN_OPEN_EXEC: u64 = 0x1000;

pub fn fanotify_init(flags: libc::c_uint, event_f_flags: libc::c_uint) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the result is a new descriptor or -1.
    let fd = check(unsafe { libc::fanotify_init(flags, event_f_flags) })?;
    // SAFETY: fd was just returned by the kernel and is ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Marks the mount that `target` (an O_PATH descriptor) lies on. The kernel
/// takes no O_PATH descriptor as the object itself, so the mark is placed
/// through its magic link, which resolves to exactly that file.
pub fn fanotify_mark_mount(group: BorrowedFd<'_>, mask: u64, target: BorrowedFd<'_>) -> io::Result<()> {
    let link = CString::new(format!("/proc/self/fd/{}", target.as_raw_fd()))
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: link is NUL-terminated; group and target are live descriptors.
    check(unsafe {
        libc::fanotify_mark(group.as_raw_fd(), FAN_MARK_ADD | FAN_MARK_MOUNT, mask, libc::AT_FDCWD, link.as_ptr())
    })
    .map(drop)
}

/// Opens an absolute path (O_PATH) below `root` one component at a time without
/// following any symlink: users own directories on the way to mount points
/// and could swap one for a symlink into another namespace.
pub fn open_no_symlinks(root: BorrowedFd<'_>, path: &[u8]) -> io::Result<OwnedFd> {
    let mut cur = openat(Some(root), c".", libc::O_PATH | libc::O_DIRECTORY)?;
    let components: Vec<&[u8]> = path.split(|&b| b == b'/').filter(|c| !c.is_empty()).collect();
    for (i, comp) in components.iter().enumerate() {
        if *comp == b".." || *comp == b"." {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let name = CString::new(*comp).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let last = i + 1 == components.len();
        let flags = libc::O_PATH | libc::O_NOFOLLOW | if last { 0 } else { libc::O_DIRECTORY };
        cur = openat(Some(std::os::fd::AsFd::as_fd(&cur)), &name, flags)?;
    }
    Ok(cur)
}

/// The id of the mount `fd` lies on (as in /proc/self/mountinfo).
pub fn mount_id(fd: BorrowedFd<'_>) -> io::Result<u64> {
    // SAFETY: an all-zero statx is a valid value to be overwritten.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: "" with AT_EMPTY_PATH describes fd itself; stx is a valid
    // out-pointer.
    check(unsafe { libc::statx(fd.as_raw_fd(), c"".as_ptr(), libc::AT_EMPTY_PATH, libc::STATX_MNT_ID, &mut stx) })?;
    if stx.stx_mask & libc::STATX_MNT_ID == 0 {
        return Err(io::Error::from_raw_os_error(libc::ENOSYS));
    }
    Ok(stx.stx_mnt_id)
}

pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both fds were just returned by the kernel and are ours alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

pub fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds has room for the two descriptors socketpair writes.
    check(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) })?;
    // SAFETY: both fds were just returned by the kernel and are ours alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

pub enum Forked {
    Child,
    Parent(libc::pid_t),
}

pub fn fork() -> io::Result<Forked> {
    // SAFETY: the helper is single-threaded, so the child may run any code.
    let pid = check(unsafe { libc::fork() })?;
    Ok(if pid == 0 { Forked::Child } else { Forked::Parent(pid) })
}

pub fn setsid() {
    // SAFETY: plain syscall; failing (already a leader) is harmless.
    unsafe { libc::setsid() };
}

/// Moves `fds` to descriptors 3, 4, … in order (inheritable), and closes every
/// other descriptor above 2.
pub fn arrange_fds(fds: &[RawFd]) -> io::Result<()> {
    // First move everything out of the way so the dup2s below cannot clobber
    // a source that happens to sit at a target number.
    // Above the targets, but as low as possible: a low RLIMIT_NOFILE must
    // not make this fail.
    let above_targets = 3 + fds.len() as libc::c_int;
    let mut high = Vec::with_capacity(fds.len());
    for &fd in fds {
        // SAFETY: F_DUPFD_CLOEXEC on a live descriptor returns a new one.
        high.push(check(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, above_targets) })?);
    }
    for (i, &fd) in high.iter().enumerate() {
        // SAFETY: dup2 onto a small number we own; the new fd is inheritable.
        check(unsafe { libc::dup2(fd, 3 + i as RawFd) })?;
    }
    let first_free = 3 + fds.len() as libc::c_uint;
    // SAFETY: closes descriptors only; nothing else refers to them afterwards
    // (the OwnedFds of the caller are forgotten before exec or die with it).
    check(unsafe { libc::syscall(libc::SYS_close_range, first_free, libc::c_uint::MAX, 0) } as libc::c_int).map(drop)
}

pub fn set_cloexec_raw(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_SETFD on a descriptor number; a wrong one yields EBADF.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) }).map(drop)
}

pub fn dup2(from: RawFd, to: RawFd) -> io::Result<()> {
    // SAFETY: plain syscall on descriptor numbers.
    check(unsafe { libc::dup2(from, to) }).map(drop)
}

/// Reads from a descriptor number (possibly one named in argv: a bad number
/// only yields EBADF).
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: buf is valid for writes of buf.len() bytes.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// One datagram on a SOCK_SEQPACKET socket; best effort.
pub fn send(fd: RawFd, msg: &[u8]) -> io::Result<()> {
    // SAFETY: msg is valid for reads of msg.len() bytes; MSG_NOSIGNAL avoids
    // SIGPIPE when the peer is gone.
    let n = unsafe { libc::send(fd, msg.as_ptr().cast(), msg.len(), libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// One datagram with one descriptor attached (SCM_RIGHTS).
pub fn send_with_fd(sock: RawFd, msg: &[u8], attached: BorrowedFd<'_>) -> io::Result<()> {
    const SPACE: usize = 64;
    let fd = attached.as_raw_fd();
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    if space > SPACE {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // u64s: a control buffer aligned for cmsghdr.
    let mut control = [0u64; SPACE / 8];
    let mut iov = libc::iovec { iov_base: msg.as_ptr() as *mut libc::c_void, iov_len: msg.len() };
    // SAFETY: an all-zero msghdr is a valid empty one; the fields set below
    // point into iov and control, which outlive the sendmsg call.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = control.as_mut_ptr().cast();
    hdr.msg_controllen = space as _;
    // SAFETY: msg_control holds `space` bytes, room for one cmsghdr with one
    // descriptor (CMSG_SPACE), so CMSG_FIRSTHDR is non-null and CMSG_DATA
    // points at room for the descriptor; sendmsg only reads msg and iov.
    let n = unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&hdr);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
        libc::sendmsg(sock, &hdr, libc::MSG_NOSIGNAL)
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The pid of the process that made the other end of a Unix socket (for a
/// socketpair, the process that called socketpair()).
pub fn peer_pid(sock: RawFd) -> io::Result<libc::pid_t> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred/len are valid out-pointers of the sizes given.
    check(unsafe {
        libc::getsockopt(sock, libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut cred as *mut libc::ucred).cast(), &mut len)
    })?;
    Ok(cred.pid)
}

/// Installs a seccomp filter on this (single-threaded) process and returns
/// its user-notification listener. Without no_new_privs this needs
/// CAP_SYS_ADMIN: called before the privilege drop. SPEC_ALLOW: the filter
/// must not switch on the speculative-store-bypass mitigation for the
/// user's command (a cost the kernel otherwise imposes on filtered tasks).
pub fn install_seccomp_listener(program: &[libc::sock_filter]) -> io::Result<OwnedFd> {
    let len = u16::try_from(program.len()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let prog = libc::sock_fprog { len, filter: program.as_ptr() as *mut libc::sock_filter };
    let flags = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_SPEC_ALLOW;
    // SAFETY: prog points at `len` instructions that outlive the call (the
    // kernel copies them); the call returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, flags, &prog as *const libc::sock_fprog)
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor; it is ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

pub fn close(fd: RawFd) -> io::Result<()> {
    // SAFETY: the caller owns this descriptor number and never uses it again.
    check(unsafe { libc::close(fd) }).map(drop)
}

pub fn send_pipe(fd: RawFd, msg: &[u8]) -> io::Result<()> {
    // SAFETY: msg is valid for reads of msg.len() bytes.
    let n = unsafe { libc::write(fd, msg.as_ptr().cast(), msg.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub fn chdir(path: &CStr) -> io::Result<()> {
    // SAFETY: path is NUL-terminated.
    check(unsafe { libc::chdir(path.as_ptr()) }).map(drop)
}

pub fn fchdir(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: plain syscall on a live descriptor.
    check(unsafe { libc::fchdir(fd.as_raw_fd()) }).map(drop)
}

/// Makes the working directory the root directory.
pub fn chroot_to_cwd() -> io::Result<()> {
    // SAFETY: "." is a NUL-terminated literal.
    check(unsafe { libc::chroot(c".".as_ptr()) }).map(drop)
}

pub fn getcwd() -> io::Result<CString> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: buf is valid for buf.len() bytes; getcwd NUL-terminates.
    let p = unsafe { libc::getcwd(buf.as_mut_ptr().cast(), buf.len()) };
    if p.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getcwd succeeded, so buf holds a NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(buf.as_ptr().cast()) }.to_owned())
}

/// The entry point, which the C runtime calls in place of Rust's own
/// start-up: that start-up reads /proc/self/maps to place a guard page
/// below the main thread's stack and installs signal stacks and handlers
/// to report a stack overflow, 0.1 ms of every traced command here, for a
/// program this small. What else it does is done here or by the C library:
/// SIGPIPE ignored (a write to a closed socket fails with EPIPE instead of
/// killing us), and, as for every setuid program, fds 0-2 taken by
/// /dev/null (or /dev/full) if the caller closed them (the C library's
/// secure mode, glibc's and musl's alike), so that nothing the helper opens
/// gets their numbers. The arguments are taken from `argv` here: without
/// Rust's start-up, `std::env::args_os` is empty on musl.
#[cfg(not(test))]
#[no_mangle]
pub extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    use std::os::unix::ffi::OsStringExt;
    // SAFETY: installing SIG_IGN for SIGPIPE has no memory-safety impact.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let count = usize::try_from(argc).unwrap_or(0);
    let mut args = Vec::with_capacity(count.saturating_sub(1));
    for i in 1..count {
        // SAFETY: the C runtime passes `argc` entries in `argv`, each NULL
        // or a NUL-terminated string that lives as long as the process.
        let arg = unsafe { *argv.add(i) };
        if arg.is_null() {
            break;
        }
        // SAFETY: as above; the bytes are copied out at once.
        args.push(std::ffi::OsString::from_vec(unsafe { CStr::from_ptr(arg) }.to_bytes().to_vec()));
    }
    crate::run(args)
}

/// Restores the default disposition of every signal the Rust runtime or the
/// caller changed to "ignore" on our side (SIGPIPE), and unblocks nothing:
/// the signal mask is the caller's own and passes through exec unchanged.
pub fn reset_sigpipe() {
    // SAFETY: installing SIG_DFL for SIGPIPE has no memory-safety impact.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Replaces the process image. Returns only on failure.
pub fn execve(path: &CStr, argv: &[CString], envp: &[CString]) -> io::Error {
    let argv_ptrs = null_terminated(argv);
    let envp_ptrs = null_terminated(envp);
    // SAFETY: all three arrays are NUL-terminated strings / NULL-terminated
    // pointer arrays that outlive the call.
    unsafe { libc::execve(path.as_ptr(), argv_ptrs.as_ptr(), envp_ptrs.as_ptr()) };
    io::Error::last_os_error()
}

/// execveat(fd, "", …, AT_EMPTY_PATH): runs exactly the file we checked.
pub fn fexecve(fd: RawFd, argv: &[CString], envp: &[CString]) -> io::Error {
    let argv_ptrs = null_terminated(argv);
    let envp_ptrs = null_terminated(envp);
    // SAFETY: as for execve; "" with AT_EMPTY_PATH executes the fd itself.
    unsafe {
        libc::syscall(libc::SYS_execveat, fd, c"".as_ptr(), argv_ptrs.as_ptr(), envp_ptrs.as_ptr(), libc::AT_EMPTY_PATH)
    };
    io::Error::last_os_error()
}

fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings.iter().map(|s| s.as_ptr()).chain(std::iter::once(std::ptr::null())).collect()
}

/// One line to stderr; a closed or broken stderr is ignored (the Rust print
/// macros would panic, and the helper must never abort half-way).
pub fn say(line: &str) {
    let mut msg = Vec::with_capacity(line.len() + 14);
    msg.extend_from_slice(b"prov-helper: ");
    msg.extend_from_slice(line.as_bytes());
    msg.push(b'\n');
    // SAFETY: msg is valid for reads of msg.len() bytes.
    let _ = unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
}

/// Whether `fd` is a SOCK_SEQPACKET socket (the only kind of control channel
/// prov hands the helper).
pub fn is_seqpacket_socket(fd: RawFd) -> bool {
    let mut kind: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: kind/len are valid out-pointers of the sizes given.
    let r = unsafe {
        libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_TYPE, (&mut kind as *mut libc::c_int).cast(), &mut len)
    };
    r == 0 && kind == libc::SOCK_SEQPACKET
}

pub fn getppid() -> libc::pid_t {
    // SAFETY: getppid takes no arguments and cannot fail.
    unsafe { libc::getppid() }
}

/// The whole of a (small, kernel-made) file below an open directory.
pub fn read_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Vec<u8>> {
    let mut data = Vec::new();
    std::io::Read::read_to_end(&mut std::fs::File::from(openat(Some(dir), name, libc::O_RDONLY)?), &mut data)?;
    Ok(data)
}

/// Whether `fd` is open and a fanotify group (its magic link names the
/// anonymous inode fanotify groups share); then the text of its fdinfo.
pub fn fanotify_fdinfo(fd: RawFd) -> Option<Vec<u8>> {
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    (link.as_os_str() == "anon_inode:[fanotify]").then(|| std::fs::read(format!("/proc/self/fdinfo/{fd}")).ok())?
}

/// Borrows a descriptor this process received open and keeps open until it
/// exits (one `fanotify_fdinfo` checked).
pub fn borrow_fd(fd: RawFd) -> BorrowedFd<'static> {
    // SAFETY: callers pass only a number checked open, which nothing in this
    // short-lived process closes before exit.
    unsafe { BorrowedFd::borrow_raw(fd) }
}

pub fn exit(code: i32) -> ! {
    // SAFETY: _exit skips atexit handlers and stdio flushing, which a forked
    // child of a setuid program must not run twice.
    unsafe { libc::_exit(code) }
}
