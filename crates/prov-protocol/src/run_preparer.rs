//! `prov run` ↔ its preparer (`prov __run-preparer`), on a SOCK_SEQPACKET
//! connection to the preparer's socket: each message is a one-byte tag and
//! what follows it, with descriptors attached.
//!
//! `prov run` connects (the connection is the request); the preparer
//! answers [`FromPreparer::Ready`] or [`FromPreparer::NoneReady`]. On the
//! same connection `prov run` later sends [`ToPreparer::Again`] or
//! [`ToPreparer::Handover`], and the preparer may say how the collector
//! ended ([`FromPreparer::Fate`]).

use prov_model::CommandEnd;
use serde::{Deserialize, Serialize};

/// In the preparer socket's name, with [`crate::VERSION`]: a prov speaking
/// another version finds another preparer.
pub const SOCKET_NAME: &str = "prov-run-preparer";

/// Preparer → `prov run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FromPreparer {
    /// An observation: `R<holder pid> <collector pid>` ([`ready`]), with
    /// the control socket, the namespace root and the tracker attached.
    Ready = b'R',
    /// None is ready (or the caller is of another context).
    NoneReady = b'N',
    /// How the collector of the observation taken ended, one phrase.
    Fate = b'F',
}

/// `prov run` → preparer, on the connection its observation came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ToPreparer {
    /// The observation is back, clean, for another record: control socket,
    /// namespace root and the collector's new tracker attached.
    Again = b'A',
    /// The command has ended and its collector has `End`: the preparer
    /// finishes the record. A [`Handover`] as JSON follows; control socket,
    /// namespace root, start file and stderr are attached.
    Handover = b'H',
}

/// A tagged message: the tag, then `body`.
pub fn message(tag: u8, body: &[u8]) -> Vec<u8> {
    [&[tag], body].concat()
}

impl FromPreparer {
    /// The tag a message starts with, and the rest.
    pub fn read(msg: &[u8]) -> Option<(FromPreparer, &[u8])> {
        let (&tag, rest) = msg.split_first()?;
        [FromPreparer::Ready, FromPreparer::NoneReady, FromPreparer::Fate]
            .into_iter()
            .find(|t| *t as u8 == tag)
            .map(|t| (t, rest))
    }
}

impl ToPreparer {
    /// The tag a message starts with, and the rest.
    pub fn read(msg: &[u8]) -> Option<(ToPreparer, &[u8])> {
        let (&tag, rest) = msg.split_first()?;
        [ToPreparer::Again, ToPreparer::Handover].into_iter().find(|t| *t as u8 == tag).map(|t| (t, rest))
    }
}

/// The `Ready` answer for an observation of this holder and collector.
pub fn ready(holder_pid: i32, collector_pid: u32) -> Vec<u8> {
    message(FromPreparer::Ready as u8, format!("{holder_pid} {collector_pid}").as_bytes())
}

/// The holder and collector pids of a `Ready` answer's body.
pub fn read_ready(body: &[u8]) -> Option<(i32, u32)> {
    let mut pids = std::str::from_utf8(body).ok()?.split(' ');
    let holder_pid = pids.next()?.parse().ok()?;
    let collector_pid = pids.next()?.parse().ok()?;
    pids.next().is_none().then_some((holder_pid, collector_pid))
}

/// What the preparer needs to finish a record as `prov run` would.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Handover {
    pub end: CommandEnd,
    /// The collector confirmed that the start is stored (`Begun`).
    pub begun_seen: bool,
    /// The start file's name: removed once the record is stored.
    pub start_path: Vec<u8>,
    /// PROV_BENCH_REPORT's file and the timings until the command's end.
    pub bench: Option<(Vec<u8>, Timings)>,
}

/// From just before the record's start is sent: until the collector
/// confirmed it, until the command ended, until the record was stored
/// (benches/).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timings {
    pub begun_ns: i64,
    /// The join helper started (posix_spawn returns once it has exec'd).
    pub spawned_ns: i64,
    pub command_ns: i64,
    pub total_ns: i64,
    /// The observation came ready from the run preparer.
    pub prepared: bool,
    /// Wall clock (ns since the epoch) when the record's start was sent.
    pub start_ns: i64,
    pub before_start_ns: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_read_back() {
        for tag in [FromPreparer::Ready, FromPreparer::NoneReady, FromPreparer::Fate] {
            assert_eq!(FromPreparer::read(&message(tag as u8, b"x")), Some((tag, &b"x"[..])));
        }
        for tag in [ToPreparer::Again, ToPreparer::Handover] {
            assert_eq!(ToPreparer::read(&message(tag as u8, b"")), Some((tag, &b""[..])));
        }
        assert_eq!(FromPreparer::read(b"A"), None);
        assert_eq!(ToPreparer::read(b"R1 2"), None);
    }

    #[test]
    fn a_ready_answer_carries_both_pids() {
        let msg = ready(41, 42);
        assert_eq!(msg, b"R41 42");
        let (tag, body) = FromPreparer::read(&msg).unwrap();
        assert_eq!((tag, read_ready(body)), (FromPreparer::Ready, Some((41, 42))));
        assert_eq!(read_ready(b"41"), None);
        assert_eq!(read_ready(b"41 x"), None);
        assert_eq!(read_ready(b"41 42 43"), None);
    }
}
