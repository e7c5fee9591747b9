//! The shell shim ↔ `prov __prepare SESSION SHELL VERSION`, on the
//! socketpair the shim starts it with (its fd 3), SOCK_SEQPACKET. The shim
//! (preload/, in C) writes its side by hand in preload/shim_messages.h and
//! reads the answers in preload/shim_parse.h; the `shim` test checks both
//! against these definitions.
//!
//! The shim asks with a one-byte [`Request`]; `prov __prepare` answers
//! [`Answer::Ready`] (with the control socket, namespace root and tracker
//! attached) or [`Answer::Refused`]. Between requests the shim sends the
//! start and end of each command it ran without an observation, and the
//! end of one whose collector did not store it ([`FromShim`], JSON).

use serde::{Deserialize, Serialize};

use crate::control::CommandStart;

/// Shim → `prov __prepare`: one byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Request {
    /// Prepare the next observation.
    Prepare = b'P',
    /// Take this observation back for another record and hand it out
    /// again (control socket, namespace root and the collector's new
    /// tracker attached).
    Again = b'A',
}

impl Request {
    /// The request a message is, if it is one.
    pub fn read(msg: &[u8]) -> Option<Request> {
        match msg {
            [b'P'] => Some(Request::Prepare),
            [b'A'] => Some(Request::Again),
            _ => None,
        }
    }
}

/// `prov __prepare` → shim: a tag and what follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Answer {
    /// `R<holder pid>[ skip-space] took=MS wait=MS` ([`ready`]).
    Ready = b'R',
    /// `E<one-line reason>`: no observation; the shim prints the reason.
    Refused = b'E',
}

/// What the shim needs of a ready observation: its holder, whether
/// space-prefixed lines are skipped, how long preparing took, how long the
/// shim may wait for the next ([shell] prepare_wait_ms) and, last, the
/// patterns of the variables it sends with Begin ([env], preload/shim_env.c).
pub fn ready(holder_pid: i32, skip_space: bool, took_ms: u64, wait_ms: u32, env_patterns: &str) -> Vec<u8> {
    let skip = if skip_space { " skip-space" } else { "" };
    format!("{}{holder_pid}{skip} took={took_ms} wait={wait_ms} env={env_patterns}", Answer::Ready as u8 as char)
        .into_bytes()
}

/// No observation, and why (one line, shown on the user's terminal).
pub fn refused(reason: &str) -> Vec<u8> {
    [&[Answer::Refused as u8], reason.as_bytes()].concat()
}

/// Why a shim that passed `version` (none: the first version, which
/// passed none) is refused, if it is.
pub fn refusal_of_shim(version: Option<u32>) -> Option<String> {
    let version = version.unwrap_or(1);
    (version != crate::VERSION).then(|| {
        format!("this shell's prov shim speaks protocol {version} and prov {}: start a new shell", crate::VERSION)
    })
}

/// Shim → `prov __prepare`, about a command without an observation or
/// whose collector did not store its end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum FromShim {
    /// The start of a command run without an observation (a long text in
    /// an attached memfd, as on the control socket).
    Begin(CommandStart),
    /// Its end.
    End {
        end_ns: i64,
        exit_status: i32,
        /// The warning the shell printed: why there was no observation.
        #[serde(with = "prov_model::record::bytes_as_hex")]
        why: Vec<u8>,
    },
    /// The end of an observed command whose collector died, or whose
    /// writer did, before it stored that end: the shell's own end time and
    /// status, with the record's control socket, which names the record.
    Orphan { end_ns: i64, exit_status: i32 },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_one_byte() {
        assert_eq!(Request::read(b"P"), Some(Request::Prepare));
        assert_eq!(Request::read(b"A"), Some(Request::Again));
        assert_eq!(Request::read(b"PA"), None);
        assert_eq!(Request::read(b""), None);
    }

    #[test]
    fn only_a_shim_of_this_version_is_served() {
        assert_eq!(refusal_of_shim(Some(crate::VERSION)), None);
        let why = refusal_of_shim(Some(crate::VERSION + 1)).unwrap();
        assert!(why.contains("start a new shell"), "{why}");
    }
}
