//! Messages between `prov` (the CLI or, later, the shell shim) and the
//! collector over the SOCK_SEQPACKET control socket: one JSON object per
//! datagram. The helper itself only ever sends one raw message: `E` followed
//! by a one-line error, when it cannot set up an observation.

use std::path::PathBuf;

use prov_model::config::{ArchiveConfig, PathFilter};
use prov_model::env::EnvConfig;
use prov_model::redact::RedactConfig;
use prov_model::{CommandBegin, CommandEnd, Completeness, HashParams};
use serde::{Deserialize, Serialize};

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
    Prepare { settings: Settings, identity: RecordIdentity },
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
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommandStart {
    pub seq: u64,
    #[serde(with = "prov_model::record::bytes_as_hex")]
    pub text: Vec<u8>,
    #[serde(with = "prov_model::record::bytes_as_hex")]
    pub cwd: Vec<u8>,
    pub start_ns: i64,
    /// A long text is not in `text` but in the memfd attached to the
    /// message, this many bytes (see `long_text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_in_fd: Option<u64>,
    /// The caller waits for `Begun` before it starts the command (`prov
    /// run`: a batch step killed with everything around it at once still
    /// leaves its record). The shell does not ask: its prompt must not wait.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub confirm: bool,
    /// The caller waits for `Watching` before it starts the command (`prov
    /// run`, which keeps the record's start itself).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ack: bool,
    /// The caller can hand the observation back for another record (`prov
    /// run` with an observation from the run preparer): a clean one is
    /// offered again with `Stored` (see `StoreReport::reusable`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reuse: bool,
    /// The caller sends `End` only once it waits anyway (the shell, at its
    /// next read of the terminal, after the prompt is drawn), and closes its
    /// tracker before. Until `End`, the collector keeps the command's end of
    /// the tracker open itself, so that the hang-up does not wake it while
    /// the shell prints its prompt (see `Observation::command_end`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub end_when_idle: bool,
    /// The environment's variables the caller took (`NAME=VALUE` entries
    /// each ending in a NUL), not yet selected nor redacted: the
    /// collector applies `[env]` and `[redact]`. None: not captured.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "prov_model::record::opt_bytes_as_hex")]
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

/// Tag of the helper's error datagram.
pub const HELPER_ERROR_TAG: u8 = b'E';
/// Tag of a join helper's report on the tracker socket: a setuid/setgid
/// program (path follows) ran outside the observation.
pub const UNOBSERVED_TAG: u8 = b'U';
/// Tag of a join helper's report on the tracker socket: the program could
/// not enter the observation and runs untraced (the reason follows).
pub const UNTRACED_TAG: u8 = b'X';
/// Tag of a join helper's report on the tracker socket: the seccomp listener
/// of the program's namespace filter is attached (see nested_namespaces).
pub const NAMESPACE_LISTENER_TAG: u8 = b'S';
/// Tag of a join helper's report on the tracker socket: the program carries
/// an enclosing observation's namespace filter, which notes its calls.
pub const ENCLOSED_TAG: u8 = b'N';
/// Tag of a join helper's report on the tracker socket: the program's
/// namespace calls cannot be watched (the reason follows).
pub const UNWATCHED_TAG: u8 = b'W';
