//! Datagrams on the SOCK_SEQPACKET sockets, with descriptors attached
//! (SCM_RIGHTS). Shared by the collector and its callers.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

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
}
