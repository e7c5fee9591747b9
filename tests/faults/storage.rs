//! The spool and the database under faults (issue 11, items 5, 6, 7, 11):
//! torn spool files, a read-only episode, a database deleted or replaced
//! while commands run, wrong schema versions, a corrupt database and its
//! repair, an unreachable database path, a query that cannot move the spool in.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use prov_e2e::*;

use super::tally::{record_with_text, Tally};

fn collector_log(case: &Case) -> String {
    std::fs::read_to_string(case.home.join(".local/state/prov/collector.log")).unwrap_or_default()
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `prov run -- sh -c SCRIPT` as the user, in the background.
fn spawn_run(case: &Case, script: &str) -> Child {
    case.command(case.inst.prov()).args(["run", "--", "sh", "-c", script]).spawn().unwrap()
}

/// `sqlite3 DB SQL` as root (the CLI the test machine has, for setting up
/// broken databases), waiting for a collector that still holds the database.
fn sqlite3(db: &Path, sql: &str) -> String {
    let out = sqlite3_output(db, sql);
    assert!(out.status.success(), "sqlite3 {sql}: {}", describe(&out));
    stdout_of(&out)
}

fn sqlite3_output(db: &Path, sql: &str) -> Output {
    Command::new("sqlite3").args(["-cmd", ".timeout 10000"]).arg(db).arg(sql).output().unwrap()
}

/// The text prov records for `prov run -- sh -c SCRIPT` (SCRIPT without single quotes).
fn sh_text(script: &str) -> String {
    format!("sh -c '{script}'")
}

/// Makes the database's directory and files read-only for the user (as a
/// full quota or a read-only mount would), or writable again.
fn data_dir_read_only(case: &Case, read_only: bool) {
    // The last command's writer stores its record first (or it would be spooled too).
    if read_only {
        case.wait_until_closed();
    }
    let data_dir = case.database().parent().unwrap().to_owned();
    let (dir_mode, file_mode) = if read_only { (0o500, 0o400) } else { (0o700, 0o600) };
    set_modes_in(&data_dir, dir_mode, file_mode);
}

/// Waits (up to 20 s) until a query finds the command that wrote `file`:
/// its start and that event are stored.
fn wait_for_writer_of(case: &Case, file: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while case.query(["wrote", file]).is_empty() {
        assert!(Instant::now() < deadline, "no record wrote {file:?}: {}", case.collector_state());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (up to 20 s) until no writer holds the spool file `path`: its
/// collector keeps it locked until it exits, shortly after `prov run` returns.
fn wait_until_released(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let file = std::fs::File::open(path).unwrap();
    while file.try_lock().is_err() {
        assert!(Instant::now() < deadline, "{} stays locked", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The spool holds records only (files ending in .jsonl).
fn records_waiting(case: &Case) -> usize {
    std::fs::read_dir(case.spool_dir())
        .map(|d| d.filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl")).count())
        .unwrap_or(0)
}

/// Item 5: a spool file torn in its middle (a crashed writer's half line,
/// with the rest of the record appended after it) gives up only the torn
/// bytes; the set-aside bytes are reported once by the next query and by
/// `prov doctor`, which no longer says a record is waiting.
#[test]
fn a_torn_spool_file_loses_only_the_torn_bytes() {
    let mut tally = Tally::new("torn spool file");
    let case = Case::new("faults-torn-spool");
    case.run_sh("echo first > first.txt");
    data_dir_read_only(&case, true);
    let script = "echo a > a.txt; echo b > b.txt; exit 3";
    let text = &sh_text(script);
    let out = case.run(["sh", "-c", script]);
    data_dir_read_only(&case, false);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    tally.run = 1;
    let spooled: Vec<PathBuf> = std::fs::read_dir(case.spool_dir()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(spooled.len(), 1, "the record waits in the spool: {}", case.collector_state());
    wait_until_released(&spooled[0]);
    // The tear: a crashed writer's half line, and the record's other lines around it.
    let content = std::fs::read(&spooled[0]).unwrap();
    let lines: Vec<&[u8]> = content.split_inclusive(|&b| b == b'\n').collect();
    assert!(lines.len() >= 3, "Begin, events, end: {:?}", String::from_utf8_lossy(&content));
    let half = &lines[1][..lines[1].len() / 2];
    let torn: Vec<u8> = [&lines[..2].concat()[..], half, b"\n", &lines[2..].concat()[..]].concat();
    std::fs::write(&spooled[0], &torn).unwrap();

    let first = case.query(["history"]);
    let record = record_with_text(&first, text);
    tally.found = record.is_some() as usize;
    tally.status_right = record.is_some_and(|r| r["exit_status"] == 3) as usize;
    tally.print_row();
    let record =
        record.unwrap_or_else(|| panic!("the torn record is ingested: {first:#?}; {}", case.collector_state()));
    assert_eq!(record["exit_status"], 3);
    let wrote = case.writer_of("b.txt");
    assert_eq!(wrote["text"], text.as_str());
    assert_eq!(records_waiting(&case), 0, "nothing waits: {}", case.collector_state());
    let doctor = stdout_of(&case.prov(["doctor"]));
    assert!(!doctor.contains("waiting"), "doctor says nothing waits: {doctor}");
    let name = spooled[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(doctor.contains("set aside") && doctor.contains(&name), "doctor names what was set aside: {doctor}");
}

/// Item 5, the query's side: the next query says once what was set aside.
#[test]
fn the_next_query_reports_set_aside_spool_bytes_once() {
    let case = Case::new("faults-torn-once");
    case.run_sh("echo first > first.txt");
    data_dir_read_only(&case, true);
    let out = case.run(["sh", "-c", "echo a > a.txt"]);
    data_dir_read_only(&case, false);
    assert!(out.status.success(), "{}", describe(&out));
    let spooled: Vec<PathBuf> = std::fs::read_dir(case.spool_dir()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(spooled.len(), 1, "{}", case.collector_state());
    wait_until_released(&spooled[0]);
    let mut content = std::fs::read(&spooled[0]).unwrap();
    content.extend_from_slice(b"{\"Events\":[{\"acc\n{\"End\":{\"end_ns\":1");
    std::fs::write(&spooled[0], &content).unwrap();
    let query = || case.command(case.inst.prov()).args(["query", "history"]).output().unwrap();
    let first = query();
    assert!(first.status.success(), "{}", describe(&first));
    let said = stderr_of(&first);
    assert_eq!(said.lines().count(), 1, "one line: {said:?}");
    assert!(said.contains("set aside") && said.contains("prov doctor"), "{said}");
    let second = query();
    assert_eq!(stderr_of(&second), "", "said once");
    assert!(stdout_of(&second).contains("echo a > a.txt"), "{}", describe(&second));
    let doctor = stdout_of(&case.prov(["doctor"]));
    assert!(!doctor.contains("waiting") && doctor.contains("set aside"), "{doctor}");
}

/// Item 6: while prov.db is read-only, SQLite makes prov.db-shm in the
/// database's mode (0444). Once the database is writable again, prov
/// recovers by itself: the next record goes to the database, the spooled
/// ones are moved in, and doctor says ok.
#[test]
fn prov_recovers_by_itself_after_a_read_only_episode() {
    let mut tally = Tally::new("read-only database episode");
    let case = Case::new("faults-ro-episode");
    case.run_sh("echo first > first.txt");
    let db = case.database();
    // No connection from the first command may keep a writable -shm open.
    case.wait_until_closed();
    chmod(&db, 0o444);
    let children: Vec<Child> =
        (0..4).map(|i| spawn_run(&case, &format!("echo {i} > during{i}.txt; sleep 1"))).collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    chmod(&db, 0o644);
    let shm = PathBuf::from(format!("{}-shm", db.display()));
    let shm_mode = std::fs::metadata(&shm).map(|m| m.permissions().mode() & 0o777).ok();
    let after = case.run(["sh", "-c", "echo after > after.txt"]);
    assert!(after.status.success(), "{}", describe(&after));
    tally.run = 5;
    let history = case.query(["history"]);
    tally.found = (0..4)
        .filter(|i| record_with_text(&history, &sh_text(&format!("echo {i} > during{i}.txt; sleep 1"))).is_some())
        .count()
        + record_with_text(&history, &sh_text("echo after > after.txt")).is_some() as usize;
    tally.status_right = tally.found;
    tally.print_row();
    assert_eq!(stderr_of(&after), "", "the record after the episode goes to the database (shm mode was {shm_mode:?})");
    assert_eq!(tally.found, 5, "{history:#?}; {}", case.collector_state());
    assert_eq!(records_waiting(&case), 0, "{}", case.collector_state());
    let doctor = stdout_of(&case.prov(["doctor"]));
    assert!(doctor.contains("ok    database"), "{doctor}");
}

/// Item 6, doctor's side: a -shm file prov cannot make writable (not the
/// user's) is named by `prov doctor`, not reported as "ok database".
#[test]
fn doctor_names_the_file_that_blocks_writing() {
    let case = Case::new("faults-ro-shm");
    case.run_sh("echo first > first.txt");
    let db = case.database();
    let shm = PathBuf::from(format!("{}-shm", db.display()));
    case.wait_until_closed();
    // Root's read-only -shm, as a root process (or another user) would leave it.
    std::fs::write(&shm, vec![0u8; 32768]).unwrap();
    std::os::unix::fs::chown(&shm, Some(0), Some(0)).unwrap();
    chmod(&shm, 0o444);
    let doctor = stdout_of(&case.prov(["doctor"]));
    let _ = std::fs::remove_file(&shm);
    assert!(doctor.contains("FAIL  database") && doctor.contains("prov.db-shm"), "{doctor}");
}

/// Item 7: the database deleted, or replaced, while a command runs: the
/// record lands in the database that exists when it is stored, and the log
/// does not read as if the user had deleted it.
#[test]
fn a_database_deleted_or_replaced_mid_command_keeps_the_record() {
    let mut tally = Tally::new("database deleted/replaced mid-command");
    let case = Case::new("faults-db-gone");
    case.run_sh("echo first > first.txt");
    let db = case.database();
    let side = |suffix: &str| PathBuf::from(format!("{}{suffix}", db.display()));
    for (how, go) in [("deleted", "go1"), ("replaced", "go2")] {
        let script = format!(
            "echo early-{how} > early-{how}; while [ ! -e {go} ]; do sleep 0.05; done; echo late-{how} > late-{how}"
        );
        if how == "replaced" {
            sqlite3(&db, &format!("VACUUM INTO '{}'", side(".copy").display()));
            case.chown_tree(&side(".copy"));
        }
        let mut child = spawn_run(&case, &script);
        wait_for_writer_of(&case, &format!("early-{how}"));
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(side(suffix));
        }
        if how == "replaced" {
            std::fs::rename(side(".copy"), &db).unwrap();
        }
        case.write(go, b"");
        assert!(child.wait().unwrap().success());
        tally.run += 1;
        let deadline = Instant::now() + Duration::from_secs(10);
        let found = loop {
            let found = case.query(["wrote", &format!("late-{how}")]);
            if !found.is_empty() || Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        tally.found += (found.len() == 1) as usize;
        tally.status_right += found.first().is_some_and(|r| r["exit_status"] == 0) as usize;
        // Its first events went with the old file: the record says it is incomplete.
        tally.marked_incomplete += found.first().is_some_and(|r| r["complete"] == false) as usize;
        if found.len() != 1 {
            tally.print_row();
            panic!("{how}: the in-flight record is kept: {found:#?}; {}", case.collector_state());
        }
    }
    tally.print_row();
    assert_eq!(tally.marked_incomplete, 2, "{}", case.collector_state());
    let log = collector_log(&case);
    assert!(!log.contains("was deleted while observed"), "reads like `prov delete`: {log}");
}

/// Item 11: a wrong user_version gives one short line, not the schema SQL.
#[test]
fn a_wrong_schema_version_is_one_line() {
    let case = Case::new("faults-user-version");
    case.run_sh("echo first > first.txt");
    for version in ["0", "1", "-3"] {
        sqlite3(&case.database(), &format!("PRAGMA user_version = {version}"));
        for out in [case.run(["true"]), case.prov(["query", "history"])] {
            let err = stderr_of(&out);
            assert!(!err.contains("CREATE"), "version {version}: no schema SQL: {err}");
            assert_eq!(err.lines().count(), 1, "version {version}: one line: {err}");
            assert!(err.contains("schema version") && err.contains(version), "version {version}: says why: {err}");
        }
    }
    // The remedy the line names works: the records come back under the right version.
    let repair = case.prov(["doctor", "--repair"]);
    assert!(repair.status.success(), "{}", describe(&repair));
    let history = case.query(["history"]);
    assert!(record_with_text(&history, &sh_text("echo first > first.txt")).is_some(), "{history:#?}");
    // The commands run meanwhile waited in the spool and are moved in too.
    assert_eq!(history.iter().filter(|r| r["text"] == "true").count(), 3, "{history:#?}");
}

/// Writes garbage over pages in the middle of `db` (as a failing disk or a
/// stray `dd` would), keeping its first pages (the schema) intact.
fn write_garbage_pages(db: &Path) {
    let len = std::fs::metadata(db).unwrap().len();
    let page = 4096;
    let pages = len / page;
    assert!(pages >= 12, "a database of some size: {pages} pages");
    let file = std::fs::OpenOptions::new().write(true).open(db).unwrap();
    let garbage: Vec<u8> = (0..page * 3).map(|i| (i * 7919 % 251) as u8).collect();
    std::os::unix::fs::FileExt::write_all_at(&file, &garbage, (pages / 2) * page).unwrap();
}

const MANY: &str = "mkdir many; for i in $(seq 1 3000); do echo $i > many/f$i; done";

/// Item 11: a corrupt database is said once, with what to do; doctor says
/// "corrupt"; `prov doctor --repair` moves it aside and recovers what
/// SQLite can still read into a new database.
#[test]
fn a_corrupt_database_is_named_once_and_repaired() {
    let case = Case::new("faults-corrupt");
    let texts: Vec<String> = (0..6).map(|i| format!("echo {i} > small{i}.txt")).collect();
    case.run_sh(MANY);
    for t in &texts {
        case.run_sh(t);
    }
    let db = case.database();
    case.wait_until_closed();
    write_garbage_pages(&db);
    let check = sqlite3_output(&db, "PRAGMA quick_check");
    assert_ne!(stdout_of(&check).trim(), "ok", "the garbage made the database corrupt");

    let q = case.prov(["query", "wrote", "many/f1"]);
    let err = stderr_of(&q);
    assert_eq!(err.lines().count(), 1, "said once: {err}");
    assert!(err.contains("corrupt") && err.contains("prov doctor --repair"), "says what to do: {err}");
    let doctor = case.prov(["doctor"]);
    let said = stdout_of(&doctor);
    assert_eq!(doctor.status.code(), Some(1), "{said}");
    assert!(said.contains("corrupt") && said.contains("prov doctor --repair"), "{said}");

    let repair = case.prov(["doctor", "--repair"]);
    let said = stdout_of(&repair) + &stderr_of(&repair);
    assert!(repair.status.success(), "{}", describe(&repair));
    let aside: Vec<String> = std::fs::read_dir(db.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("prov.db.corrupt-") && !n.ends_with("-wal") && !n.ends_with("-shm"))
        .collect();
    assert_eq!(aside.len(), 1, "the corrupt database is kept aside: {aside:?}; {said}");
    assert!(said.contains(&aside[0]), "the repair names where the old database went: {said}");
    assert_eq!(sqlite3(&db, "PRAGMA integrity_check").trim(), "ok");
    let history = case.query(["history"]);
    for t in &texts {
        assert!(record_with_text(&history, &sh_text(t)).is_some(), "{t} recovered: {history:#?}; {said}");
    }
    // A command whose events were on the garbage pages says it is incomplete.
    let many = record_with_text(&history, &sh_text(MANY)).expect("the big command's row was readable");
    let lost_events = said.contains("lost events");
    assert_eq!(many["complete"], !lost_events, "{many:#}; {said}");
    assert!(stdout_of(&case.prov(["doctor"])).contains("ok    database"));
    // Recording goes on in the new database.
    case.run_sh("echo later > later.txt");
    assert_eq!(case.writer_of("later.txt")["text"], sh_text("echo later > later.txt"));
}

/// Item 11: a database.path that cannot be reached is an error, not "no records yet".
#[test]
fn an_unreachable_database_path_is_an_error() {
    let case = Case::new("faults-db-path");
    case.write_config("[database]\npath = \"/nonexistent-prov-dir/sub/prov.db\"\n");
    let out = case.prov(["query", "history"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(!err.contains("no records yet"), "{err}");
    assert!(err.contains("/nonexistent-prov-dir"), "names the path: {err}");
}

/// Item 11: a query that could not move waiting records in (the database
/// held past its timeout) says that what it shows is not the whole story.
#[test]
fn a_query_that_could_not_ingest_says_so() {
    let case = Case::new("faults-stale");
    case.run_sh("echo first > first.txt");
    data_dir_read_only(&case, true);
    let out = case.run(["sh", "-c", "echo waiting > waiting.txt"]);
    assert!(out.status.success(), "{}", describe(&out));
    data_dir_read_only(&case, false);
    assert_eq!(records_waiting(&case), 1, "{}", case.collector_state());
    let locker = lock_database(&case, "IMMEDIATE");
    let q = case.prov(["query", "history"]);
    locker.release();
    let err = stderr_of(&q);
    assert!(q.status.success(), "{}", describe(&q));
    assert!(stdout_of(&q).contains("echo first > first.txt"), "{}", describe(&q));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("1 record(s)") && err.contains("not shown"), "{err}");
}

/// A database cut short (`truncate -s -40960`: a copy that stopped, a full
/// disk): `prov doctor --repair` gives back the commands on the pages that
/// are left, says what it recovered, and never sends the user round to
/// itself again.
#[test]
fn a_truncated_database_is_repaired_with_what_it_still_holds() {
    let mut tally = Tally::new("database truncated by 40 KiB, repaired");
    let case = Case::new("faults-truncated");
    let texts: Vec<String> = (0..6).map(|i| format!("echo {i} > small{i}.txt")).collect();
    case.run_sh(MANY);
    for t in &texts {
        case.run_sh(t);
    }
    tally.run = 1 + texts.len();
    let db = case.database();
    case.wait_until_closed();
    let len = std::fs::metadata(&db).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&db).unwrap().set_len(len - 40960).unwrap();

    let repair = case.prov(["doctor", "--repair"]);
    let said = stdout_of(&repair) + &stderr_of(&repair);
    assert!(repair.status.success(), "{}", describe(&repair));
    assert!(!said.contains("prov doctor --repair"), "no loop: {said}");
    assert!(said.contains("commands:") && said.contains("row(s) copied"), "says what it recovered: {said}");
    let history = case.query(["history"]);
    tally.found = texts.iter().filter(|t| record_with_text(&history, &sh_text(t)).is_some()).count()
        + record_with_text(&history, &sh_text(MANY)).is_some() as usize;
    tally.status_right = history.iter().filter(|r| r["exit_status"] == 0).count().min(tally.found);
    // Those that lost events on the cut pages say so.
    tally.marked_incomplete = history.iter().filter(|r| r["complete"] == false).count();
    tally.print_row();
    assert!(tally.found > 0, "commands recovered: {said}");
    assert_eq!(sqlite3(&db, "PRAGMA integrity_check").trim(), "ok");
    let again = case.prov(["doctor", "--repair"]);
    assert!(stdout_of(&again).contains("nothing to repair"), "{}", describe(&again));
}

/// The fallback spool of the case's database: where records wait when
/// neither the database nor the spool can be written.
fn fallback_spool(case: &Case) -> PathBuf {
    let key = xxhash_rust::xxh3::xxh3_64(case.database().as_os_str().as_encoded_bytes());
    PathBuf::from(format!("/tmp/prov-{}/spool-{key:016x}", case.inst.uid))
}

/// The fallback spool's parent, made by the user as prov makes it (a test
/// makes the spool itself another user's in it).
fn make_fallback_parent(case: &Case) {
    let parent = fallback_spool(case).parent().unwrap().to_owned();
    let made = case.command("mkdir").args(["-p", "-m", "700"]).arg(&parent).output().unwrap();
    assert!(made.status.success(), "{}", describe(&made));
}

fn records_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl")).count())
        .unwrap_or(0)
}

/// Queries (up to 20 s) until the history holds a record of each text:
/// the collector of the last one may hold its spool file a moment longer.
fn history_with(case: &Case, texts: &[&str]) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let history = case.query(["history"]);
        if texts.iter().all(|t| record_with_text(&history, t).is_some()) || Instant::now() > deadline {
            return history;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Neither the database nor the spool can be written (a read-only home,
/// as on many clusters' compute nodes): `prov doctor` names the fallback
/// spool where records wait meanwhile and fails the spool line, naming the
/// directory, instead of "records wait in the spool" beside "ok spool … is
/// empty". With the fallback spool taken by another user, it says records
/// are lost.
#[test]
fn doctor_names_where_records_wait_when_the_spool_cannot_take_them() {
    let case = Case::new("faults-nowhere");
    case.run_sh("echo first > first.txt");
    case.wait_until_closed();
    let state = case.home.join(".local/state/prov");
    std::fs::create_dir_all(case.spool_dir()).unwrap();
    case.chown_tree(&case.home);
    data_dir_read_only(&case, true);
    set_modes_in(&state, 0o500, 0o400);
    let kept = case.run(["sh", "-c", "echo second > second.txt"]);
    let doctor = stdout_of(&case.prov(["doctor"]));
    let fallback = fallback_spool(&case);
    // Someone else's directory in its place: nowhere is left.
    std::os::unix::fs::chown(&fallback, Some(0), None).unwrap();
    let nowhere = stdout_of(&case.prov(["doctor"]));
    std::os::unix::fs::chown(&fallback, Some(case.inst.uid), None).unwrap();
    data_dir_read_only(&case, false);
    set_modes_in(&state, 0o700, 0o600);
    let shown = fallback.display().to_string();
    assert!(stderr_of(&kept).contains(&format!("kept in {shown}")), "{}", describe(&kept));
    assert!(doctor.contains(&format!("records wait in the fallback spool {shown} meanwhile")), "{doctor}");
    assert!(doctor.contains(&format!("fallback spool {shown}: 1 record(s) waiting")), "{doctor}");
    assert!(!doctor.contains("records wait in the spool meanwhile"), "{doctor}");
    assert!(!doctor.contains("ok    spool"), "{doctor}");
    let spool_line = doctor.lines().find(|l| l.contains("spool") && l.starts_with("FAIL")).unwrap_or_default();
    assert!(spool_line.contains("cannot be written") && spool_line.contains("read-only"), "{doctor}");
    assert!(nowhere.contains("records are LOST meanwhile") && nowhere.contains("belongs to another user"), "{nowhere}");
    // Writable again: the next query moves the record in.
    let history = history_with(&case, &[&sh_text("echo second > second.txt")]);
    assert!(record_with_text(&history, &sh_text("echo second > second.txt")).is_some(), "{history:#?}");
    assert_eq!(records_in(&fallback), 0);
}

/// A read-only home without prov's directories (`chmod 555 $HOME`, a
/// compute node's): neither the database nor the spool can be created.
/// An interactive bash and zsh say once, in one line naming both, that
/// records are kept in the fallback spool; the commands run with their
/// status, and once the home is writable the next query moves them into
/// the journal with that status.
#[test]
fn a_read_only_home_keeps_typed_commands_in_the_fallback_spool() {
    let mut tally = Tally::new("bash, zsh: read-only home (`chmod 555 $HOME`), 2 typed commands each");
    for shell in ["bash", "zsh"] {
        let case = Case::new(&format!("faults-ro-home-{shell}"));
        pty::write_rc(&case, shell, &case.inst.prov(), "");
        chmod(&case.home, 0o555);
        let mut sh = pty::Shell::spawn(&case, shell);
        let mut said = sh.run("echo a > a.txt");
        said += &sh.run("(exit 7)");
        said += &sh.run("echo status=$?");
        assert!(said.contains("status=7"), "{shell}: {said}");
        for _ in 0..3 {
            said += &sh.run("true");
        }
        let doctor = stdout_of(&case.prov(["doctor"]));
        sh.exit();
        chmod(&case.home, 0o755);
        let fallback = fallback_spool(&case).display().to_string();
        let lines: Vec<&str> = said.lines().filter(|l| l.contains("prov: records are")).collect();
        assert_eq!(lines.len(), 1, "{shell}: said once: {said}");
        assert!(lines[0].contains(&format!("records are kept in {fallback}")), "{shell}: {}", lines[0]);
        assert!(lines[0].contains("prov.db") && lines[0].contains("spool"), "{shell}: names both: {}", lines[0]);
        assert!(doctor.contains(&format!("fallback spool {fallback}: ")), "{shell}: {doctor}");
        assert!(!doctor.contains("is empty") && !doctor.contains("wait in the spool meanwhile"), "{shell}: {doctor}");
        let history = history_with(&case, &["echo a > a.txt", "(exit 7)"]);
        let found = [("echo a > a.txt", 0), ("(exit 7)", 7)]
            .map(|(text, status)| record_with_text(&history, text).map(|r| r["exit_status"] == status));
        tally.run += found.len();
        tally.found += found.iter().flatten().count();
        tally.status_right += found.iter().flatten().filter(|right| **right).count();
        tally.print_row();
        let failed = record_with_text(&history, "(exit 7)").unwrap_or_else(|| panic!("{shell}: {history:#?}"));
        assert_eq!(failed["exit_status"], 7, "{shell}: {failed:#}");
        assert!(record_with_text(&history, "echo a > a.txt").is_some(), "{shell}: {history:#?}");
    }
}

/// `~/.local` on a small filesystem, filled: `prov run` says where the
/// record is kept (the fallback spool), not that it is lost, and once space
/// is freed the next query moves it in with its status.
#[test]
fn a_full_filesystem_keeps_records_in_the_fallback_spool() {
    let case = Case::new("faults-full-fs");
    let local = case.home.join(".local");
    let _mount = mount_tmpfs(&local);
    case.chown_tree(&local);
    chmod(&local, 0o755);
    let fill = case
        .command("dd")
        .args(["if=/dev/zero", "bs=64k"])
        .arg(format!("of={}", local.join("fill").display()))
        .output()
        .unwrap();
    assert!(!fill.status.success() && stderr_of(&fill).contains("No space left"), "{}", describe(&fill));
    let out = case.run(["sh", "-c", "echo b > b.txt; exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    let fallback = fallback_spool(&case).display().to_string();
    assert!(stderr_of(&out).contains(&format!("kept in {fallback}")), "{}", describe(&out));
    assert!(!stderr_of(&out).contains("record lost"), "{}", describe(&out));
    // The cause named, not SQLite's "disk I/O error".
    assert!(stderr_of(&out).contains("is full") && !stderr_of(&out).contains("disk I/O"), "{}", describe(&out));
    std::fs::remove_file(local.join("fill")).unwrap();
    let text = sh_text("echo b > b.txt; exit 3");
    let history = history_with(&case, &[&text]);
    let record = record_with_text(&history, &text);
    let mut tally = Tally::new("`~/.local` on a full filesystem, `prov run`");
    tally.run = 1;
    tally.found = record.is_some() as usize;
    tally.status_right = record.is_some_and(|r| r["exit_status"] == 3) as usize;
    tally.print_row();
    let record = record.unwrap_or_else(|| panic!("{history:#?}"));
    assert_eq!(record["exit_status"], 3, "{record:#}");
}

/// Neither the database, nor the spool, nor the fallback spool can be
/// written (a read-only home, the fallback taken by another user): an
/// interactive bash and zsh say once, in one line naming all three, that
/// records are lost; the commands run with their status.
#[test]
fn a_shell_says_once_that_records_are_lost() {
    for shell in ["bash", "zsh"] {
        let case = Case::new(&format!("faults-lost-{shell}"));
        case.run_sh("echo first > first.txt");
        case.wait_until_closed();
        let state = case.home.join(".local/state/prov");
        std::fs::create_dir_all(case.spool_dir()).unwrap();
        case.chown_tree(&case.home);
        let fallback = fallback_spool(&case);
        make_fallback_parent(&case);
        std::fs::create_dir(&fallback).unwrap();
        data_dir_read_only(&case, true);
        set_modes_in(&state, 0o500, 0o400);
        let mut sh = pty::Shell::start(&case, shell);
        let mut said = sh.run("echo a > a.txt; (exit 7); echo status=$?");
        assert!(said.contains("status=7"), "{shell}: {said}");
        for _ in 0..4 {
            said += &sh.run("true");
        }
        sh.exit();
        std::fs::remove_dir(&fallback).unwrap();
        data_dir_read_only(&case, false);
        set_modes_in(&state, 0o700, 0o600);
        let lines: Vec<&str> = said.lines().filter(|l| l.contains("prov: records are")).collect();
        assert_eq!(lines.len(), 1, "{shell}: said once: {said}");
        assert!(lines[0].contains("records are lost"), "{shell}: {}", lines[0]);
        assert!(
            lines[0].contains("prov.db")
                && lines[0].contains("spool")
                && lines[0].contains(&fallback.display().to_string()),
            "{shell}: names all three: {}",
            lines[0]
        );
    }
}

/// The database replaced by a directory: `prov run` and a query name it as
/// one, not as SQLite's "disk I/O error" or "unable to open database file".
#[test]
fn a_database_replaced_by_a_directory_is_named_as_one() {
    let case = Case::new("faults-db-directory");
    case.run_sh("echo first > first.txt");
    case.wait_until_closed();
    let db = case.database();
    std::fs::remove_file(&db).unwrap();
    std::fs::create_dir(&db).unwrap();
    case.chown_tree(&db);
    let run = case.run(["sh", "-c", "exit 2"]);
    let query = case.prov(["query", "history"]);
    std::fs::remove_dir(&db).unwrap();
    assert_eq!(run.status.code(), Some(2), "{}", describe(&run));
    for said in [stderr_of(&run), stderr_of(&query)] {
        assert!(said.contains("is a directory, not a database file"), "{said}");
        assert!(!said.contains("disk I/O") && !said.contains("unable to open"), "{said}");
    }
}
