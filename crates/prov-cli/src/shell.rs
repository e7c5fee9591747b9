//! Shell integration: `prov init bash|zsh` prints the hook script with this
//! installation's paths, `prov shell` starts a traced shell without touching
//! the rc files, and `prov __prepare` (started by the shim while the prompt
//! idles) sets up the next observation and hands it to the shell.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{anyhow, bail, Context, Result};
use clap::ValueEnum;
use prov_collect::ipc;

use crate::observe;
use crate::setup::{self, UserSetup};

#[derive(Clone, Copy, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
}

impl Shell {
    fn name(self) -> &'static str {
        match self {
            Shell::Bash => "bash",
            Shell::Zsh => "zsh",
        }
    }

    fn template(self) -> &'static str {
        match self {
            Shell::Bash => include_str!("../../../shell/prov.bash"),
            Shell::Zsh => include_str!("../../../shell/prov.zsh"),
        }
    }
}

struct Paths {
    prov: PathBuf,
    helper: PathBuf,
    preload: PathBuf,
}

/// This installation's files (see packaging/install.sh for the layout).
fn paths() -> Result<Paths> {
    let prov = std::env::current_exe().context("cannot find the prov executable")?;
    let bin_dir = prov.parent().unwrap_or(Path::new("/"));
    let preload = std::env::var_os("PROV_PRELOAD")
        .map(PathBuf::from)
        .unwrap_or_else(|| bin_dir.join("../lib/prov/libprov_preload.so"));
    let canonical = |p: PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
    Ok(Paths { prov: canonical(prov), helper: canonical(setup::helper_path()?), preload: canonical(preload) })
}

/// A word the shell reads back unchanged.
fn quote(path: &Path) -> String {
    let s = String::from_utf8_lossy(path.as_os_str().as_bytes());
    format!("'{}'", s.replace('\'', r"'\''"))
}

pub fn init(shell: Shell) -> Result<ExitCode> {
    let p = paths()?;
    let script = shell
        .template()
        .replace("@PRELOAD@", &quote(&p.preload))
        .replace("@HELPER@", &quote(&p.helper))
        .replace("@PROV@", &quote(&p.prov));
    print!("{script}");
    Ok(ExitCode::SUCCESS)
}

/// Replaces this process with a traced interactive shell that reads the
/// user's own rc file and then the integration.
pub fn shell(shell: Option<Shell>) -> Result<ExitCode> {
    let shell = match shell {
        Some(s) => s,
        None => match std::env::var("SHELL").unwrap_or_default().rsplit('/').next() {
            Some("zsh") => Shell::Zsh,
            _ => Shell::Bash,
        },
    };
    let user = UserSetup::load()?;
    let p = paths()?;
    if let Some(reason) = setup::tracing_unavailable(&p.helper) {
        eprintln!("prov: not tracing: {}", prov_model::escape::escape_controls(&reason));
    }
    let dir = user.locations.state_dir.join("shell");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let init = format!("eval \"$({} init {})\"\n", quote(&p.prov), shell.name());
    let mut cmd;
    match shell {
        Shell::Bash => {
            let rc = dir.join("bashrc");
            std::fs::write(&rc, format!("[ -f ~/.bashrc ] && . ~/.bashrc\n{init}"))
                .with_context(|| format!("cannot write {}", rc.display()))?;
            cmd = Command::new("bash");
            cmd.arg("--rcfile").arg(&rc).arg("-i");
        }
        Shell::Zsh => {
            let zdot = dir.join("zsh");
            std::fs::create_dir_all(&zdot)?;
            let home = quote(&user.locations.home);
            std::fs::write(zdot.join(".zshenv"), format!("[ -f {home}/.zshenv ] && . {home}/.zshenv\n"))?;
            std::fs::write(
                zdot.join(".zshrc"),
                format!("ZDOTDIR={home}\n[ -f {home}/.zshrc ] && . {home}/.zshrc\n{init}"),
            )?;
            cmd = Command::new("zsh");
            cmd.arg("-i").env("ZDOTDIR", &zdot);
        }
    }
    let mut preload: OsString = p.preload.clone().into();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    cmd.env("LD_PRELOAD", preload)
        .env("PROV_SHIM_HELPER", &p.helper)
        .env("PROV_SHIM_PROV", &p.prov)
        .env("PROV_SHIM_SHELL", shell.name());
    let err = cmd.exec();
    bail!("cannot start {}: {err}", shell.name())
}

/// `prov __prepare SESSION SHELL`, fd 3 being the shim's socket: answers
/// `R<holder pid>[ skip-space]` with [control socket, namespace root,
/// tracker], or `E<one-line reason>`.
pub fn prepare(session: String, shell: String) -> Result<ExitCode> {
    let shim = shim_socket()?;
    let result = UserSetup::load().map_err(|e| format!("{e:#}")).and_then(|user| {
        let skip_space = user.config.shell.skip_space_prefixed;
        observe::start(&user, observe::identity(session, &shell)).map(|obs| (obs, skip_space))
    });
    match result {
        Ok((obs, skip_space)) => {
            let tracker = obs.tracker.as_ref().ok_or_else(|| anyhow!("no tracker"))?;
            let fds = [obs.ctl.as_raw_fd(), obs.ns_root.as_raw_fd(), tracker.as_raw_fd()];
            // The shim applies [shell] skip_space_prefixed itself.
            let answer = format!("R{}{}", obs.holder_pid, if skip_space { " skip-space" } else { "" });
            ipc::send(shim, answer.as_bytes(), &fds)?;
        }
        // The shim prints the reason on the user's terminal.
        Err(reason) => ipc::send(shim, format!("E{}", prov_model::escape::escape_controls(&reason)).as_bytes(), &[])?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The shim's socket at fd 3 (anything else there: not started by the shim).
fn shim_socket() -> Result<BorrowedFd<'static>> {
    let stat = nix::sys::stat::fstat(crate::spawn::fd3()).map_err(|e| anyhow!("fd 3: {e}"))?;
    if stat.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        bail!("prov __prepare is started by the shell integration only");
    }
    Ok(crate::spawn::fd3())
}
