//! What one observed command produces: its description, the file events of
//! it and its descendants, and counters of everything that could not be
//! recorded. These travel from the collector to the store (and through the
//! spool), so they are serde types.

use serde::{Deserialize, Serialize};

use crate::env::{EnvConfig, Environment};
use crate::hash::HashParams;
use crate::redact::Redactor;

/// How a file was closed. The kernel reports FAN_CLOSE_WRITE when the file
/// had been opened for writing, whether or not anything was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    Read,
    Write,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }
}

/// One file closed by the command or one of its descendants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEvent {
    pub access: Access,
    /// Absolute path as raw bytes (file names need not be UTF-8).
    #[serde(with = "bytes_as_hex")]
    pub path: Vec<u8>,
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch (UTC).
    pub mtime_ns: i64,
    /// Partial xxh3-64 content hash; `None` when the content could not be read.
    pub hash: Option<u64>,
    pub hash_params: HashParams,
    /// The process that closed the file, when the kernel told.
    pub pid: Option<u32>,
}

/// One program image that ran inside the command: a process from its exec
/// (or, for a process that never exec'd in it, from its first event) to its
/// next exec or exit. Stored once per image, not per event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    pub pid: u32,
    /// The parent's pid, when it could be read.
    pub ppid: Option<u32>,
    /// The file that was executed (a script, not its interpreter); empty
    /// when unknown or not shown (the user may not read it).
    #[serde(with = "bytes_as_hex")]
    pub exe: Vec<u8>,
    /// The arguments as in /proc/PID/cmdline: each ends with a NUL. Only
    /// meaningful when `unknown` is None.
    #[serde(with = "bytes_as_hex")]
    pub args: Vec<u8>,
    /// The working directory when it was read; empty when unknown.
    #[serde(with = "bytes_as_hex")]
    pub cwd: Vec<u8>,
    /// Why the arguments are unknown (the process was gone before they could
    /// be read, it belongs to another user, ...); None when they were read.
    pub unknown: Option<String>,
    /// When the exec (or first event) was seen, nanoseconds since the epoch.
    pub start_ns: i64,
    /// When the image ended (exit or next exec), where known.
    pub end_ns: Option<i64>,
    /// How many of the command's file events came before this image was
    /// seen: the command's events of `pid` from this index on, up to the
    /// next image of the same pid, are this image's.
    pub first_event: u64,
    /// The executed file as it was when it ran; None: not known.
    #[serde(default)]
    pub exe_file: Option<ExeFile>,
}

/// The executed file of a process image: which version of the program ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExeFile {
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch (UTC).
    pub mtime_ns: i64,
    /// Partial content hash (see `hash`); None: its content could not be read.
    pub hash: Option<u64>,
    pub hash_params: HashParams,
}

impl ProcessRecord {
    /// The arguments, when known.
    pub fn argv(&self) -> Option<Vec<&[u8]>> {
        if self.unknown.is_some() {
            return None;
        }
        let body = self.args.strip_suffix(b"\0").unwrap_or(&self.args);
        Some(if body.is_empty() { Vec::new() } else { body.split(|&b| b == 0).collect() })
    }
}

/// The whole content of a file a command read, kept by the script archive
/// (see `[archive]` in the configuration). Its read event is the command's
/// read of `path` with the same size and mtime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchivedRead {
    #[serde(with = "bytes_as_hex")]
    pub path: Vec<u8>,
    /// `st_mode` permission bits (07777).
    pub mode: u32,
    pub mtime_ns: i64,
    #[serde(with = "bytes_as_hex")]
    pub content: Vec<u8>,
}

/// Known when a command starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandBegin {
    /// Unique id of the record (UUIDv7 text); lets a spooled record be
    /// ingested exactly once.
    pub uuid: String,
    /// Shell session (or `prov run` invocation) the command belongs to.
    pub session: String,
    /// Sequence number of the command within its session.
    pub seq: u64,
    /// Command text as typed / as given to `prov run`, raw bytes.
    #[serde(with = "bytes_as_hex")]
    pub text: Vec<u8>,
    #[serde(with = "bytes_as_hex")]
    pub cwd: Vec<u8>,
    pub host: String,
    pub user: String,
    /// `bash`, `zsh` or `run` (for `prov run`).
    pub shell: String,
    /// Nanoseconds since the Unix epoch (UTC).
    pub start_ns: i64,
    /// The environment it ran in; None: not captured (an older shim or
    /// spool file). As sent by the shell or `prov run` its variables are
    /// not yet selected nor redacted: see `CommandBegin::redacted`.
    /// Boxed: most messages of the pipe to the writer are not starts.
    #[serde(default)]
    pub env: Option<Box<Environment>>,
}

impl CommandBegin {
    /// The start as it may be stored: secrets taken out of the text and
    /// the environment's values, and only the variables `[env]` records.
    pub fn redacted(&self, redactor: &Redactor, env: &EnvConfig) -> CommandBegin {
        CommandBegin {
            text: redactor.redact(&self.text),
            env: self.env.as_ref().map(|e| {
                Box::new(Environment { vars: Environment::select(&e.vars, env, redactor), git: e.git.clone() })
            }),
            ..self.clone()
        }
    }
}

/// Known when the command's own process has finished, or, when whoever
/// knew that is gone, when the last process of the command is.
/// (Every field is always serialized, `null` when unknown: binary formats
/// have no optional fields. `default` lets older spool files be read.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandEnd {
    pub end_ns: i64,
    /// Exit status as a shell reports it: the exit code, or 128+N when the
    /// command was killed by signal N. `None`: unknown (the process that
    /// waited for the command died first).
    pub exit_status: Option<i32>,
    /// The command text, when it was not known at the start (bash learns it
    /// from its history list after the command ran).
    #[serde(default, with = "opt_bytes_as_hex")]
    pub text: Option<Vec<u8>>,
    /// Why the record is not all the observation would have seen, and who
    /// ended it instead ("collector killed by SIGKILL; prov run stored the
    /// end"). `None`: ended normally.
    #[serde(default)]
    pub incomplete: Option<String>,
    /// Why the command ran (partly) outside any observation: no file it
    /// touched there is recorded. `None`: traced.
    #[serde(default)]
    pub untraced: Option<String>,
}

impl CommandEnd {
    /// An end as the command's own process reported it.
    pub fn with_status(end_ns: i64, exit_status: i32) -> CommandEnd {
        CommandEnd { end_ns, exit_status: Some(exit_status), text: None, incomplete: None, untraced: None }
    }
}

pub mod opt_bytes_as_hex {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(bytes: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        bytes.as_ref().map(|b| super::bytes_as_hex::Bytes(b)).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        Ok(Option::<super::bytes_as_hex::ByteBuf>::deserialize(d)?.map(|b| b.0))
    }
}

/// How the collector's reason for mount namespaces made inside a command
/// ends (it goes in `CommandEnd::incomplete`): tells such a record from one
/// that ended short.
pub const NESTED_NAMESPACES_REASON_END: &str = ": files used there were not seen";
/// How that reason ends when every such namespace was followed (its mounts
/// marked as soon as it existed, and each new one as it appeared): its
/// files are in the record, but what was done there before the marks
/// landed is not.
pub const NESTED_NAMESPACES_FOLLOWED_END: &str = ": files used there before prov's marks reached them may be missing";

/// Everything that kept a record from being complete. A record is complete
/// when all counters are zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completeness {
    /// FAN_Q_OVERFLOW events seen: the kernel dropped at least this many events.
    pub queue_overflows: u64,
    /// Events whose file the kernel could not open for us (FAN_REPORT_FD_ERROR),
    /// or whose path or metadata vanished before they could be read.
    pub unreadable: u64,
    /// Events dropped because the user may not read the file (a privileged
    /// descendant touched it).
    pub denied: u64,
    /// Read events dropped because the per-command read limit was reached.
    pub dropped_read_limit: u64,
    /// Write events dropped because the per-command write limit was reached.
    pub dropped_write_limit: u64,
    /// Programs that ran outside the observation (setuid/setgid executables).
    pub unobserved_setuid: u64,
    /// Mounts of the namespace that could not be marked (e.g. user FUSE mounts).
    pub unmarked_mounts: u64,
    /// Calls by which a process of the command made or entered another mount
    /// namespace (`unshare -m`, bwrap, Apptainer, podman, nsenter): the
    /// observation's marks do not reach there, so its files were not seen.
    #[serde(default)]
    pub nested_namespaces: u64,
}

impl Completeness {
    pub fn is_complete(&self) -> bool {
        self.reasons().is_empty()
    }

    /// Non-zero counters as (name, count), in a fixed order, for output.
    pub fn reasons(&self) -> Vec<(&'static str, u64)> {
        [
            ("queue_overflows", self.queue_overflows),
            ("unreadable", self.unreadable),
            ("denied", self.denied),
            ("dropped_read_limit", self.dropped_read_limit),
            ("dropped_write_limit", self.dropped_write_limit),
            ("unobserved_setuid", self.unobserved_setuid),
            ("unmarked_mounts", self.unmarked_mounts),
            ("nested_namespaces", self.nested_namespaces),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect()
    }

    pub fn add(&mut self, other: &Completeness) {
        self.queue_overflows += other.queue_overflows;
        self.unreadable += other.unreadable;
        self.denied += other.denied;
        self.dropped_read_limit += other.dropped_read_limit;
        self.dropped_write_limit += other.dropped_write_limit;
        self.unobserved_setuid += other.unobserved_setuid;
        self.unmarked_mounts += other.unmarked_mounts;
        self.nested_namespaces += other.nested_namespaces;
    }
}

/// Raw bytes as a lowercase hex string in human-readable serde formats
/// (spool, JSON IPC): JSON strings cannot carry non-UTF-8 bytes. Binary
/// formats (the writer pipe) get the bytes as they are.
pub mod bytes_as_hex {
    use std::fmt;

    use serde::de::{Error, Visitor};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn encode(bytes: &[u8]) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(bytes.len() * 2);
        for b in bytes {
            s.push(DIGITS[usize::from(b >> 4)] as char);
            s.push(DIGITS[usize::from(b & 15)] as char);
        }
        s
    }

    pub fn decode(s: &str) -> Option<Vec<u8>> {
        if !s.len().is_multiple_of(2) {
            return None;
        }
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
    }

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        Bytes(bytes).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        ByteBuf::deserialize(d).map(|b| b.0)
    }

    /// Bytes to serialize (hex or raw, by format).
    pub(crate) struct Bytes<'a>(pub &'a [u8]);

    impl Serialize for Bytes<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            if s.is_human_readable() {
                s.serialize_str(&encode(self.0))
            } else {
                s.serialize_bytes(self.0)
            }
        }
    }

    /// Bytes deserialized (from hex or raw, by format).
    pub(crate) struct ByteBuf(pub Vec<u8>);

    impl<'de> Deserialize<'de> for ByteBuf {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            if d.is_human_readable() {
                let s = String::deserialize(d)?;
                decode(&s).map(ByteBuf).ok_or_else(|| D::Error::custom("invalid hex byte string"))
            } else {
                d.deserialize_byte_buf(RawBytes)
            }
        }
    }

    struct RawBytes;

    impl Visitor<'_> for RawBytes {
        type Value = ByteBuf;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a byte string")
        }

        fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<ByteBuf, E> {
            Ok(ByteBuf(v.to_vec()))
        }

        fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<ByteBuf, E> {
            Ok(ByteBuf(v))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_utf8_paths_survive_json() {
        let ev = FileEvent {
            access: Access::Write,
            path: b"/tmp/\xff\xfe name\n".to_vec(),
            size: 3,
            mtime_ns: -5,
            hash: Some(u64::MAX),
            hash_params: HashParams::default(),
            pid: None,
        };
        let json = serde_json::to_string(&ev).unwrap();
        assert_eq!(serde_json::from_str::<FileEvent>(&json).unwrap(), ev);
    }

    #[test]
    fn completeness_lists_only_nonzero_reasons() {
        let c = Completeness { denied: 2, unobserved_setuid: 1, ..Default::default() };
        assert!(!c.is_complete());
        assert_eq!(c.reasons(), vec![("denied", 2), ("unobserved_setuid", 1)]);
        assert!(Completeness::default().is_complete());
    }
}
