//! Everything `prov run` (and `prov doctor`) must know before observing:
//! the user's locations and configuration, and whether the helper can work.

use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use prov_collect::protocol::Settings;
use prov_model::escape::escape;
use prov_model::paths::{check_private_path, Locations, NotPrivate, Problem};
use prov_model::{Access, Config};

/// How long a collector waits for a locked database before spooling.
const BUSY_TIMEOUT_MS: u64 = 2000;

pub struct UserSetup {
    pub locations: Locations,
    pub config: Config,
}

impl UserSetup {
    /// The locations and configuration. As root, only if nobody else can
    /// change where prov's files are (see [`refuse_others_directories`]).
    pub fn load() -> Result<UserSetup> {
        UserSetup::load_with(|file| Ok(Config::load(file)?))
    }

    /// For commands that only read the journal: a mistake in a section only
    /// tracing uses is one warning on stderr, not an error.
    pub fn load_for_reading() -> Result<UserSetup> {
        UserSetup::load_with(|file| {
            let (config, warning) = Config::load_for_reading(file)?;
            if let Some(w) = warning {
                eprintln!(
                    "prov: warning: {}; queries go on (tracing will not start until it is fixed)",
                    prov_model::escape::escape_controls(&w.to_string())
                );
            }
            Ok(config)
        })
    }

    /// `load_for_reading` without the warning (a background step).
    pub fn load_for_reading_quietly() -> Result<UserSetup> {
        UserSetup::load_with(|file| Ok(Config::load_for_reading(file)?.0))
    }

    fn load_with(load_config: impl FnOnce(&Path) -> Result<Config>) -> Result<UserSetup> {
        let locations = Locations::from_env().map_err(|e| anyhow!(e))?;
        let as_root = nix::unistd::geteuid().is_root();
        if as_root {
            refuse_others_directories(&locations.config_file(), "set XDG_CONFIG_HOME")?;
        }
        let config = load_config(&locations.config_file())?;
        let setup = UserSetup { locations, config };
        if as_root {
            let database_hint = match setup.config.database.path {
                Some(_) => {
                    format!("change database.path in {}", escape(setup.locations.config_file().as_os_str().as_bytes()))
                }
                None => "set XDG_DATA_HOME".into(),
            };
            refuse_others_directories(&setup.database(), &database_hint)?;
            refuse_others_directories(&setup.locations.spool_dir(), "set XDG_STATE_HOME")?;
            refuse_others_directories(&setup.locations.collector_log(), "set XDG_STATE_HOME")?;
        }
        Ok(setup)
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
            redact: self.config.redact.clone(),
            env: self.config.env.clone(),
        }
    }
}

/// Root running prov with a user's HOME or XDG_* (`sudo -E`) would open the
/// database, its -wal/-shm/-journal (SQLite opens those itself, so no
/// per-open O_NOFOLLOW helps), the spool, the log and the configuration
/// through links that user planted, and write root-owned files anywhere. So
/// as root every directory on the way to `file` must be root's and writable
/// by nobody else (OpenSSH's StrictModes); otherwise one line says which and
/// what to do. Checked here, before the collector is handed any of them.
pub fn refuse_others_directories(file: &Path, hint: &str) -> Result<()> {
    let Err(NotPrivate { dir, problem }) = check_private_path(file, 0) else { return Ok(()) };
    let why = match problem {
        Problem::OwnedBy(uid) => {
            let name = prov_model::names::user_name(uid).unwrap_or_else(|| "?".into());
            format!("is owned by {name} (uid {uid})")
        }
        Problem::WritableByOthers(mode) => format!("is writable by others than root (mode {mode:04o})"),
        Problem::Unreadable(e) => format!("cannot be checked ({e})"),
        Problem::TooManyLinks => "leads through too many symbolic links".into(),
    };
    bail!(
        "as root, prov uses only directories nobody else can change, but {} on the way to {} {why}; run prov with sudo -H (not -E), or {hint} to a directory of root's",
        escape(dir.as_os_str().as_bytes()),
        escape(file.as_os_str().as_bytes()),
    )
}

/// prov's own executables and libraries, as the kernel names them.
fn installation_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    files.extend(this_exe().ok());
    if let Ok(prefix) = install_prefix() {
        files.extend([prefix.join("libexec/prov"), prefix.join("lib/prov")]);
    }
    files.extend(user_prov().ok());
    if let Ok(helper) = helper_path() {
        files.extend(helper.parent().map(Path::to_path_buf));
    }
    // Usually bin/prov and libexec/prov twice each: each canonicalize is a
    // readlink per component, on every `prov run`'s path.
    files.sort();
    files.dedup();
    files.into_iter().filter_map(|p| std::fs::canonicalize(p).ok()).collect()
}

/// This installation's prefix (DIR of packaging/install.sh): two levels
/// above this executable (DIR/bin/prov), or three when it is the full build
/// that a musl `prov` hands its other subcommands to (crate::full_build).
pub fn install_prefix() -> Result<PathBuf> {
    let exe = this_exe()?;
    let levels = if crate::full_build::is_full_build(&exe) { 3 } else { 2 };
    Ok(exe.ancestors().nth(levels).unwrap_or(Path::new("/")).to_path_buf())
}

/// The `prov` users run: this executable, or DIR/bin/prov when this is the
/// full build beside the helper.
pub fn user_prov() -> Result<PathBuf> {
    let exe = this_exe()?;
    if crate::full_build::is_full_build(&exe) {
        return Ok(install_prefix()?.join("bin/prov"));
    }
    Ok(exe)
}

/// This executable (`/proc/self/exe`), read once: `prov run` asks for it
/// several times on its path (the prefix, the helper, the preparer's place).
pub fn this_exe() -> Result<PathBuf> {
    static EXE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    EXE.get_or_init(|| std::env::current_exe().ok()).clone().context("cannot find the prov executable")
}

/// The installed helper: `$PROV_HELPER`, or DIR/libexec/prov/prov-helper
/// (the layout packaging/install.sh creates).
pub fn helper_path() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("PROV_HELPER") {
        return Ok(PathBuf::from(p));
    }
    Ok(install_prefix()?.join("libexec/prov/prov-helper"))
}

/// Why tracing cannot work here, if it cannot; checked before trying so the
/// user reads a cause, not a symptom.
pub fn tracing_unavailable(helper: &Path) -> Option<String> {
    if let Some(reason) = helper_not_installed(helper) {
        return Some(reason);
    }
    if nix::sys::statvfs::statvfs(helper).is_ok_and(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_NOSUID)) {
        return Some(format!("helper {} is on a filesystem mounted nosuid", helper.display()));
    }
    if crate::spawn::no_new_privs() {
        return Some("no_new_privs is set for this process, so setuid programs cannot gain privilege".into());
    }
    if let Some(reason) = crate::environment::blocked_helper() {
        return Some(reason);
    }
    if !Path::new("/proc/sys/fs/fanotify").exists() {
        return Some("this kernel has no fanotify".into());
    }
    None
}

/// The part of `tracing_unavailable` about the helper file itself (there,
/// setuid root): what a reinstall or a chmod can change under an
/// observation a preparer keeps ready.
pub fn helper_not_installed(helper: &Path) -> Option<String> {
    let meta = match std::fs::metadata(helper) {
        Ok(m) => m,
        Err(_) => return Some(format!("helper {} not found (run packaging/install.sh)", helper.display())),
    };
    if meta.uid() != 0 || meta.mode() & libc::S_ISUID == 0 {
        return Some(format!("helper {} is not setuid root (run packaging/install.sh as root)", helper.display()));
    }
    None
}

pub fn host_name() -> String {
    nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok()).unwrap_or_default()
}

/// The user's name, for the record. A local user's comes from /etc/passwd;
/// another's (sssd, LDAP: every user of a cluster) is asked of `getent`
/// (`prov_model::names` says why not of NSS here) at most once an hour and
/// kept in the state directory, so `prov run` starts no process for it.
pub fn user_name() -> String {
    let uid = nix::unistd::getuid().as_raw();
    prov_model::names::local_user_name(uid).or_else(|| remembered_user_name(uid)).unwrap_or_else(|| uid.to_string())
}

/// How long a name from `getent` is used before it is asked again (a
/// renamed account shows in records within this time).
const NAME_KEPT: Duration = Duration::from_secs(3600);

fn remembered_user_name(uid: u32) -> Option<String> {
    let state_dir = Locations::from_env().ok().map(|l| l.state_dir);
    let file = state_dir.as_ref().map(|dir| dir.join("user-name"));
    if let Some(name) = file.as_deref().and_then(|file| read_remembered_name(file, uid)) {
        return Some(name);
    }
    let name = prov_model::names::user_name_from_getent(uid)?;
    let made = |dir: &PathBuf| std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).is_ok();
    if let (Some(dir), Some(file)) = (state_dir.filter(made), file) {
        // Renamed into place, so a concurrent run reads it whole or not at all.
        let partial = dir.join(format!(".user-name.{}", std::process::id()));
        if std::fs::write(&partial, format!("{uid} {name}\n")).is_err() || std::fs::rename(&partial, &file).is_err() {
            std::fs::remove_file(&partial).ok();
        }
    }
    Some(name)
}

/// The name kept in `file` for `uid` (`UID NAME`), if it is the user's own
/// file and younger than `NAME_KEPT`.
fn read_remembered_name(file: &Path, uid: u32) -> Option<String> {
    let mut f = std::fs::File::open(file).ok()?;
    let meta = f.metadata().ok()?;
    if meta.uid() != uid || meta.modified().ok()?.elapsed().ok()? > NAME_KEPT {
        return None;
    }
    let mut text = String::new();
    f.read_to_string(&mut text).ok()?;
    let (kept_uid, name) = text.trim_end().split_once(' ')?;
    (kept_uid == uid.to_string() && !name.is_empty()).then(|| name.to_owned())
}
