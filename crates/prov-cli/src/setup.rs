//! Everything `prov run` (and `prov doctor`) must know before observing:
//! the user's locations and configuration, and whether the helper can work.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use prov_collect::protocol::Settings;
use prov_model::paths::Locations;
use prov_model::{Access, Config};

/// How long a collector waits for a locked database before spooling.
const BUSY_TIMEOUT_MS: u64 = 2000;

pub struct UserSetup {
    pub locations: Locations,
    pub config: Config,
}

impl UserSetup {
    pub fn load() -> Result<UserSetup> {
        let locations = Locations::from_env().map_err(|e| anyhow!(e))?;
        let config = Config::load(&locations.config_file())?;
        Ok(UserSetup { locations, config })
    }

    pub fn database(&self) -> PathBuf {
        self.config.database_path(&self.locations)
    }

    pub fn settings(&self) -> Settings {
        let home = &self.locations.home;
        let database = self.database();
        let mut private_paths = vec![self.locations.state_dir.clone(), self.locations.data_dir.clone()];
        if let Some(dir) = database.parent() {
            private_paths.push(dir.to_owned());
        }
        private_paths.extend(installation_files());
        Settings {
            spool_dir: self.locations.spool_dir(),
            database,
            hash: self.config.hash.params(),
            read: self.config.resolved_filter(Access::Read, home),
            write: self.config.resolved_filter(Access::Write, home),
            private_paths,
            busy_timeout_ms: BUSY_TIMEOUT_MS,
            archive: self.config.archive.clone(),
        }
    }
}

/// prov's own executables and libraries, as the kernel names them.
fn installation_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        let prefix = exe.parent().and_then(Path::parent).map(Path::to_path_buf);
        files.push(exe);
        if let Some(prefix) = prefix {
            files.push(prefix.join("libexec/prov"));
            files.push(prefix.join("lib/prov"));
        }
    }
    if let Ok(helper) = helper_path() {
        files.extend(helper.parent().map(Path::to_path_buf));
    }
    files.into_iter().filter_map(|p| std::fs::canonicalize(p).ok()).collect()
}

/// The installed helper: `$PROV_HELPER`, or `../libexec/prov/prov-helper`
/// relative to this executable (the layout packaging/install.sh creates).
pub fn helper_path() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("PROV_HELPER") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("cannot find the prov executable")?;
    let bin_dir = exe.parent().unwrap_or(Path::new("/"));
    Ok(bin_dir.join("../libexec/prov/prov-helper"))
}

/// Why tracing cannot work here, if it cannot; checked before trying so the
/// user reads a cause, not a symptom.
pub fn tracing_unavailable(helper: &Path) -> Option<String> {
    let meta = match std::fs::metadata(helper) {
        Ok(m) => m,
        Err(_) => return Some(format!("helper {} not found (run packaging/install.sh)", helper.display())),
    };
    if meta.uid() != 0 || meta.mode() & libc::S_ISUID == 0 {
        return Some(format!("helper {} is not setuid root (run packaging/install.sh as root)", helper.display()));
    }
    if nix::sys::statvfs::statvfs(helper).is_ok_and(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_NOSUID)) {
        return Some(format!("helper {} is on a filesystem mounted nosuid", helper.display()));
    }
    if crate::spawn::no_new_privs() {
        return Some("no_new_privs is set for this process, so setuid programs cannot gain privilege".into());
    }
    if !Path::new("/proc/sys/fs/fanotify").exists() {
        return Some("this kernel has no fanotify".into());
    }
    None
}

pub fn host_name() -> String {
    nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok()).unwrap_or_default()
}

pub fn user_name() -> String {
    let uid = nix::unistd::getuid();
    nix::unistd::User::from_uid(uid).ok().flatten().map(|u| u.name).unwrap_or_else(|| uid.to_string())
}
