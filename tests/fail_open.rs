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

#[test]
fn missing_helper_runs_untraced_and_says_why() {
    let case = Case::new("nohelper");
    let out = case
        .command(case.inst.prov())
        .env("PROV_HELPER", "/nonexistent/prov-helper")
        .args(["run", "--", "sh", "-c", "echo visible; exit 5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(out.stdout, b"visible\n");
    let err = one_line(&out.stderr);
    assert!(err.contains("not tracing") && err.contains("/nonexistent/prov-helper"), "{err}");
}

#[test]
fn nosuid_mount_runs_untraced_and_says_why() {
    let case = Case::new("nosuid");
    let mnt = case.work.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let st = Command::new("mount").args(["-t", "tmpfs", "-o", "nosuid,mode=755", "provtest-nosuid"]).arg(&mnt).status().unwrap();
    assert!(st.success());
    let helper = mnt.join("prov-helper");
    std::fs::copy(case.inst.helper(), &helper).unwrap();
    Command::new("chown").arg("root:prov").arg(&helper).status().unwrap();
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let out = case
        .command(case.inst.prov())
        .env("PROV_HELPER", &helper)
        .args(["run", "--", "sh", "-c", "echo still runs"])
        .output()
        .unwrap();
    let _ = Command::new("umount").arg(&mnt).status();
    assert!(out.status.success());
    assert_eq!(out.stdout, b"still runs\n");
    let err = one_line(&out.stderr);
    assert!(err.contains("nosuid"), "{err}");
}

#[test]
fn bad_config_is_named_with_its_line() {
    let case = Case::new("badconfig");
    std::fs::create_dir_all(case.home.join(".config/prov")).unwrap();
    std::fs::write(case.home.join(".config/prov/config.toml"), "[hash]\nchunks = 3\n[write]\nmax_evnts = 5\n").unwrap();
    case.chown_tree(&case.home);
    let out = case.run(["sh", "-c", "echo ran; exit 4"]);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(out.stdout, b"ran\n");
    let err = one_line(&out.stderr);
    assert!(err.contains("config.toml:4:") && err.contains("max_evnts"), "{err}");
    let q = case.prov(["query", "history"]);
    assert_eq!(q.status.code(), Some(1));
    assert!(one_line(&q.stderr).contains("config.toml:4:"));
}

#[test]
fn read_only_database_spools_and_catches_up() {
    let case = Case::new("readonly");
    case.run_sh("echo first > first.txt"); // creates the database
    let data_dir = case.home.join(".local/share/prov");
    let set_mode = |mode| {
        for entry in std::fs::read_dir(&data_dir).unwrap() {
            std::fs::set_permissions(entry.unwrap().path(), std::fs::Permissions::from_mode(mode & 0o666)).unwrap();
        }
        std::fs::set_permissions(&data_dir, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    set_mode(0o500);
    let out = case.run(["sh", "-c", "echo second > second.txt; exit 3"]);
    assert_traced(&out);
    assert_eq!(out.status.code(), Some(3));
    assert!(one_line(&out.stderr).contains("spool"));
    let spool = case.home.join(".local/state/prov/spool");
    assert_eq!(std::fs::read_dir(&spool).unwrap().count(), 1, "the record waits in the spool");
    // The collector says so where the user can look later.
    let log_path = case.home.join(".local/state/prov/collector.log");
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let state: Vec<_> = std::fs::read_dir(log_path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
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
    let ready = case.work.join("locked.ready");
    let mut locker = case
        .command("/usr/bin/python3")
        .args([
            "-c",
            "import sqlite3, sys, time\n\
             c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
             c.execute('BEGIN EXCLUSIVE')\n\
             open(sys.argv[2], 'w').close()\n\
             time.sleep(6)\n",
        ])
        .arg(case.database())
        .arg(&ready)
        .spawn()
        .unwrap();
    while !ready.exists() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = case.run(["sh", "-c", "echo locked > locked.txt"]);
    assert_traced(&out);
    assert!(out.status.success());
    assert!(one_line(&out.stderr).contains("spool"));
    locker.wait().unwrap();
    let cmd = case.writer_of_eventually("locked.txt");
    assert_eq!(cmd["exit_status"], 0);
    assert_eq!(files(&cmd).len(), 1);
}
