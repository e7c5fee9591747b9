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
    let mut buf = vec![0u8; MAX_MESSAGE];
    let mut iov = [IoSliceMut::new(&mut buf)];
    let mut space = nix::cmsg_space!([RawFd; 4]);
    let (len, fds) = loop {
        match recvmsg::<()>(sock.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC) {
            Ok(msg) => {
                let mut fds = Vec::new();
                for c in msg.cmsgs()? {
                    if let ControlMessageOwned::ScmRights(raw) = c {
                        // New in this process, from this very message.
                        fds.extend(raw.into_iter().map(crate::sys::own_new_fd));
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
    buf.truncate(len);
    Ok(Some((buf, fds)))
}
