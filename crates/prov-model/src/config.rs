//! `$XDG_CONFIG_HOME/prov/config.toml`. Every key, its default and why is
//! in one place, `config.default.toml` beside this crate's Cargo.toml: it is
//! embedded as [`DEFAULT_TOML`], printed by `prov config --default`, and a
//! test checks that parsing it gives [`Config::default`].
//!
//! No file is needed; an unknown key or a bad value is an error naming the line.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{de, Deserialize, Deserializer, Serialize};

use crate::env::EnvConfig;
use crate::hash::HashParams;
use crate::paths::Locations;
use crate::redact::RedactConfig;

/// The documented default configuration: every key with its default value.
pub const DEFAULT_TOML: &str = include_str!("../config.default.toml");

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub database: DatabaseConfig,
    pub hash: HashConfig,
    #[serde(deserialize_with = "read_filter")]
    pub read: EventFilter,
    #[serde(deserialize_with = "write_filter")]
    pub write: EventFilter,
    pub archive: ArchiveConfig,
    pub query: QueryConfig,
    pub report: ReportConfig,
    pub shell: ShellConfig,
    pub redact: RedactConfig,
    pub env: EnvConfig,
    pub browse: BrowseConfig,
    pub sync: SyncConfig,
}

/// The central store on PostgreSQL (see config.default.toml).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SyncConfig {
    /// libpq-style connection: a `postgresql://` URL or `key=value` words
    /// (`service=NAME` included); None: no central store.
    pub url: Option<ConnInfo>,
    /// Queries read the central store unless `--local` is given.
    pub everywhere: bool,
    /// Push finished records in the background after each command.
    pub background: bool,
}

impl Default for SyncConfig {
    fn default() -> Self {
        SyncConfig { url: None, everywhere: false, background: true }
    }
}

/// A connection string, checked only for what a config file can get wrong
/// alone (empty, several lines); the sync parses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConnInfo(pub String);

impl<'de> Deserialize<'de> for ConnInfo {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim().is_empty() {
            return Err(de::Error::custom("url is empty (leave the key out for no central store)"));
        }
        if s.contains(['\n', '\r']) {
            return Err(de::Error::custom("url must be on one line"));
        }
        Ok(ConnInfo(s))
    }
}

/// `prov browse` and its key binding (see config.default.toml).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BrowseConfig {
    pub bind_ctrl_r: bool,
}

/// The shell integration (see config.default.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShellConfig {
    pub skip_space_prefixed: bool,
    /// Milliseconds a command typed before its observation is ready waits
    /// for it, at least (the shim waits longer where preparing takes longer).
    #[serde(deserialize_with = "at_most::<60_000, _>")]
    pub prepare_wait_ms: Positive,
}

impl Default for ShellConfig {
    fn default() -> Self {
        ShellConfig { skip_space_prefixed: false, prepare_wait_ms: Positive(2000) }
    }
}

/// Defaults of `prov report` (see config.default.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReportConfig {
    pub files_per_command: Positive,
}

impl Default for ReportConfig {
    fn default() -> Self {
        // About 64 bytes of page per listed file: 200 keeps a 10 000-command
        // report at a few MB.
        ReportConfig { files_per_command: Positive(200) }
    }
}

/// Defaults of `prov query` (see config.default.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueryConfig {
    pub limit: Positive,
    pub files_shown: Positive,
}

impl Default for QueryConfig {
    fn default() -> Self {
        // A screenful of commands; enough files to see what a command did.
        QueryConfig { limit: Positive(20), files_shown: Positive(30) }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    pub path: Option<ConfigPath>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HashConfig {
    #[serde(deserialize_with = "at_most::<{ 1 << 20 }, _>")]
    pub chunk_size: Positive,
    #[serde(deserialize_with = "at_most::<1024, _>")]
    pub chunks: Positive,
}

impl Default for HashConfig {
    fn default() -> Self {
        let p = HashParams::default();
        HashConfig { chunk_size: Positive(p.chunk_size), chunks: Positive(p.chunks) }
    }
}

impl HashConfig {
    pub fn params(&self) -> HashParams {
        HashParams { chunk_size: self.chunk_size.0, chunks: self.chunks.0 }
    }
}

/// Which events of one kind (read or write) are recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventFilter {
    pub include: Vec<ConfigPath>,
    /// Added to `include` (its defaults stay).
    pub include_also: Vec<ConfigPath>,
    pub exclude: Vec<PathPattern>,
    /// Added to `exclude` (its defaults stay): the key a user means to write.
    pub exclude_also: Vec<PathPattern>,
    pub max_events: u64,
}

/// A `[read]` or `[write]` section as written: a key left out keeps that
/// section's default (a list given replaces the default list; the `_also`
/// lists add to it).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventFilterKeys {
    include: Option<Vec<ConfigPath>>,
    #[serde(default)]
    include_also: Vec<ConfigPath>,
    exclude: Option<Vec<PathPattern>>,
    #[serde(default)]
    exclude_also: Vec<PathPattern>,
    max_events: Option<u64>,
}

impl EventFilterKeys {
    fn over(self, default: EventFilter) -> EventFilter {
        EventFilter {
            include: self.include.unwrap_or(default.include),
            include_also: self.include_also,
            exclude: self.exclude.unwrap_or(default.exclude),
            exclude_also: self.exclude_also,
            max_events: self.max_events.unwrap_or(default.max_events),
        }
    }
}

fn read_filter<'de, D: Deserializer<'de>>(d: D) -> Result<EventFilter, D::Error> {
    Ok(EventFilterKeys::deserialize(d)?.over(EventFilter::default_read()))
}

fn write_filter<'de, D: Deserializer<'de>>(d: D) -> Result<EventFilter, D::Error> {
    Ok(EventFilterKeys::deserialize(d)?.over(EventFilter::default_write()))
}

/// Everything, and /dev/shm although /dev is excluded: a tmpfs that jobs
/// use for scratch data.
fn root_only() -> Vec<ConfigPath> {
    paths(&["/", "/dev/shm"])
}

fn default_max_events() -> u64 {
    200_000
}

fn paths(list: &[&str]) -> Vec<ConfigPath> {
    list.iter().map(|p| ConfigPath((*p).into())).collect()
}

fn patterns(list: &[&str]) -> Vec<PathPattern> {
    list.iter().map(|p| PathPattern((*p).into())).collect()
}

impl EventFilter {
    pub fn default_read() -> Self {
        EventFilter {
            include: root_only(),
            include_also: Vec::new(),
            exclude: patterns(&[
                "/usr",
                "/lib",
                "/lib32",
                "/lib64",
                "/libx32",
                "/bin",
                "/sbin",
                "/etc",
                "/proc",
                "/sys",
                "/dev",
                "/run",
                "/var/cache",
                "/var/lib",
                "~/.cache",
            ]),
            exclude_also: Vec::new(),
            max_events: default_max_events(),
        }
    }

    pub fn default_write() -> Self {
        EventFilter {
            include: root_only(),
            include_also: Vec::new(),
            exclude: patterns(&["/proc", "/sys", "/dev"]),
            exclude_also: Vec::new(),
            max_events: default_max_events(),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            database: DatabaseConfig::default(),
            hash: HashConfig::default(),
            read: EventFilter::default_read(),
            write: EventFilter::default_write(),
            archive: ArchiveConfig::default(),
            query: QueryConfig::default(),
            report: ReportConfig::default(),
            shell: ShellConfig::default(),
            redact: RedactConfig::default(),
            env: EnvConfig::default(),
            browse: BrowseConfig::default(),
            sync: SyncConfig::default(),
        }
    }
}

/// Which read files the script archive keeps (see config.default.toml).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArchiveConfig {
    pub enabled: bool,
    pub extensions: Vec<Extension>,
    pub names: Vec<FileName>,
    pub shebang: bool,
    pub max_size: u64,
    pub max_per_command: u32,
    /// Secrets taken out of a kept script as out of a command's text.
    pub redact: bool,
}

impl Default for ArchiveConfig {
    fn default() -> Self {
        // Interpreted languages and workflow files researchers run; compiled
        // sources (.c, .rs) are inputs of a build, not the record of a run.
        const EXTENSIONS: &[&str] = &[
            "sh", "bash", "zsh", "ksh", "fish", "py", "R", "r", "pl", "rb", "awk", "sed", "jl", "m", "lua", "tcl",
            "mk", "smk", "nf", "wdl",
        ];
        ArchiveConfig {
            enabled: true,
            extensions: EXTENSIONS.iter().map(|e| Extension((*e).into())).collect(),
            // Workflow files whose name has no extension.
            names: ["Makefile", "makefile", "GNUmakefile", "Snakefile", "justfile", "Justfile"]
                .iter()
                .map(|n| FileName((*n).into()))
                .collect(),
            shebang: true,
            // The predecessor's limit: any hand-written script fits.
            max_size: 500 * 1024,
            max_per_command: 8,
            redact: true,
        }
    }
}

impl ArchiveConfig {
    /// Whether a file named `name` (the last path component) is a script by
    /// its name or extension. The extension follows the last dot; a leading
    /// dot (`.bashrc`) starts no extension.
    pub fn matches_name(&self, name: &[u8]) -> bool {
        let by_extension = match extension(name) {
            Some(ext) => self.extensions.iter().any(|e| e.0.as_bytes() == ext),
            None => false,
        };
        by_extension || self.names.iter().any(|n| n.0.as_bytes() == name)
    }
}

/// The extension of file name `name`, if it has one.
pub fn extension(name: &[u8]) -> Option<&[u8]> {
    let dot = name.iter().rposition(|&b| b == b'.')?;
    (dot > 0 && dot + 1 < name.len()).then(|| &name[dot + 1..])
}

/// A file name (one path component).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileName(pub String);

impl<'de> Deserialize<'de> for FileName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() || s == "." || s == ".." || s.contains(['/', '\0']) {
            Err(de::Error::custom(format!("file name {s:?} must be one path component (\"Makefile\")")))
        } else {
            Ok(FileName(s))
        }
    }
}

/// A file name extension, without its dot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Extension(pub String);

impl<'de> Deserialize<'de> for Extension {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() || s.contains(['.', '/', '\0']) {
            Err(de::Error::custom(format!(
                "extension {s:?} must be a non-empty name without dots or slashes (\"sh\", not \".sh\")"
            )))
        } else {
            Ok(Extension(s))
        }
    }
}

/// A path in the configuration: absolute, or starting with `~/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigPath(pub String);

impl<'de> Deserialize<'de> for ConfigPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.starts_with('/') || s.starts_with("~/") {
            Ok(ConfigPath(s))
        } else {
            Err(de::Error::custom(format!("path {s:?} must be absolute or start with ~/")))
        }
    }
}

impl ConfigPath {
    pub fn resolve(&self, home: &Path) -> PathBuf {
        match self.0.strip_prefix("~/") {
            Some(rest) => home.join(rest),
            None => PathBuf::from(&self.0),
        }
    }
}

/// An `exclude` entry: a directory or file (absolute or `~/`, everything
/// below it), or a glob pattern (`**/.git/**`, `*.swp`, `~/proj/*.log`): `*`
/// stays within one path component, `**` crosses them, and a pattern not
/// starting with `/` or `~/` matches at any depth, as in a .gitignore.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathPattern(pub String);

impl PathPattern {
    pub fn is_glob(&self) -> bool {
        self.0.contains(['*', '?', '[', '{'])
    }

    /// The glob as matched against absolute paths.
    fn glob(&self, home: &Path) -> String {
        if let Some(rest) = self.0.strip_prefix("~/") {
            format!("{}/{rest}", home.display())
        } else if self.0.starts_with('/') || self.0.starts_with("**/") {
            self.0.clone()
        } else {
            format!("**/{}", self.0)
        }
    }
}

impl<'de> Deserialize<'de> for PathPattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let p = PathPattern(s.clone());
        if p.is_glob() {
            match glob(&p.glob(Path::new("/home/u"))) {
                Ok(_) => Ok(p),
                Err(e) => Err(de::Error::custom(format!("glob {s:?}: {e}"))),
            }
        } else if s.starts_with('/') || s.starts_with("~/") {
            Ok(p)
        } else {
            Err(de::Error::custom(format!(
                "path {s:?} must be absolute or start with ~/ (or be a glob such as \"*.swp\" or \"**/.git/**\")"
            )))
        }
    }
}

fn glob(pattern: &str) -> Result<globset::Glob, globset::Error> {
    globset::GlobBuilder::new(pattern).literal_separator(true).backslash_escape(true).build()
}

impl fmt::Display for PathPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A whole number greater than zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Positive(pub u32);

impl<'de> Deserialize<'de> for Positive {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = i64::deserialize(d)?;
        match u32::try_from(n) {
            Ok(v) if v > 0 => Ok(Positive(v)),
            _ => Err(de::Error::custom(format!("{n} is not a whole number from 1 to {}", u32::MAX))),
        }
    }
}

/// A [`Positive`] of at most `MAX`: numbers that set a wait or how much is
/// read per file, where a slip of the keyboard would stall every command.
fn at_most<'de, const MAX: u32, D: Deserializer<'de>>(d: D) -> Result<Positive, D::Error> {
    let n = i64::deserialize(d)?;
    match u32::try_from(n) {
        Ok(v) if v > 0 && v <= MAX => Ok(Positive(v)),
        _ => Err(de::Error::custom(format!("{n} is not a whole number from 1 to {MAX}"))),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Not a `source`: the message has its words already, and a chain
    /// would repeat them ("a FIFO, not a regular file: a FIFO, not …").
    #[error("cannot read {path}: {error}")]
    Read { path: PathBuf, error: std::io::Error },
    #[error("{path}:{line}: {message}")]
    Invalid { path: PathBuf, line: usize, message: String },
}

impl Config {
    /// Loads the file if it exists; a missing file means all defaults.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        match crate::small_file::read_to_string(path, crate::small_file::CONFIG_LIMIT) {
            Ok(text) => Config::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
            Err(error) => Err(ConfigError::Read { path: path.to_owned(), error }),
        }
    }

    /// For commands that only read the journal (queries, reports): a
    /// mistake in a section only tracing uses does not stop them. Returns
    /// the configuration without the tracing sections, and the error as a
    /// warning to show once.
    pub fn load_for_reading(path: &Path) -> Result<(Config, Option<ConfigError>), ConfigError> {
        let text = match crate::small_file::read_to_string(path, crate::small_file::CONFIG_LIMIT) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Config::default(), None)),
            Err(error) => return Err(ConfigError::Read { path: path.to_owned(), error }),
        };
        match Config::parse(&text, path) {
            Ok(c) => Ok((c, None)),
            Err(strict) => match Config::parse(&without_tracing_sections(&text), path) {
                Ok(c) => Ok((c, Some(strict))),
                Err(_) => Err(strict),
            },
        }
    }

    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| {
            let line = e.span().map_or(1, |span| text[..span.start].matches('\n').count() + 1);
            // toml's messages can span lines and quote a whole value; the
            // user gets one line of readable length.
            let message = crate::setting::shown_text(&e.message().trim().replace('\n', " "), MESSAGE_CHARS);
            ConfigError::Invalid { path: path.to_owned(), line, message }
        })
    }

    /// The database file this configuration selects.
    pub fn database_path(&self, loc: &Locations) -> PathBuf {
        match &self.database.path {
            Some(p) => with_host_name(p.resolve(&loc.home), &host_name()),
            None => loc.default_database(),
        }
    }

    /// The configuration with `~/` resolved, as the collector applies it.
    pub fn resolved_filter(&self, access: crate::Access, home: &Path) -> PathFilter {
        let f = match access {
            crate::Access::Read => &self.read,
            crate::Access::Write => &self.write,
        };
        let exclude = || f.exclude.iter().chain(&f.exclude_also);
        PathFilter::new(
            f.include.iter().chain(&f.include_also).map(|p| p.resolve(home)),
            exclude().filter(|p| !p.is_glob()).map(|p| ConfigPath(p.0.clone()).resolve(home)),
            f.max_events,
        )
        .with_globs(exclude().filter(|p| p.is_glob()).map(|p| p.glob(home)).collect())
    }
}

/// Longest configuration error shown: toml quotes the bad value whole.
const MESSAGE_CHARS: usize = 200;

/// `{host}` in a configured database path is this machine's host name: one
/// journal per host in a shared (NFS) home, each written by one host only.
pub const HOST_PLACEHOLDER: &str = "{host}";

fn with_host_name(path: PathBuf, host: &str) -> PathBuf {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let bytes = path.as_os_str().as_bytes();
    let marker = HOST_PLACEHOLDER.as_bytes();
    if !bytes.windows(marker.len()).any(|w| w == marker) {
        return path;
    }
    let mut out = Vec::with_capacity(bytes.len() + host.len());
    let mut rest = bytes;
    while let Some(at) = rest.windows(marker.len()).position(|w| w == marker) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(host.as_bytes());
        rest = &rest[at + marker.len()..];
    }
    out.extend_from_slice(rest);
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// This machine's host name (of its UTS namespace), as the kernel says it.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default()
}

/// The sections reading the journal needs; every other one only matters
/// when tracing.
const READING_SECTIONS: &[&str] = &["database", "query", "report", "sync"];

/// `text` with the lines of every section but [`READING_SECTIONS`] blanked
/// (kept as empty lines, so line numbers stay those of the file).
fn without_tracing_sections(text: &str) -> String {
    let mut keep = true;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if let Some(name) = section_header(line) {
            keep = READING_SECTIONS.contains(&name);
        }
        if keep {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// The name of a `[section]` header line.
pub fn section_header(line: &str) -> Option<&str> {
    let line = line.trim();
    let line = line.split_once('#').map_or(line, |(l, _)| l.trim_end());
    let name = line.strip_prefix('[')?.strip_suffix(']')?.trim();
    (!name.is_empty() && !name.starts_with('[')).then_some(name)
}

/// Decides by longest matching prefix whether a path is recorded; a path
/// matching an exclude glob is not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathFilter {
    /// (prefix bytes without trailing slash, included?), longest first.
    rules: Vec<(Vec<u8>, bool)>,
    pub max_events: u64,
    #[serde(default)]
    globs: ExcludeGlobs,
}

/// Exclude globs, sent as their patterns and compiled once on arrival.
#[derive(Clone, Default)]
pub struct ExcludeGlobs {
    patterns: Vec<String>,
    set: globset::GlobSet,
}

impl ExcludeGlobs {
    fn new(patterns: Vec<String>) -> ExcludeGlobs {
        let mut builder = globset::GlobSetBuilder::new();
        // Checked when the configuration was read; one that fails now is skipped.
        for g in patterns.iter().filter_map(|p| glob(p).ok()) {
            builder.add(g);
        }
        let set = builder.build().unwrap_or_else(|_| globset::GlobSet::empty());
        ExcludeGlobs { patterns, set }
    }
}

impl ExcludeGlobs {
    fn excludes(&self, path: &Path) -> bool {
        // Most configurations have no globs: no matching at all then.
        !self.set.is_empty() && self.set.is_match(path)
    }
}

impl PartialEq for ExcludeGlobs {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns
    }
}
impl Eq for ExcludeGlobs {}

impl fmt::Debug for ExcludeGlobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.patterns.fmt(f)
    }
}

impl Serialize for ExcludeGlobs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.patterns.serialize(s)
    }
}

impl<'de> Deserialize<'de> for ExcludeGlobs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(ExcludeGlobs::new(Vec::<String>::deserialize(d)?))
    }
}

impl PathFilter {
    pub fn new(
        include: impl IntoIterator<Item = PathBuf>,
        exclude: impl IntoIterator<Item = PathBuf>,
        max_events: u64,
    ) -> PathFilter {
        use std::os::unix::ffi::OsStrExt;
        let norm = |p: PathBuf| {
            let mut b = p.as_os_str().as_bytes().to_vec();
            while b.len() > 1 && b.ends_with(b"/") {
                b.pop();
            }
            if b == b"/" {
                b.clear();
            }
            b
        };
        let mut rules: Vec<(Vec<u8>, bool)> =
            include.into_iter().map(|p| (norm(p), true)).chain(exclude.into_iter().map(|p| (norm(p), false))).collect();
        // Longest first; on equal prefixes the exclude (false) sorts first.
        rules.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        PathFilter { rules, max_events, globs: ExcludeGlobs::default() }
    }

    /// This filter, also excluding what matches one of `patterns`.
    pub fn with_globs(self, patterns: Vec<String>) -> PathFilter {
        PathFilter { globs: ExcludeGlobs::new(patterns), ..self }
    }

    pub fn allows(&self, path: &[u8]) -> bool {
        use std::os::unix::ffi::OsStrExt;
        self.rules.iter().find(|(prefix, _)| is_within(path, prefix)).is_some_and(|(_, include)| *include)
            && !self.globs.excludes(Path::new(std::ffi::OsStr::from_bytes(path)))
    }
}

/// Whether `path` is `dir` or lies below it (raw bytes, no trailing slash
/// on `dir`; the empty `dir` is the root and contains everything).
pub fn is_within(path: &[u8], dir: &[u8]) -> bool {
    path.starts_with(dir) && (path.len() == dir.len() || path[dir.len()] == b'/')
}

impl fmt::Display for ConfigPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, String> {
        Config::parse(text, Path::new("config.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn documented_defaults_are_the_built_in_ones() {
        assert_eq!(parse(DEFAULT_TOML).unwrap(), Config::default());
    }

    #[test]
    fn empty_file_gives_defaults() {
        assert_eq!(parse("").unwrap(), Config::default());
    }

    #[test]
    fn keys_left_out_of_a_section_keep_its_defaults() {
        let c = parse("[read]\nmax_events = 100000\n[write]\ninclude = [\"~/out\"]\n").unwrap();
        let d = Config::default();
        assert_eq!(c.read.max_events, 100_000);
        assert_eq!((&c.read.include, &c.read.exclude), (&d.read.include, &d.read.exclude));
        assert_eq!(c.write.include, vec![ConfigPath("~/out".into())]);
        assert_eq!((&c.write.exclude, c.write.max_events), (&d.write.exclude, d.write.max_events));
        assert!(parse("[read]\nexclude = []\n").unwrap().read.exclude.is_empty(), "a list given replaces the default");
        assert!(parse("[write]\ninclud = []\n").unwrap_err().starts_with("config.toml:2: "));
    }

    #[test]
    fn sync_section() {
        let d = Config::default().sync;
        assert_eq!((d.url, d.everywhere, d.background), (None, false, true));
        let c = parse("[sync]\nurl = \"service=prov\"\neverywhere = true\n").unwrap();
        assert_eq!(c.sync.url, Some(ConnInfo("service=prov".into())));
        assert!(c.sync.everywhere);
        assert!(parse("[sync]\n\nurl = \"\"\n").unwrap_err().starts_with("config.toml:3: "));
        assert!(parse("[sync]\nurl = \"a\\nb\"\n").unwrap_err().contains("one line"));
        assert!(parse("[sync]\nurll = \"x\"\n").unwrap_err().starts_with("config.toml:2: "));
    }

    #[test]
    fn host_placeholder_makes_one_journal_per_host() {
        let p = with_host_name(PathBuf::from("/home/u/.local/share/prov/{host}/prov.db"), "node17");
        assert_eq!(p, PathBuf::from("/home/u/.local/share/prov/node17/prov.db"));
        assert_eq!(with_host_name(PathBuf::from("/a/b.db"), "n"), PathBuf::from("/a/b.db"));
        assert_eq!(with_host_name(PathBuf::from("/{host}/{host}.db"), "n"), PathBuf::from("/n/n.db"));
    }

    #[test]
    fn shell_section() {
        assert!(!Config::default().shell.skip_space_prefixed);
        assert!(parse("[shell]\nskip_space_prefixed = true\n").unwrap().shell.skip_space_prefixed);
        assert!(parse("[shell]\nskip_space_prefixed = 1\n").unwrap_err().starts_with("config.toml:2: "));
        assert_eq!(Config::default().shell.prepare_wait_ms, Positive(2000));
        assert_eq!(parse("[shell]\nprepare_wait_ms = 15000\n").unwrap().shell.prepare_wait_ms, Positive(15000));
        assert!(parse("[shell]\nprepare_wait_ms = 0\n").unwrap_err().starts_with("config.toml:2: "));
    }

    #[test]
    fn unknown_key_names_its_line() {
        let err = parse("[hash]\nchunks = 4\n\n[read]\nmax_event = 5\n").unwrap_err();
        assert!(err.starts_with("config.toml:5: "), "{err}");
        assert!(err.contains("max_event"), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn bad_values_name_their_line() {
        let err = parse("[hash]\nchunk_size = 0\n").unwrap_err();
        assert!(err.starts_with("config.toml:2: "), "{err}");
        let err = parse("[read]\nmax_events = 3\n[write]\nexclude = [\"/tmp\", \"relative/dir\"]\n").unwrap_err();
        assert!(err.starts_with("config.toml:4: "), "{err}");
        assert!(err.contains("must be absolute"), "{err}");
    }

    #[test]
    fn waits_and_read_sizes_have_an_upper_bound() {
        for (text, max) in [
            ("[shell]\nprepare_wait_ms = 4000000000\n", "60000"),
            ("[hash]\nchunk_size = 4294967295\n", "1048576"),
            ("[hash]\nchunks = 1025\n", "1024"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.starts_with("config.toml:2: ") && err.contains(&format!("from 1 to {max}")), "{err}");
        }
        assert_eq!(parse("[shell]\nprepare_wait_ms = 60000\n").unwrap().shell.prepare_wait_ms, Positive(60000));
    }

    #[test]
    fn a_long_bad_value_is_not_echoed_whole() {
        let err = parse(&format!("[sync]\nurl = 7{}\n", "7".repeat(1 << 20))).unwrap_err();
        assert!(err.starts_with("config.toml:2: ") && err.len() < 300, "{} bytes", err.len());
        let err = parse(&format!("[shell]\nprepare_wait_ms = \"{}\"\n", "x".repeat(1 << 20))).unwrap_err();
        assert!(err.starts_with("config.toml:2: ") && err.len() < 300, "{} bytes", err.len());
    }

    #[test]
    fn values_override_defaults() {
        let c = parse("[hash]\nchunks = 5\n[write]\nmax_events = 10\n").unwrap();
        assert_eq!(c.hash.params(), HashParams { chunk_size: 256, chunks: 5 });
        assert_eq!(c.write.max_events, 10);
        assert_eq!(c.write.include, root_only());
        assert_eq!(c.read, EventFilter::default_read());
    }

    #[test]
    fn archive_keys_are_checked() {
        let c = parse("[archive]\nextensions = [\"sh\", \"nf\"]\nmax_size = 100\n").unwrap();
        assert_eq!(c.archive.extensions, vec![Extension("sh".into()), Extension("nf".into())]);
        assert_eq!(c.archive.max_size, 100);
        assert_eq!(c.archive.max_per_command, 8);
        assert!(c.archive.enabled && c.archive.shebang);
        let err = parse("[read]\nmax_events = 3\n\n[archive]\nenabled = true\nmax_files = 3\n").unwrap_err();
        assert!(err.starts_with("config.toml:6: "), "{err}");
        assert!(err.contains("max_files"), "{err}");
        let err = parse("[archive]\nenabled = true\nextensions = [\"sh\", \".py\"]\n").unwrap_err();
        assert!(err.starts_with("config.toml:3: "), "{err}");
        assert!(err.contains("without dots"), "{err}");
        let err = parse("[archive]\nnames = [\"build/Makefile\"]\n").unwrap_err();
        assert!(err.starts_with("config.toml:2: ") && err.contains("one path component"), "{err}");
        let err = parse("[archive]\nmax_size = -1\n").unwrap_err();
        assert!(err.starts_with("config.toml:2: "), "{err}");
        let err = parse("[archive]\nenabled = \"yes\"\n").unwrap_err();
        assert!(err.starts_with("config.toml:2: "), "{err}");
    }

    #[test]
    fn scripts_by_extension_after_the_last_dot_or_by_name() {
        let a = ArchiveConfig::default();
        assert!(a.matches_name(b"job.sh"));
        assert!(a.matches_name(b"analysis.v2.R"));
        assert!(a.matches_name(b"\xff\xfe.py"));
        assert!(a.matches_name(b"Makefile"));
        assert!(a.matches_name(b"Snakefile"));
        assert!(!a.matches_name(b"Makefile.bak"));
        assert!(!a.matches_name(b"job.sh.bak"));
        assert!(!a.matches_name(b".sh"));
        assert!(!a.matches_name(b"sh"));
        assert!(!a.matches_name(b"job."));
        assert!(!a.matches_name(b"job.SH"));
        assert_eq!(extension(b".bashrc"), None);
        assert_eq!(extension(b"Makefile"), None);
    }

    #[test]
    fn reading_the_journal_survives_a_mistake_in_a_tracing_section() {
        let dir = std::env::temp_dir().join(format!("prov-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("config.toml");
        std::fs::write(&file, "[query]\nlimit = 7\n[read]\nexclud = [\"/x\"]\n[write]\nmax_events = oops\n").unwrap();
        assert!(Config::load(&file).is_err());
        let (c, warning) = Config::load_for_reading(&file).unwrap();
        assert_eq!(c.query.limit, Positive(7));
        let warning = warning.unwrap().to_string();
        // (The TOML syntax error is found before the unknown key.)
        assert!(warning.contains("config.toml:6: "), "{warning}");
        std::fs::write(&file, "[query]\nlimit = 7\n[read]\nexclud = [\"/x\"]\n").unwrap();
        let warning = Config::load_for_reading(&file).unwrap().1.unwrap().to_string();
        assert!(warning.contains("config.toml:4: ") && warning.contains("exclud"), "{warning}");
        std::fs::write(&file, "[query]\nlimit = 0\n[read]\nexclud = []\n").unwrap();
        let err = Config::load_for_reading(&file).unwrap_err().to_string();
        assert!(err.contains("config.toml:2: "), "a mistake in [query] still stops queries: {err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn also_keys_extend_the_defaults() {
        let c = parse("[read]\nexclude_also = [\"~/proj/.git\", \"**/.git/**\", \"*.swp\"]\n").unwrap();
        assert_eq!(c.read.exclude, EventFilter::default_read().exclude, "the defaults stay");
        let f = c.resolved_filter(crate::Access::Read, Path::new("/home/u"));
        assert!(!f.allows(b"/etc/ld.so.cache"), "a default exclude still applies");
        assert!(!f.allows(b"/home/u/proj/.git/HEAD"));
        assert!(!f.allows(b"/srv/other/.git/objects/ab/cdef"), "**/.git/** at any depth");
        assert!(!f.allows(b"/home/u/notes/.todo.txt.swp"), "*.swp at any depth");
        assert!(f.allows(b"/home/u/proj/data.csv"));
        assert!(f.allows(b"/home/u/proj/.gitignore"));
        assert!(f.allows(b"/home/u/proj/swp"));
        let c = parse("[write]\ninclude_also = [\"/proc/x\"]\nexclude = [\"~/tmp/*.log\"]\n").unwrap();
        let f = c.resolved_filter(crate::Access::Write, Path::new("/home/u"));
        assert!(f.allows(b"/proc/x/y") && !f.allows(b"/home/u/tmp/a.log") && f.allows(b"/home/u/tmp/sub/a.log"));
        assert!(f.allows(b"/sys/x"), "a list given replaces the default list");
    }

    #[test]
    fn bad_patterns_name_their_line() {
        let err = parse("[read]\nexclude_also = [\"**/[.git\"]\n").unwrap_err();
        assert!(err.starts_with("config.toml:2: ") && err.contains("glob"), "{err}");
        let err = parse("[read]\nexclude_also = [\"proj/.git\"]\n").unwrap_err();
        assert!(err.starts_with("config.toml:2: ") && err.contains("must be absolute"), "{err}");
        let err = parse("[redact]\npatterns = [\"(unclosed\"]\n").unwrap_err();
        assert!(err.starts_with("config.toml:2: ") && err.contains("not a regex"), "{err}");
    }

    #[test]
    fn filters_cross_the_collector_pipe_with_their_globs() {
        let c = parse("[read]\nexclude_also = [\"*.swp\"]\n").unwrap();
        let f = c.resolved_filter(crate::Access::Read, Path::new("/home/u"));
        let back: PathFilter = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(back, f);
        assert!(!back.allows(b"/home/u/a.swp") && back.allows(b"/home/u/a.txt"));
    }

    #[test]
    fn longest_prefix_decides() {
        let f = PathFilter::new(["/".into(), "/usr/local/data".into()], ["/usr".into(), "/home/u/.cache".into()], 1);
        assert!(f.allows(b"/home/u/x"));
        assert!(!f.allows(b"/usr/bin/cat"));
        assert!(f.allows(b"/usr/local/data/x.csv"));
        assert!(f.allows(b"/usrx/file"));
        assert!(!f.allows(b"/home/u/.cache/pip/x"));
        assert!(f.allows(b"/home/u/.cachex"));
        let none = PathFilter::new(Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), 1);
        assert!(!none.allows(b"/x"));
    }
}
