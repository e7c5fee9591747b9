//! Command texts of any length on the control socket. One datagram holds at
//! most a few hundred KiB (the socket's send buffer; "Message too long"
//! past it) and the JSON doubles a text as hex, so a long text travels in a
//! memfd attached to `Begin` (SCM_RIGHTS) and the message says how long it is.

use std::io::{self, Write};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;

use crate::ipc;
use crate::protocol::{CommandStart, ToCollector};

/// Texts up to this many bytes stay in the message itself.
pub const INLINE_MAX: usize = 16 * 1024;
/// The longest text kept. A command line is at most ~6 MiB (the kernel's
/// exec limit with a large stack); a typed line has no limit of its own.
pub const TEXT_MAX: u64 = 64 << 20;

/// Sends `Begin`, with a long text in an attached memfd.
pub fn send_begin(sock: BorrowedFd<'_>, mut start: CommandStart) -> io::Result<()> {
    if start.text.len() <= INLINE_MAX {
        return ipc::send_json(sock, &ToCollector::Begin(start), &[]);
    }
    let memfd = text_memfd(&start.text)?;
    start.text_in_fd = Some(start.text.len() as u64);
    start.text = Vec::new();
    ipc::send_json(sock, &ToCollector::Begin(start), &[memfd.as_raw_fd()])
}

fn text_memfd(text: &[u8]) -> io::Result<OwnedFd> {
    let fd = nix::sys::memfd::memfd_create(c"prov-text", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(text)?;
    Ok(file.into())
}

/// Puts a text that came in a memfd into `start`: the first descriptor
/// attached to the message. At most TEXT_MAX bytes are read.
pub fn receive_text(start: &mut CommandStart, fds: Vec<OwnedFd>) -> io::Result<()> {
    let Some(len) = start.text_in_fd.take() else { return Ok(()) };
    let fd = fds.into_iter().next().ok_or_else(|| io::Error::other("Begin without the text's descriptor"))?;
    let file = std::fs::File::from(fd);
    let mut text = vec![0u8; len.min(TEXT_MAX) as usize];
    file.read_exact_at(&mut text, 0)?;
    start.text = text;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
    use std::os::fd::AsFd;

    fn start(text: Vec<u8>) -> CommandStart {
        CommandStart {
            seq: 1,
            text,
            cwd: b"/".to_vec(),
            start_ns: 1,
            text_in_fd: None,
            confirm: false,
            ack: false,
            reuse: false,
            end_when_idle: false,
            env: None,
        }
    }

    fn roundtrip(text: Vec<u8>) -> (CommandStart, usize) {
        let (a, b) = socketpair(AddressFamily::Unix, SockType::SeqPacket, None, SockFlag::SOCK_CLOEXEC).unwrap();
        send_begin(a.as_fd(), start(text)).unwrap();
        let (msg, fds) = ipc::recv(b.as_fd()).unwrap().unwrap();
        let nfds = fds.len();
        let ToCollector::Begin(mut got) = serde_json::from_slice(&msg).unwrap() else { panic!("not Begin") };
        receive_text(&mut got, fds).unwrap();
        (got, nfds)
    }

    #[test]
    fn short_texts_stay_in_the_message() {
        let (got, nfds) = roundtrip(b"ls -l".to_vec());
        assert_eq!((got.text.as_slice(), nfds), (&b"ls -l"[..], 0));
    }

    #[test]
    fn four_megabytes_arrive_whole() {
        let text: Vec<u8> = (0..(4usize << 20) + 7).map(|i| (i % 251) as u8).collect();
        let (got, nfds) = roundtrip(text.clone());
        assert_eq!(nfds, 1);
        assert!(got.text == text);
        assert_eq!(got.text_in_fd, None);
    }

    #[test]
    fn a_missing_descriptor_is_an_error() {
        let mut s = start(Vec::new());
        s.text_in_fd = Some(10);
        assert!(receive_text(&mut s, Vec::new()).is_err());
    }
}
