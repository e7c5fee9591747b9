//! The collector side of prov: the fanotify event reader, the resolution of
//! events into file records, the writer thread, and the control protocol
//! spoken with `prov` over a socket.

pub mod collector;
pub mod fanotify;
pub mod ipc;
pub mod log;
pub mod protocol;
pub mod resolve;
pub mod writer;
