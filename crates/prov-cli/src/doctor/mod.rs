//! `prov doctor`: answers "why wasn't my command recorded?" first (is this
//! shell traced, is the rc line there), then whether tracing can work at all
//! and where records go. Every line that is not ok says what to do.
//!
//! Each check is a function giving [`Finding`]s; [`CHECKS`] lists them in
//! the order they are shown, so a new check is one function and one line.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use prov_model::escape::escape;

pub mod db;
pub mod finding;
pub mod reach;

pub use finding::{Finding, Status};

use crate::environment;
use crate::setup::{self, UserSetup};

/// What the checks look at, gathered once.
pub struct Context {
    /// The user's setup, or why it could not be loaded.
    pub user: Result<UserSetup, String>,
    /// The interactive shell this doctor was started from, if any.
    pub shell: Option<ShellProcess>,
    /// What the place prov runs in means for it (container, WSL, mounts,
    /// kernel), read once: the helper's line and the environment's lines use it.
    pub environment: Vec<environment::Finding>,
}

pub struct ShellProcess {
    pub pid: u32,
    /// "bash" or "zsh".
    pub kind: &'static str,
}

type Check = fn(&Context) -> Vec<Finding>;

/// In the order shown: the likeliest reason a command went unrecorded first.
const CHECKS: &[Check] = &[
    this_shell_traced,
    rc_line,
    space_prefixed_commands,
    helper,
    builds,
    reachable,
    environment,
    nested_namespaces,
    event_queue,
    process_limit,
    configuration,
    excludes_replaced,
    database,
    spool,
    central_store,
    collector_log,
];

pub fn doctor() -> Result<ExitCode> {
    let user = UserSetup::load().map_err(|e| format!("{e:#}"));
    let environment = setup::helper_path().map_or_else(
        |_| Vec::new(),
        |helper| {
            let db = user.as_ref().ok().map(UserSetup::database);
            environment::assess(&environment::Facts::read(), &helper, db.as_deref())
        },
    );
    let ctx = Context { user, shell: calling_shell(), environment };
    let mut failed = false;
    for check in CHECKS {
        for finding in check(&ctx) {
            finding.print();
            failed |= finding.status == Status::Fail;
        }
    }
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// The nearest bash or zsh among this process's ancestors. PID 1 is one
/// too when it is a shell: a container's shell (`docker run -it IMAGE
/// bash`) is its PID 1; the host's init is no shell and its executable is
/// not readable to users.
fn calling_shell() -> Option<ShellProcess> {
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..16 {
        if pid == 0 {
            return None;
        }
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        let name = exe.as_deref().and_then(Path::file_name).map(|n| n.to_string_lossy().into_owned());
        match name.as_deref() {
            Some("bash") => return Some(ShellProcess { pid, kind: "bash" }),
            Some("zsh") => return Some(ShellProcess { pid, kind: "zsh" }),
            _ => {}
        }
        pid = parent_of(pid)?;
    }
    None
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses.
    let after = &stat[stat.rfind(')')? + 2..];
    after.split(' ').nth(1)?.parse().ok()
}

/// The shell's kind: the calling shell's, else $SHELL's.
fn shell_kind(ctx: &Context) -> &'static str {
    match &ctx.shell {
        Some(s) => s.kind,
        None if std::env::var("SHELL").unwrap_or_default().ends_with("zsh") => "zsh",
        None => "bash",
    }
}

fn this_shell_traced(ctx: &Context) -> Vec<Finding> {
    let Some(shell) = &ctx.shell else {
        return vec![Finding::note(
            "not started from an interactive bash or zsh, so whether your shell is traced is not known",
            "run prov doctor at the prompt of the shell whose commands go unrecorded",
        )];
    };
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", shell.pid)).unwrap_or_default();
    if maps.contains("libprov_preload") {
        vec![Finding::ok(format!("this {} (pid {}) is traced: the prov shim is loaded", shell.kind, shell.pid))]
    } else {
        vec![Finding::fail(
            format!("this {} (pid {}) is not traced: the prov shim is not loaded in it", shell.kind, shell.pid),
            format!(
                "start a new shell after adding the rc line below, or run `prov shell {}` for a traced shell now",
                shell.kind
            ),
        )]
    }
}

/// The rc file the integration line belongs in.
fn rc_file(kind: &str, home: &Path) -> PathBuf {
    match kind {
        "zsh" => std::env::var_os("ZDOTDIR").map_or_else(|| home.to_owned(), PathBuf::from).join(".zshrc"),
        _ => home.join(".bashrc"),
    }
}

fn rc_line(ctx: &Context) -> Vec<Finding> {
    let Ok(user) = &ctx.user else { return Vec::new() };
    let kind = shell_kind(ctx);
    let rc = rc_file(kind, &user.locations.home);
    let wanted = format!("prov init {kind}");
    let text = prov_model::small_file::read_to_string(&rc, prov_model::small_file::CONFIG_LIMIT).unwrap_or_default();
    let line = text.lines().position(|l| l.contains(&wanted) && !l.trim_start().starts_with('#'));
    let add = format!("add  eval \"$(prov init {kind})\"  as the last line of {}", shown(&rc));
    match line {
        Some(i) if text.lines().skip(i + 1).any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#')) => {
            vec![Finding::warn(
                format!("{}:{} has the prov line, with other lines after it", shown(&rc), i + 1),
                "move it to the end: prompt settings made after it can run before prov's hooks",
            )]
        }
        Some(i) => vec![Finding::ok(format!("{}:{} has the prov line", shown(&rc), i + 1))],
        None => match system_rc_with(kind, &wanted) {
            // An image or an administrator turned it on for everyone.
            Some(system) => vec![Finding::ok(format!("{} turns prov on for every {kind}", shown(&system)))],
            None => vec![Finding::fail(format!("{} has no `eval \"$(prov init {kind})\"` line", shown(&rc)), add)],
        },
    }
}

/// The system-wide rc file of `kind` that has the prov line, if one has.
fn system_rc_with(kind: &str, wanted: &str) -> Option<PathBuf> {
    let candidates: &[&str] = match kind {
        "zsh" => &["/etc/zsh/zshrc", "/etc/zshrc"],
        _ => &["/etc/bash.bashrc", "/etc/bashrc"],
    };
    candidates.iter().map(PathBuf::from).find(|f| {
        prov_model::small_file::read_to_string(f, prov_model::small_file::CONFIG_LIMIT)
            .is_ok_and(|t| t.lines().any(|l| l.contains(wanted) && !l.trim_start().starts_with('#')))
    })
}

fn space_prefixed_commands(ctx: &Context) -> Vec<Finding> {
    match &ctx.user {
        Ok(user) if user.config.shell.skip_space_prefixed => vec![Finding::note(
            "commands typed with a leading space are not recorded ([shell] skip_space_prefixed = true)",
            "type the command without the leading space, or set skip_space_prefixed = false",
        )],
        _ => Vec::new(),
    }
}

fn helper(ctx: &Context) -> Vec<Finding> {
    match setup::helper_path() {
        Ok(helper) => match setup::tracing_unavailable(&helper).or_else(|| apparmor_probe(ctx)) {
            None => vec![Finding::ok(format!("helper {} can trace", shown(&helper)))],
            Some(problem) => {
                // Where it runs (a container, a nosuid mount) is said with its remedy below.
                let remedy = if ctx.environment.iter().any(|f| f.severity == environment::Severity::Fail) {
                    "see the line about where prov runs, below"
                } else if problem.starts_with("AppArmor") {
                    "the profile's rules decide (its file in /etc/apparmor.d; the kernel log shows apparmor=\"DENIED\" lines)"
                } else {
                    "run packaging/install.sh as root (it installs the setuid helper), then start a new shell"
                };
                vec![Finding::fail(format!("tracing cannot start: {problem}"), remedy)]
            }
        },
        Err(e) => vec![Finding::fail(format!("{e:#}"), "reinstall prov with packaging/install.sh")],
    }
}

/// Whether `prov`, `man prov` and completion reach this installation.
fn reachable(ctx: &Context) -> Vec<Finding> {
    let (Ok(user), Ok(prefix), Ok(prov)) = (&ctx.user, setup::install_prefix(), setup::user_prov()) else {
        return Vec::new();
    };
    let shell = shell_kind(ctx);
    let rc = rc_file(shell, &user.locations.home);
    let rc_text = std::fs::read_to_string(&rc).unwrap_or_default();
    reach::assess(&reach::Reach { prefix, prov, shell, rc, rc_text })
}

/// Which build answers what (crate::full_build): a musl `prov` without its
/// glibc full build still answers everything, only queries slower.
fn builds(_: &Context) -> Vec<Finding> {
    let Ok(exe) = setup::this_exe() else { return Vec::new() };
    if crate::full_build::is_full_build(&exe) {
        let prov = setup::user_prov().unwrap_or_default();
        return vec![Finding::ok(format!(
            "{} (musl) runs `prov run -- CMD`; {} (glibc) answers the rest",
            shown(&prov),
            shown(&exe)
        ))];
    }
    if cfg!(target_env = "musl") {
        let full = setup::install_prefix().map(|prefix| crate::full_build::path(&prefix)).unwrap_or_default();
        return vec![Finding::warn(
            format!(
                "{} is built against musl and {} {}: queries run up to 2.7 times slower",
                shown(&exe),
                shown(&full),
                if full.exists() { "cannot be started" } else { "is missing" }
            ),
            "run packaging/install.sh again",
        )];
    }
    Vec::new()
}

/// Under an enforcing AppArmor profile, whether the helper is let do its
/// work can only be seen by trying: one observation started and dropped
/// unused (it leaves no record). Why it failed, or None.
fn apparmor_probe(ctx: &Context) -> Option<String> {
    environment::apparmor_profile()?;
    let user = ctx.user.as_ref().ok()?;
    crate::observe::start(user, crate::observe::identity("doctor".into(), "doctor")).err()
}

/// The kernel queue of each observation holds at most
/// fs.fanotify.max_queued_events events (see packaging/install.sh, which
/// sets it to this unless told otherwise): below it, bulk commands may lose
/// events, marked.
const ADVISED_QUEUE: u64 = 131_072;

/// Kernel memory of one queued fanotify event, roughly (the event with its
/// file handle, from the kernel's slab).
const BYTES_PER_QUEUED_EVENT: u64 = 96;

/// The setting is machine-wide: it bounds every fanotify group, and any user
/// may hold fs.fanotify.max_user_groups of them, so doctor always says what
/// it lets each user pin, for the administrator who chose it.
fn event_queue(_: &Context) -> Vec<Finding> {
    let read =
        |name: &str| std::fs::read_to_string(format!("/proc/sys/fs/fanotify/{name}")).ok()?.trim().parse::<u64>().ok();
    let Some(queue) = read("max_queued_events") else { return Vec::new() };
    let cost = match read("max_user_groups") {
        Some(groups) => format!(
            "; each user may hold {groups} fanotify groups, so queue up to {} MB of kernel memory",
            groups * queue * BYTES_PER_QUEUED_EVENT / 1_000_000
        ),
        None => String::new(),
    };
    if queue >= ADVISED_QUEUE {
        return vec![Finding::ok(format!("fs.fanotify.max_queued_events is {queue}{cost}"))];
    }
    vec![Finding::note(
        format!(
            "fs.fanotify.max_queued_events is {queue}{cost}: commands writing many files at once may lose events (their records say so)"
        ),
        format!(
            "sysctl fs.fanotify.max_queued_events={ADVISED_QUEUE} as root (packaging/install.sh does unless --queue-events says otherwise), weighing what it lets each user pin"
        ),
    )]
}

/// Whether a command's processes that make or enter a mount namespace of
/// their own (bwrap, `unshare -m`, Apptainer, podman) are noticed: the join
/// helper's seccomp filter stops those calls for the collector, which needs
/// the kernel's user notification (Linux 5.0; 5.8 tells when a filter's
/// processes are gone) on a machine whose call numbers prov knows.
fn nested_namespaces(_: &Context) -> Vec<Finding> {
    let actions = std::fs::read_to_string("/proc/sys/kernel/seccomp/actions_avail").unwrap_or_default();
    let known_machine = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));
    if known_machine && actions.split_whitespace().any(|a| a == "user_notif") {
        return vec![Finding::ok(
            "mount namespaces made or entered inside commands (bwrap, unshare -m, Apptainer, rootless podman) are noticed and, when you made them, followed: such records say their first moments there may be missing",
        )];
    }
    let why = if known_machine {
        "this kernel has no seccomp user notification"
    } else {
        "prov does not know this machine's system calls"
    };
    vec![Finding::warn(
        format!("{why}: a command that makes a mount namespace of its own (bwrap, unshare -m, Apptainer, podman) is recorded without its files there, and its record does not say so"),
        "run such commands on a kernel with CONFIG_SECCOMP_FILTER (Linux 5.8 or later)",
    )]
}

/// Processes each idle traced shell keeps: its preparer and the observation
/// it holds ready (holder and collector; the collector lets its writer go
/// after half a minute without a record, see `writer_on_demand`).
const IDLE_SHELL_PROCESSES: u64 = 3;
/// The threads of those processes, which `ulimit -u` counts: the preparer
/// and the holder one each, the collector two (benches/README.md, "What an
/// idle traced shell costs").
const IDLE_SHELL_THREADS: u64 = 4;

/// A `ulimit -u` that the user's processes come near: the user's own forks
/// fail first (bash retries a failed fork for up to 30 s), and each idle
/// traced shell counts four threads.
fn process_limit(_: &Context) -> Vec<Finding> {
    let Some(limit) = db::process_limit() else { return Vec::new() };
    let (running, provs) = db::own_processes();
    // Near: fewer free than two idle shells would take, or a tenth left.
    if limit.saturating_sub(running) > (2 * IDLE_SHELL_THREADS).max(limit / 10) {
        return Vec::new();
    }
    vec![Finding::warn(
        format!(
            "{running} of the {limit} processes `ulimit -u` allows are running, threads counted ({provs} of them prov's): forks may fail; each idle traced shell keeps {IDLE_SHELL_PROCESSES} processes ({IDLE_SHELL_THREADS} threads)"
        ),
        "raise the limit (ulimit -u, /etc/security/limits.conf) or close idle shells",
    )]
}

fn configuration(ctx: &Context) -> Vec<Finding> {
    match &ctx.user {
        Ok(user) => {
            let file = user.locations.config_file();
            if file.exists() {
                vec![Finding::ok(format!("configuration {} is valid", shown(&file)))]
            } else {
                vec![Finding::ok(format!("configuration: defaults, no file ({} is absent)", shown(&file)))]
            }
        }
        Err(e) => vec![Finding::fail(
            format!("configuration: {e}"),
            "fix that line (prov config --default shows every key); until then nothing is traced",
        )],
    }
}

fn excludes_replaced(ctx: &Context) -> Vec<Finding> {
    let Ok(user) = &ctx.user else { return Vec::new() };
    crate::config::replaced_defaults(&user.locations.config_file())
        .into_iter()
        .map(|(section, missing)| {
            let sample = missing.iter().take(4).cloned().collect::<Vec<_>>().join(", ");
            Finding::warn(
                format!(
                    "[{section}] exclude replaces the default list: {} default entries ({sample}…) are recorded again",
                    missing.len()
                ),
                format!("rename the key to exclude_also in [{section}] to add to the defaults instead"),
            )
        })
        .collect()
}

fn database(ctx: &Context) -> Vec<Finding> {
    let Ok(user) = &ctx.user else { return Vec::new() };
    let db = user.database();
    match db::database_problem(&db) {
        None => vec![Finding::ok(format!("database {} opens for writing and is intact", shown(&db)))],
        // The problem names the database itself.
        Some(problem) => {
            let fallback = prov_store::spool::fallback_dir(&db);
            let meanwhile = match (
                db::spool_unwritable(&user.locations.spool_dir()),
                db::fallback_unusable(&db),
            ) {
                (None, _) => "records wait in the spool meanwhile".to_string(),
                (Some(_), None) => format!(
                    "records wait in the fallback spool {} meanwhile: the spool cannot be written either (see the spool line)",
                    shown(&fallback)
                ),
                (Some(_), Some(why)) => format!(
                    "records are LOST meanwhile: the spool cannot be written either (see the spool line), nor the fallback spool ({why})"
                ),
            };
            vec![Finding::fail(
                problem,
                format!("{meanwhile}; do what the line says (corrupt: `prov doctor --repair`), fix the file's permissions or free the disk, or set [database] path"),
            )]
        }
    }
}

fn spool(ctx: &Context) -> Vec<Finding> {
    let Ok(user) = &ctx.user else { return Vec::new() };
    let dir = user.locations.spool_dir();
    let fallback = fallback_spool(&user.database());
    if let Some(why) = db::spool_unwritable(&dir) {
        let mut found = vec![Finding::fail(
            format!("spool {} cannot be written: {why}", shown(&dir)),
            "make it writable or free space: while the database cannot take a record, the spool is where it waits",
        )];
        found.extend(fallback);
        return found;
    }
    let mut found = match db::spool_problem(&dir) {
        // The database line says whether records reach it.
        None => vec![Finding::ok(format!("spool {} is empty: no record waits there", shown(&dir)))],
        Some(problem) => vec![Finding::warn(
            format!("spool {}: {problem} (the database was busy or not writable)", shown(&dir)),
            "run `prov query history`: it moves them into the database; if they stay, see the database line",
        )],
    };
    let set_aside = db::set_aside_notes(&dir);
    if let Some((head, files)) = set_aside.split_first() {
        let mut f = Finding::note(head.clone(), "look at the set-aside bytes, then delete these files");
        f.details = files.iter().map(|l| l.trim().to_string()).collect();
        found.push(f);
    }
    found.extend(fallback);
    found
}

/// Records in the fallback spool (neither the database nor the spool could
/// take them), or a fallback spool that could not take them either: said
/// only when there is something to say.
fn fallback_spool(database: &std::path::Path) -> Option<Finding> {
    let dir = prov_store::spool::fallback_dir(database);
    let ours = match prov_store::spool::checked_fallback(database) {
        Ok(Some(ours)) => ours,
        Ok(None) => return None,
        // Someone else's directory in the way is worth a line before it matters.
        Err(e) => {
            return Some(Finding::warn(
                format!("fallback spool {} is not usable: {e}", shown(&dir)),
                "remove it (or have its owner remove it): records that neither the database nor the spool can take would be lost",
            ))
        }
    };
    let waiting = prov_store::spool::waiting(&ours);
    (waiting > 0).then(|| {
        Finding::warn(
            format!(
                "fallback spool {}: {waiting} record(s) waiting (neither the database nor the spool could take them)",
                shown(&ours)
            ),
            "make the database writable (see the lines above), then run `prov query history`: it moves them in",
        )
    })
}

/// The central store, when [sync] url is set: reachable, the role
/// accepted, the schema this prov needs, and what waits to be pushed. Its
/// problems never stop recording (records wait in the journal): warnings.
fn central_store(ctx: &Context) -> Vec<Finding> {
    let Ok(user) = &ctx.user else { return Vec::new() };
    if user.config.sync.url.is_none() {
        return Vec::new();
    }
    let pending = prov_store::Reader::open(&user.database()).and_then(|j| j.push_counts()).map_or_else(
        |_| "records wait in the local journal".to_string(),
        |c| format!("{} record(s) pending", c.pending),
    );
    let config = match crate::sync::connection(user) {
        Ok(c) => c,
        Err(e) => {
            return vec![Finding::warn(
                format!("central store: {e:#}; {pending}"),
                "fix [sync] url in the configuration (docs/cluster-store.md); records wait in the local journal",
            )]
        }
    };
    match prov_sync::Central::connect(&config, false) {
        Ok(mut central) => {
            // Over TCP, whether the link is encrypted (a socket is local).
            let socket = matches!(config.get_hosts().first(), Some(postgres::config::Host::Unix(_)));
            let link = match central.encrypted() {
                Ok(true) => format!(" over TLS (sslmode={})", config.tls.mode.name()),
                Ok(false) if !socket => " without TLS".to_string(),
                _ => String::new(),
            };
            let mut found = vec![Finding::ok(format!(
                "central store {}: reachable{link}, schema version {}, {pending}",
                central.server,
                prov_sync::server::SERVER_SCHEMA
            ))];
            let paused = std::fs::metadata(crate::sync::retry_file(user))
                .and_then(|m| m.modified())
                .is_ok_and(|until| until > std::time::SystemTime::now());
            if paused {
                found.push(Finding::note(
                    "background pushes are paused for a minute after an outage",
                    "`prov sync` pushes now",
                ));
            }
            found
        }
        Err(e) => {
            use prov_sync::SyncError;
            let remedy = match &e {
                SyncError::Unreachable { .. } => {
                    "check that the server runs and this host reaches it (host and port in [sync] url); records wait in the local journal and are pushed once it answers".to_string()
                }
                SyncError::Refused { why, .. } if why.contains("authentication") || why.contains("role") => {
                    "check the user in [sync] url and its password in ~/.pgpass (mode 0600) or PGPASSWORD; the administrator grants prov_user to the role (docs/cluster-store.md)".to_string()
                }
                SyncError::OlderServer { .. } => "its owner runs `prov sync --setup` once (docs/cluster-store.md)".to_string(),
                SyncError::NewerServer { .. } => "upgrade prov on this host".to_string(),
                SyncError::Tls { .. } => {
                    "give the CA that signed the server's certificate with sslrootcert=FILE in [sync] url (default ~/.postgresql/root.crt), or ask the administrator for the right certificate (docs/cluster-store.md)".to_string()
                }
                _ => "see docs/cluster-store.md; records wait in the local journal".to_string(),
            };
            vec![Finding::warn(format!("{e}; {pending}"), remedy)]
        }
    }
}

/// Where this runs (container, WSL, mounts, kernel). Each finding of
/// environment.rs reads "what: what it means and what to do".
fn environment(ctx: &Context) -> Vec<Finding> {
    let status = |s: &environment::Severity| {
        if *s == environment::Severity::Fail {
            Status::Fail
        } else {
            Status::Note
        }
    };
    ctx.environment
        .iter()
        .map(|f| {
            let (what, remedy) =
                f.text.split_once(": ").unwrap_or((&f.text, "see docs/deploy.md and packaging/docker/README.md"));
            Finding::with(status(&f.severity), what, remedy)
        })
        .collect()
}

fn collector_log(ctx: &Context) -> Vec<Finding> {
    let Ok(user) = &ctx.user else { return Vec::new() };
    let log = user.locations.collector_log();
    let Ok(text) = std::fs::read(&log) else { return Vec::new() };
    // The log quotes recorded paths.
    let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    if lines.is_empty() {
        return Vec::new();
    }
    let mut f = Finding::note(
        format!("{} recent collector problem(s) in {}; the last:", lines.len(), shown(&log)),
        format!("read them; once dealt with, remove {} so the next doctor shows only new ones", shown(&log)),
    );
    f.details = lines[lines.len().saturating_sub(5)..].iter().map(|l| escape(l)).collect();
    vec![f]
}

fn shown(path: &Path) -> String {
    escape(path.as_os_str().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parent_is_read_from_stat_whatever_the_name() {
        assert_eq!(parent_of(std::process::id()), Some(std::os::unix::process::parent_id()));
    }
}
