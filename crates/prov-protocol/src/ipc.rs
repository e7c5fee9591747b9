//! Datagrams on the SOCK_SEQPACKET sockets, with descriptors attached
//! (SCM_RIGHTS). Shared by the collector and its callers.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};

/// Large enough for any message of ours (settings with long path lists).
const MAX_MESSAGE: usize = 256 * 1024;

pub fn send(sock: BorrowedFd<'_>, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let iov = [IoSlice::new(bytes)];
    let cmsgs = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsgs };
    // MSG_NOSIGNAL: a vanished peer is an error to handle, not a SIGPIPE.
    sendmsg::<()>(sock.as_raw_fd(), &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None)?;
    Ok(())
}

pub fn send_json<T: serde::Serialize>(sock: BorrowedFd<'_>, msg: &T, fds: &[RawFd]) -> io::Result<()> {
    send(sock, &serde_json::to_vec(msg).map_err(io::Error::other)?, fds)
}

/// One datagram; `None` when the peer has closed (or the socket hung up).
pub fn recv(sock: BorrowedFd<'_>) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    // One buffer per thread, for every message: a new zeroed one per message
    // was, once glibc served it from the heap, a 256 KiB memset and its page
    // faults each time (a third of the collector's CPU per `prov run`).
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        if buf.is_empty() {
            // Fresh pages from the kernel: only those a message fills are touched.
            *buf = vec![0u8; MAX_MESSAGE];
        }
        recv_into(sock, &mut buf)
    })
}

fn recv_into(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut iov = [IoSliceMut::new(buf)];
    let mut space = nix::cmsg_space!([RawFd; 4]);
    let (len, fds) = loop {
        match recvmsg::<()>(sock.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC) {
            Ok(msg) => {
                let mut fds = Vec::new();
                for c in msg.cmsgs()? {
                    if let ControlMessageOwned::ScmRights(raw) = c {
                        // New in this process, from this very message.
                        fds.extend(raw.into_iter().map(crate::fds::own_new_fd));
                    }
                }
                break (msg.bytes, fds);
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    if len == 0 && fds.is_empty() {
        return Ok(None);
    }
    Ok(Some((buf[..len].to_vec(), fds)))
}

/// Whether `fd` has something to read, or has hung up, within `wait`: the
/// one wait before a read of an answer. A signal does not cut it short (poll
/// is asked again for the time left). An error of poll itself answers true:
/// the read that follows meets and reports it.
pub fn readable_within(fd: BorrowedFd<'_>, wait: Duration) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let deadline = Instant::now().checked_add(wait);
    loop {
        let left = deadline.map_or(wait, |d| d.saturating_duration_since(Instant::now()));
        let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
        match poll(&mut [PollFd::new(fd, PollFlags::POLLIN)], timeout) {
            Err(nix::errno::Errno::EINTR) => continue,
            Ok(n) => return n != 0,
            Err(_) => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// The buffer is reused from message to message: each comes out whole
    /// and alone, a short one after a long one too.
    #[test]
    fn messages_in_a_row_come_out_exactly_as_sent() {
        use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
        let (a, b) = socketpair(AddressFamily::Unix, SockType::SeqPacket, None, SockFlag::SOCK_CLOEXEC).unwrap();
        let long = vec![b'x'; 100_000];
        for msg in [&long[..], b"short", b"", &long[..10]] {
            send(a.as_fd(), msg, &[]).unwrap();
        }
        send(a.as_fd(), b"with a descriptor", &[b.as_raw_fd()]).unwrap();
        let got = |expected: &[u8]| {
            let (msg, fds) = recv(b.as_fd()).unwrap().unwrap();
            assert_eq!(msg, expected);
            fds.len()
        };
        assert_eq!(got(&long), 0);
        assert_eq!(got(b"short"), 0);
        // An empty datagram reads as the peer's hang-up.
        assert!(recv(b.as_fd()).unwrap().is_none());
        assert_eq!(got(&long[..10]), 0);
        assert_eq!(got(b"with a descriptor"), 1);
        drop(a);
        assert!(recv(b.as_fd()).unwrap().is_none(), "hung up");
    }

    fn pair() -> (OwnedFd, OwnedFd) {
        use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
        socketpair(AddressFamily::Unix, SockType::SeqPacket, None, SockFlag::SOCK_CLOEXEC).unwrap()
    }

    #[test]
    fn readable_within_sees_a_message_a_hang_up_or_nothing() {
        let (a, b) = pair();
        assert!(!readable_within(b.as_fd(), Duration::ZERO), "nothing sent");
        assert!(!readable_within(b.as_fd(), Duration::from_millis(5)), "nothing sent");
        send(a.as_fd(), b"answer", &[]).unwrap();
        assert!(readable_within(b.as_fd(), Duration::ZERO));
        assert_eq!(recv(b.as_fd()).unwrap().unwrap().0, b"answer");
        assert!(!readable_within(b.as_fd(), Duration::ZERO), "read already");
        drop(a);
        assert!(readable_within(b.as_fd(), Duration::from_secs(60)), "a hang-up is readable");
    }

    /// A signal handled while waiting (a shell's SIGCHLD, a terminal's
    /// SIGWINCH) does not end the wait: the answer sent after it is seen.
    #[test]
    // A handler and a signal to one thread: libc's, unsafe.
    #[allow(unsafe_code)]
    fn readable_within_waits_on_through_a_signal() {
        extern "C" fn ignore(_: libc::c_int) {}
        // SAFETY: a handler that does nothing, installed for SIGUSR2 (which
        // nothing else in this test binary uses), without SA_RESTART, so
        // poll returns EINTR.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = ignore as extern "C" fn(libc::c_int) as usize;
            assert_eq!(libc::sigaction(libc::SIGUSR2, &action, std::ptr::null_mut()), 0);
        }
        let (a, b) = pair();
        // SAFETY: pthread_self has no preconditions.
        let waiter = unsafe { libc::pthread_self() };
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            // SAFETY: the waiting thread is alive: it joins this one after
            // its wait.
            assert_eq!(unsafe { libc::pthread_kill(waiter, libc::SIGUSR2) }, 0);
            std::thread::sleep(Duration::from_millis(50));
            send(a.as_fd(), b"after the signal", &[]).unwrap();
            a
        });
        assert!(readable_within(b.as_fd(), Duration::from_secs(60)));
        assert_eq!(recv(b.as_fd()).unwrap().unwrap().0, b"after the signal");
        drop(sender.join().unwrap());
    }
}
