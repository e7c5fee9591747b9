//! The environment a command ran in: the variables that decide results
//! (search paths, the Python or Conda environment, loaded modules, the batch
//! job, threads, locale), selected by `[env]`, with secrets redacted, and the
//! state of the git repository of its working directory. Stored once per
//! distinct environment; each command refers to its own.

use serde::{de, Deserialize, Deserializer, Serialize};

use crate::redact::Redactor;

/// The variables recorded unless `[env] defaults = false`: a name, or a
/// prefix ending in `*`. Kept in step with config.default.toml and
/// docs/reference.md.
pub const DEFAULT_KEEP: &[&str] = &[
    "PATH",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "LOADEDMODULES",
    "_LMFILES_",
    "MODULEPATH",
    "SLURM_*",
    "PBS_*",
    "SGE_*",
    "JOB_ID",
    "JOB_NAME",
    "NSLOTS",
    "OMP_NUM_THREADS",
    "LANG",
    "LC_*",
    "TZ",
];

/// A variable name, or a prefix ending in `*` (`*` alone: every variable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvPattern(pub String);

impl EnvPattern {
    pub fn matches(&self, name: &[u8]) -> bool {
        match self.0.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix.as_bytes()),
            None => name == self.0.as_bytes(),
        }
    }
}

impl<'de> Deserialize<'de> for EnvPattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let name = s.strip_suffix('*').unwrap_or(&s);
        if name.contains('*') {
            return Err(de::Error::custom(format!("{s:?}: `*` may only end a pattern (a prefix)")));
        }
        let bad = |b: u8| b == b'=' || b == b',' || b == 0 || b.is_ascii_whitespace() || b.is_ascii_control();
        if name.bytes().any(bad) || s.is_empty() {
            return Err(de::Error::custom(format!("{s:?} is not a variable name or a prefix ending in `*`")));
        }
        Ok(EnvPattern(s))
    }
}

/// `[env]` in the configuration (see config.default.toml).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EnvConfig {
    /// Record the variables of `DEFAULT_KEEP`.
    pub defaults: bool,
    /// More variables to record.
    pub keep: Vec<EnvPattern>,
    /// Variables never recorded, whatever selected them.
    pub drop: Vec<EnvPattern>,
}

impl Default for EnvConfig {
    fn default() -> Self {
        EnvConfig { defaults: true, keep: Vec::new(), drop: Vec::new() }
    }
}

impl EnvConfig {
    /// The patterns that select a variable, before `drop`.
    pub fn selecting(&self) -> Vec<EnvPattern> {
        let defaults = DEFAULT_KEEP.iter().filter(|_| self.defaults).map(|p| EnvPattern(p.to_string()));
        defaults.chain(self.keep.iter().cloned()).collect()
    }

    pub fn records(&self, name: &[u8]) -> bool {
        let selected = (self.defaults && DEFAULT_KEEP.iter().any(|p| EnvPattern(p.to_string()).matches(name)))
            || self.keep.iter().any(|p| p.matches(name));
        selected && !self.drop.iter().any(|p| p.matches(name))
    }

    /// The selecting patterns as the shell's shim takes them: separated by
    /// commas (no pattern holds one, nor a space).
    pub fn shim_patterns(&self) -> String {
        self.selecting().iter().map(|p| p.0.as_str()).collect::<Vec<_>>().join(",")
    }
}

/// The state of the git repository a command's working directory is in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitState {
    /// The work tree's top directory, raw bytes.
    #[serde(with = "crate::record::bytes_as_hex")]
    pub root: Vec<u8>,
    /// The commit checked out (hex); None: none yet (a new repository) or
    /// unreadable.
    pub commit: Option<String>,
    /// The branch checked out; None: a detached HEAD.
    pub branch: Option<String>,
    /// Whether a tracked file differs from the index (see git_state in
    /// prov-collect); None: not known.
    pub dirty: Option<bool>,
}

impl GitState {
    /// One line for people: the root, the commit (or "no commit yet"),
    /// the branch and `dirty`, `clean` or `dirty state unknown`.
    pub fn summary(&self) -> String {
        let commit = self.commit.as_deref().map_or("no commit yet".to_string(), |c| c.chars().take(12).collect());
        let branch = self.branch.as_deref().map_or(" (detached)".to_string(), |b| format!(" ({b})"));
        let dirty = match self.dirty {
            Some(true) => "dirty",
            Some(false) => "clean",
            None => "dirty state unknown",
        };
        format!("{} {commit}{branch}, {dirty}", crate::escape::escape(&self.root))
    }
}

/// What a command's environment holds: variables (sorted by name, values
/// redacted) and the repository state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    /// `NAME=VALUE` entries, each ending in a NUL, sorted by name.
    #[serde(with = "crate::record::bytes_as_hex")]
    pub vars: Vec<u8>,
    pub git: Option<GitState>,
}

impl Environment {
    /// The variables of `raw` (`NAME=VALUE` entries each ending in a NUL,
    /// as the shim and `prov run` send them) that `config` records, each
    /// redacted as a command text would be, sorted by name; a name seen
    /// twice keeps its first value, as getenv does.
    pub fn select(raw: &[u8], config: &EnvConfig, redactor: &Redactor) -> Vec<u8> {
        let mut kept: Vec<(&[u8], Vec<u8>)> = Vec::new();
        for entry in raw.split(|&b| b == 0).filter(|e| !e.is_empty()) {
            let Some(eq) = entry.iter().position(|&b| b == b'=') else { continue };
            let name = &entry[..eq];
            if name.is_empty() || !config.records(name) || kept.iter().any(|(n, _)| *n == name) {
                continue;
            }
            kept.push((name, redact_entry(entry, eq, redactor)));
        }
        kept.sort_by(|a, b| a.0.cmp(b.0));
        let mut out = Vec::with_capacity(kept.iter().map(|(_, e)| e.len() + 1).sum());
        for (_, entry) in kept {
            out.extend_from_slice(&entry);
            out.push(0);
        }
        out
    }

    /// (name, value) pairs.
    pub fn pairs(&self) -> Vec<(&[u8], &[u8])> {
        pairs(&self.vars)
    }

    /// The value of `name`, when recorded.
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.pairs().into_iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// What identifies it in the store: an xxh3-128 of every part, each
    /// length-prefixed so that no two environments share an encoding.
    pub fn digest(&self) -> [u8; 16] {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        let mut part = |bytes: Option<&[u8]>| {
            match bytes {
                Some(b) => {
                    h.update(&(b.len() as u64).to_le_bytes());
                    h.update(b);
                }
                None => h.update(&u64::MAX.to_le_bytes()),
            };
        };
        part(Some(&self.vars));
        let git = self.git.as_ref();
        part(git.map(|g| g.root.as_slice()));
        part(git.and_then(|g| g.commit.as_deref()).map(str::as_bytes));
        part(git.and_then(|g| g.branch.as_deref()).map(str::as_bytes));
        part(git.and_then(|g| g.dirty).map(|d| if d { &b"1"[..] } else { &b"0"[..] }));
        h.digest128().to_be_bytes()
    }
}

/// (name, value) pairs of `NAME=VALUE\0` entries.
pub fn pairs(vars: &[u8]) -> Vec<(&[u8], &[u8])> {
    vars.split(|&b| b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| match e.iter().position(|&b| b == b'=') {
            Some(eq) => (&e[..eq], &e[eq + 1..]),
            None => (e, &e[e.len()..]),
        })
        .collect()
}

/// `NAME=VALUE` with its secrets replaced: the entry is redacted as the
/// assignment it is (a variable named like a secret loses its value, a
/// token's shape is found in any value), and the name is kept as it was.
fn redact_entry(entry: &[u8], eq: usize, redactor: &Redactor) -> Vec<u8> {
    let redacted = redactor.redact(entry);
    if redacted == entry {
        return redacted;
    }
    let mut out = entry[..=eq].to_vec();
    match redacted.strip_prefix(&entry[..=eq]) {
        Some(value) => out.extend_from_slice(value),
        None => out.extend_from_slice(crate::redact::MARK.as_bytes()),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::RedactConfig;

    fn raw(entries: &[&str]) -> Vec<u8> {
        entries.iter().flat_map(|e| e.bytes().chain([0])).collect()
    }

    #[test]
    fn the_default_set_is_selected_and_sorted() {
        let r = Redactor::new(&RedactConfig::default());
        let got = Environment::select(
            &raw(&["TERM=xterm", "SLURM_JOB_ID=4242", "PATH=/usr/bin", "HOME=/home/u", "LC_ALL=C", "PATH=/second"]),
            &EnvConfig::default(),
            &r,
        );
        assert_eq!(got, raw(&["LC_ALL=C", "PATH=/usr/bin", "SLURM_JOB_ID=4242"]));
    }

    #[test]
    fn keep_adds_and_drop_wins() {
        let config: EnvConfig = toml::from_str("keep = ['CUDA_*', 'HOME']\ndrop = ['SLURM_TOPOLOGY_ADDR']").unwrap();
        let r = Redactor::new(&RedactConfig::default());
        let got = Environment::select(
            &raw(&["HOME=/h", "CUDA_VISIBLE_DEVICES=0", "SLURM_TOPOLOGY_ADDR=x", "SLURM_JOB_ID=1"]),
            &config,
            &r,
        );
        assert_eq!(got, raw(&["CUDA_VISIBLE_DEVICES=0", "HOME=/h", "SLURM_JOB_ID=1"]));
        let only: EnvConfig = toml::from_str("defaults = false\nkeep = ['*']\ndrop = ['HOME']").unwrap();
        assert_eq!(Environment::select(&raw(&["HOME=/h", "X=1"]), &only, &r), raw(&["X=1"]));
    }

    #[test]
    fn secrets_are_redacted_names_kept() {
        let config: EnvConfig = toml::from_str("keep = ['HF_TOKEN', 'NOTE']").unwrap();
        let r = Redactor::new(&RedactConfig::default());
        let token = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
        let got = Environment::select(&raw(&["HF_TOKEN=hf_abcdef123456", &format!("NOTE=use {token}")]), &config, &r);
        assert_eq!(got, raw(&["HF_TOKEN=[REDACTED]", "NOTE=use [REDACTED]"]));
    }

    #[test]
    fn bad_patterns_are_refused() {
        for bad in ["'A*B'", "'A=B'", "''", "'A B'"] {
            assert!(toml::from_str::<EnvConfig>(&format!("keep = [{bad}]")).is_err(), "{bad}");
        }
    }

    #[test]
    fn digests_tell_environments_apart() {
        let a = Environment { vars: raw(&["PATH=/a"]), git: None };
        let mut b = a.clone();
        assert_eq!(a.digest(), b.digest());
        b.git = Some(GitState { root: b"/r".to_vec(), commit: None, branch: None, dirty: Some(false) });
        assert_ne!(a.digest(), b.digest());
        let mut c = b.clone();
        c.git.as_mut().unwrap().dirty = Some(true);
        assert_ne!(b.digest(), c.digest());
    }
}
