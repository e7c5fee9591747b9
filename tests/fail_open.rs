//! When tracing cannot start or the database cannot be written, the command
//! still runs with its normal output and status, prov says why in one line,
//! and nothing recorded is lost.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use prov_e2e::*;

fn one_line(stderr: &[u8]) -> String {
    let s = String::from_utf8_lossy(stderr).into_owned();
    assert_eq!(s.lines().count(), 1, "exactly one line: {s:?}");
    s
}

/// `prov run -- sh -c SCRIPT` as the user, with prov told to use `helper`.
fn run_with_helper(case: &Case, helper: impl AsRef<std::ffi::OsStr>, script: &str) -> std::process::Output {
    case.command(case.inst.prov()).env("PROV_HELPER", helper).args(["run", "--", "sh", "-c", script]).output().unwrap()
}

#[test]
fn missing_helper_runs_untraced_and_says_why() {
    let case = Case::new("nohelper");
    let out = run_with_helper(&case, "/nonexistent/prov-helper", "echo visible; exit 5");
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(out.stdout, b"visible\n");
    let err = one_line(&out.stderr);
    assert!(err.contains("not tracing") && err.contains("/nonexistent/prov-helper"), "{err}");
}

#[test]
fn helper_without_setuid_bit_runs_untraced_and_says_why() {
    let case = Case::new("plainhelper");
    let plain = case.work.join("prov-helper");
    std::fs::copy(case.inst.helper(), &plain).unwrap(); // root's, 0755: no setuid bit
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run_with_helper(&case, &plain, "echo visible; exit 5");
    assert_eq!(out.status.code(), Some(5), "{}", describe(&out));
    assert_eq!(out.stdout, b"visible\n");
    let err = one_line(&out.stderr);
    assert!(err.contains("not tracing") && err.contains("not setuid root"), "{err}");
}

#[test]
fn nosuid_mount_runs_untraced_and_says_why() {
    let case = Case::new("nosuid");
    let mnt = case.work.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "nosuid,mode=755", "provtest-nosuid"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(st.success());
    let helper = mnt.join("prov-helper");
    std::fs::copy(case.inst.helper(), &helper).unwrap();
    Command::new("chown").arg("root:prov").arg(&helper).status().unwrap();
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let out = run_with_helper(&case, &helper, "echo still runs");
    let _ = Command::new("umount").arg(&mnt).status();
    assert!(out.status.success());
    assert_eq!(out.stdout, b"still runs\n");
    let err = one_line(&out.stderr);
    assert!(err.contains("not tracing") && err.contains("mounted nosuid"), "{err}");
}

#[test]
fn bad_config_is_named_with_its_line() {
    let case = Case::new("badconfig");
    case.write_config("[hash]\nchunks = 3\n[write]\nmax_evnts = 5\n");
    let out = case.run(["sh", "-c", "echo ran; exit 4"]);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(out.stdout, b"ran\n");
    let err = one_line(&out.stderr);
    assert!(err.contains("config.toml:4:") && err.contains("max_evnts"), "{err}");
    // Queries do not need the tracing settings: one warning naming the
    // line, and they go on to answer (the command above ran untraced: no
    // records yet, which is exit status 1, as for every query).
    let q = case.prov(["query", "history"]);
    assert_eq!(q.status.code(), Some(1), "{}", describe(&q));
    let warning = String::from_utf8_lossy(&q.stderr);
    assert_eq!(warning.matches("config.toml:4:").count(), 1, "{warning}");
    assert!(warning.starts_with("prov: warning: "), "{warning}");
    assert!(warning.ends_with("prov: no records yet\n"), "{warning}");
}

#[test]
fn read_only_database_spools_and_catches_up() {
    let case = Case::new("readonly");
    case.run_sh("echo first > first.txt"); // creates the database
    let data_dir = case.home.join(".local/share/prov");
    let set_mode = |mode| set_modes_in(&data_dir, mode, mode & 0o666);
    set_mode(0o500);
    let out = case.run(["sh", "-c", "echo second > second.txt; exit 3"]);
    assert_traced(&out);
    assert_eq!(out.status.code(), Some(3));
    assert!(one_line(&out.stderr).contains("spool"));
    let spool = case.spool_dir();
    assert_eq!(std::fs::read_dir(&spool).unwrap().count(), 1, "the record waits in the spool");
    // The collector says so where the user can look later.
    let log_path = case.home.join(".local/state/prov/collector.log");
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let state: Vec<_> =
        std::fs::read_dir(log_path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(log.contains("goes to the spool"), "collector.log: {log:?} in {state:?}: {}", describe(&out));
    let doctor = String::from_utf8(case.prov(["doctor"]).stdout).unwrap();
    assert!(doctor.contains("recent collector problem(s)") && doctor.contains("goes to the spool"), "{doctor}");

    set_mode(0o700);
    let cmd = case.writer_of_eventually("second.txt");
    assert_eq!(cmd["exit_status"], 3);
    assert_eq!(files(&cmd).len(), 1);
    assert_eq!(std::fs::read_dir(&spool).unwrap().count(), 0, "spool emptied");
}

#[test]
fn locked_database_spools_and_catches_up() {
    let case = Case::new("locked");
    case.run_sh("echo first > first.txt");
    let locker = lock_database(&case, "EXCLUSIVE");
    let out = case.run(["sh", "-c", "echo locked > locked.txt; exit 6"]);
    assert_traced(&out);
    assert_eq!(out.status.code(), Some(6), "{}", describe(&out));
    assert!(one_line(&out.stderr).contains("spool"));
    let spool = case.spool_dir();
    let spooled = std::fs::read_dir(&spool).map(|d| d.count()).unwrap_or(0);
    locker.release();
    assert_eq!(spooled, 1, "the record waits in the spool while the database is locked");

    let cmd = case.writer_of_eventually("locked.txt");
    assert_eq!(cmd["exit_status"], 6);
    assert_eq!(files(&cmd).len(), 1);
    // The collector keeps its spool file (locked) until it exits; the query
    // after that moves it in.
    assert!(spool_empties(&case, &spool, &[]), "spool not emptied: {}", case.collector_state());
}

/// Whether `spool` is empty within 10 s, running `prov query history` (with
/// `env`) meanwhile: queries move spooled records in.
fn spool_empties(case: &Case, spool: &std::path::Path, env: &[(&str, &std::path::Path)]) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if std::fs::read_dir(spool).unwrap().count() == 0 {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        let _ = case.command(case.inst.prov()).envs(env.iter().copied()).args(["query", "history", "-n", "1"]).output();
    }
}

/// XDG_DATA_HOME, XDG_STATE_HOME and XDG_CONFIG_HOME move the database, the
/// spool and the configuration; nothing lands in the default places.
#[test]
fn xdg_directories_are_honoured() {
    let case = Case::new("xdg");
    let xdg = case.home.join("xdg");
    let (config, data, state) = (xdg.join("config"), xdg.join("data"), xdg.join("state"));
    std::fs::create_dir_all(config.join("prov")).unwrap();
    std::fs::write(config.join("prov/config.toml"), "[hash]\nchunk_size = 64\nchunks = 2\n").unwrap();
    let input = content(1000, 11);
    case.write("in", &input);
    case.chown_tree(&case.home);
    let env =
        [("XDG_CONFIG_HOME", config.as_path()), ("XDG_DATA_HOME", data.as_path()), ("XDG_STATE_HOME", state.as_path())];
    let prov = |args: &[&str]| case.command(case.inst.prov()).envs(env).args(args).output().unwrap();
    let wrote = |file: &str| parse_json_lines(&prov(&["query", "wrote", file, "--json"]).stdout);

    let out = prov(&["run", "--", "sh", "-c", "cat in > out"]);
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(data.join("prov/prov.db").exists(), "database under $XDG_DATA_HOME/prov");
    let found = wrote("out");
    assert_eq!(found.len(), 1, "{found:?}");
    for f in found[0]["files"].as_array().unwrap() {
        assert_eq!(
            (f["hash_chunk_size"].as_u64(), f["hash_chunks"].as_u64()),
            (Some(64), Some(2)),
            "config from $XDG_CONFIG_HOME"
        );
        assert_eq!(f["hash"], expected_hash(&input, 64, 2));
    }

    // Read-only database: the record waits in $XDG_STATE_HOME/prov/spool.
    let data_dir = data.join("prov");
    let set_mode = |mode| set_modes_in(&data_dir, mode, mode & 0o666);
    set_mode(0o500);
    let out = prov(&["run", "--", "sh", "-c", "echo second > second.txt; exit 3"]);
    assert_traced(&out);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert!(one_line(&out.stderr).contains("spool"));
    let spool = state.join("prov/spool");
    assert_eq!(
        std::fs::read_dir(&spool).map(|d| d.count()).unwrap_or(0),
        1,
        "the record waits in $XDG_STATE_HOME/prov/spool"
    );
    set_mode(0o700);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let cmd = loop {
        let mut found = wrote("second.txt");
        if found.len() == 1 || std::time::Instant::now() > deadline {
            assert_eq!(found.len(), 1, "the spooled record is moved in: {found:?}");
            break found.pop().unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(cmd["exit_status"], 3);
    assert!(spool_empties(&case, &spool, &env), "spool not emptied");
    for default in [".local", ".config"] {
        assert!(!case.home.join(default).exists(), "nothing in ~/{default}");
    }
}

/// With RLIMIT_NPROC at 0 the user may start no process or thread, but
/// the helper, privileged, still forks the holder and execs the collector,
/// which runs as the user: it can start neither prov-writer nor its
/// threads. It says so and goes on observing, and ends when its caller
/// hangs up, without an abort (the collector used to panic, SIGABRT).
#[test]
fn a_collector_without_threads_does_not_abort() {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let case = Case::new("nproc0");
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors socketpair writes.
    let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
    assert_eq!(r, 0, "socketpair");
    let (ours, theirs) = (fds[0], fds[1]);
    let mut cmd = case.command("prlimit");
    cmd.args(["--nproc=0", "--"]).arg(case.inst.helper()).args(["observe", "3"]);
    cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
    // SAFETY: dup2 is async-signal-safe; the copy at 3 is inheritable.
    unsafe {
        cmd.pre_exec(move || if libc::dup2(theirs, 3) == 3 { Ok(()) } else { Err(std::io::Error::last_os_error()) });
    }
    let child = cmd.spawn().unwrap();
    // SAFETY: closing our copy of the helper's end.
    unsafe { libc::close(theirs) };
    // Time to start (and, before, to abort), then hang up: the collector ends.
    std::thread::sleep(std::time::Duration::from_secs(2));
    // SAFETY: closing our end of the control socket.
    unsafe { libc::close(ours) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), None, "the collector was killed by a signal: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("cannot start"), "it says what it could not start: {err}");
}
