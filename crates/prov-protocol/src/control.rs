//! Messages between `prov` (the CLI, `prov __prepare`) or the shell shim
//! and the collector over the SOCK_SEQPACKET control socket: one JSON
//! object per datagram. The helper itself only ever sends one raw message
//! there, its error (`helper::ERROR_TAG`). The shim writes `Begin` and
//! `End` and reads `Stored` in C (preload/shim_messages.h,
//! preload/shim_parse.h): the `shim` test checks those against these types.

use std::path::PathBuf;

use prov_model::config::{ArchiveConfig, PathFilter};
use prov_model::env::EnvConfig;
use prov_model::redact::RedactConfig;
use prov_model::{CommandBegin, CommandEnd, Completeness, HashParams};
use serde::{Deserialize, Serialize};

use crate::begin_wire::StartOnTheWire;
pub use crate::begin_wire::{BeginAnswer, EndSent};

/// Collector → caller.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ToCaller {
    /// Sent once, with two descriptors attached: the observed namespace's
    /// root directory and the tracker socket every process of the command
    /// must inherit (its hang-up ends the observation).
    Ready { holder_pid: i32, unmarked_mounts: u32, reports_fd_errors: bool },
    /// Answer to `End`: everything up to the end of the command is stored
    /// (or spooled). When `reusable`, a new tracker is attached: the
    /// observation may take another record (`Prepare`, `Begin`, `End` again
    /// on the same control socket), whose command must hold that tracker.
    Stored(StoreReport),
    /// Answer to a `Begin` that asked to be confirmed: the record's start is
    /// stored (or spooled).
    Begun,
    /// Answer to a `Begin` that asked to be acknowledged: the collector has
    /// the settings and the record and resolves events as they come (the
    /// arguments of a process that lives a millisecond need that), without
    /// waiting for the writer.
    Watching,
}

/// Caller → collector, in this order: `Prepare` (may be sent long before the
/// command starts: the shell prepares the next observation while the prompt
/// idles), `Begin` when the command starts, `End` when its own process has
/// finished.
// Boxing `Settings` would buy nothing: one message of each kind per command,
// decoded from a datagram and consumed at once, never stored in bulk.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ToCollector {
    /// `version`: the caller's [`crate::VERSION`]; a collector of another
    /// version ends the observation instead of misreading what follows.
    Prepare {
        version: u32,
        settings: Settings,
        identity: RecordIdentity,
    },
    Begin(CommandStart),
    End(CommandEnd),
}

/// The parts of a record known before the command is typed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordIdentity {
    pub uuid: String,
    pub session: String,
    pub host: String,
    pub user: String,
    pub shell: String,
}

/// The parts known when it starts. Byte strings are hex (see prov_model).
/// On the wire, what the caller waits for and when it ends are the flags
/// the shim writes (`confirm`, `ack`, `reuse`, `end_when_idle`); here they
/// are states, and a message with both `confirm` and `ack` is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "StartOnTheWire", into = "StartOnTheWire")]
pub struct CommandStart {
    pub seq: u64,
    pub text: Vec<u8>,
    pub cwd: Vec<u8>,
    pub start_ns: i64,
    /// A long text is not in `text` but in the memfd attached to the
    /// message, this many bytes (see `long_text`).
    pub text_in_fd: Option<u64>,
    /// What the caller waits for before it starts the command.
    pub awaits: BeginAnswer,
    /// The caller can hand the observation back for another record (`prov
    /// run` with an observation from the run preparer, the shell): a clean
    /// one is offered again with `Stored` (see `StoreReport::reusable`).
    pub reuse: bool,
    /// When the caller sends `End`.
    pub end: EndSent,
    /// The environment's variables the caller took (`NAME=VALUE` entries
    /// each ending in a NUL), not yet selected nor redacted: the
    /// collector applies `[env]` and `[redact]`. None: not captured.
    pub env: Option<Vec<u8>>,
}

impl RecordIdentity {
    pub fn begin(self, start: CommandStart) -> CommandBegin {
        CommandBegin {
            uuid: self.uuid,
            session: self.session,
            seq: start.seq,
            text: start.text,
            cwd: start.cwd,
            host: self.host,
            user: self.user,
            shell: self.shell,
            start_ns: start.start_ns,
            env: start.env.map(|vars| Box::new(prov_model::env::Environment { vars, git: None })),
        }
    }
}

/// What the collector needs of the user's configuration; resolved by the
/// caller, which reports configuration errors to the user.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    pub database: PathBuf,
    pub spool_dir: PathBuf,
    pub hash: HashParams,
    pub read: PathFilter,
    pub write: PathFilter,
    /// prov's own files and directories (data, state, the installation):
    /// never recorded. The shell's observations would otherwise see prov's
    /// own processes (preparer, helper, collector) exit.
    pub private_paths: Vec<PathBuf>,
    pub busy_timeout_ms: u64,
    /// Which read files' contents are kept (see `resolve::Resolver::archive`).
    pub archive: ArchiveConfig,
    /// Which secrets are taken out of the command text before it is stored.
    #[serde(default)]
    pub redact: RedactConfig,
    /// Which environment variables are recorded.
    #[serde(default)]
    pub env: EnvConfig,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StoreReport {
    pub events: u64,
    pub completeness: Completeness,
    /// Why the record went to the spool instead of the database.
    pub spooled: Option<String>,
    /// Why (part of) the record could not be kept at all.
    pub lost: Option<String>,
    /// The fallback spool the record waits in: neither the database nor
    /// the spool could be written (`spooled` names both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// CPU time (user + system) the collector and its writer used so far,
    /// for benchmarks.
    #[serde(default)]
    pub collector_cpu_ns: u64,
    /// The namespace was clean at the end (the command's last process gone,
    /// no mount came or went) and the collector waits for another record; a
    /// new tracker came with the answer.
    #[serde(default)]
    pub reusable: bool,
}
