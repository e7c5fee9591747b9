//! Why a collector stops early. Each ends the observation; the caller is
//! told through the control socket's hang-up, the user through one line.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum CollectorError {
    #[error("is started by prov-helper only: {0}")]
    Handover(io::Error),
    #[error("cannot reach the caller: {0}")]
    Caller(io::Error),
    #[error("poll: {0}")]
    Poll(nix::errno::Errno),
    #[error("reading fanotify events: {0}")]
    Events(io::Error),
    #[error("unexpected control message: {0}")]
    Protocol(&'static str),
}
