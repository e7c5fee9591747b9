//! Where prov keeps its files, following the XDG base directory spec:
//! configuration under `$XDG_CONFIG_HOME/prov`, the database under
//! `$XDG_DATA_HOME/prov`, the spool under `$XDG_STATE_HOME/prov`.

use std::env;
use std::path::PathBuf;

/// The user's XDG locations, resolved once from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locations {
    pub home: PathBuf,
    pub config_dir: PathBuf,
    pub data_dir: PathBuf,
    pub state_dir: PathBuf,
}

impl Locations {
    /// Resolves from `HOME` and the `XDG_*_HOME` variables. Relative XDG
    /// values are ignored, as the spec demands.
    pub fn from_env() -> Result<Locations, String> {
        let home = env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .ok_or_else(|| "HOME is not set to an absolute path".to_string())?;
        let xdg = |var: &str, fallback: &str| {
            env::var_os(var)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .unwrap_or_else(|| home.join(fallback))
                .join("prov")
        };
        Ok(Locations {
            config_dir: xdg("XDG_CONFIG_HOME", ".config"),
            data_dir: xdg("XDG_DATA_HOME", ".local/share"),
            state_dir: xdg("XDG_STATE_HOME", ".local/state"),
            home,
        })
    }

    pub fn config_file(&self) -> PathBuf {
        self.config_dir.join("config.toml")
    }

    pub fn default_database(&self) -> PathBuf {
        self.data_dir.join("prov.db")
    }

    /// Records that could not be written to the database wait here.
    pub fn spool_dir(&self) -> PathBuf {
        self.state_dir.join("spool")
    }

    /// What collectors could not do (a record spooled or lost, a collector
    /// that stopped early): they run detached, with nowhere else to say it.
    pub fn collector_log(&self) -> PathBuf {
        collector_log_beside(&self.spool_dir())
    }
}

/// The collector log of the state directory holding `spool_dir` (the
/// collector knows only its settings' spool directory).
pub fn collector_log_beside(spool_dir: &std::path::Path) -> PathBuf {
    spool_dir.parent().unwrap_or(spool_dir).join("collector.log")
}
