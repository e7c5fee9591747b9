//! How a record gets its end when what observed it is gone: a record an
//! older prov left unended is ended, and an end that waits in the spool is
//! the one the record keeps.

use std::path::Path;
use std::process::{Command, Output};

use prov_e2e::processes::preparers;
use prov_e2e::*;

use super::tally::{record_with_text, Tally};

/// `sqlite3 DB SQL` as root, waiting for a writer that still holds it.
fn sqlite3(db: &Path, sql: &str) -> String {
    let out = Command::new("sqlite3").args(["-cmd", ".timeout 10000"]).arg(db).arg(sql).output().unwrap();
    assert!(out.status.success(), "sqlite3 {sql}: {}", describe(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `prov run -- sh -c SCRIPT` with no run preparer: its collector exits
/// once the record is stored, rather than waiting for the next run.
fn run_alone(case: &Case, script: &str) -> Output {
    let out = case
        .command(case.inst.prov())
        .env("PROV_RUN_LINGER", "0")
        .args(["run", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert_traced(&out);
    out
}

/// An upgrade from a prov that did not name the collector of a record:
/// its records left without an end (the shell or collector killed before
/// the upgrade) are ended by the next prov, incomplete with the reason,
/// once no collector that could observe them is left.
#[test]
fn a_record_left_unended_by_an_older_prov_is_ended() {
    let mut tally = Tally::new("record left unended by an older version");
    let case = Case::new("faults-old-unended");
    let script = "echo old > old.txt; exit 3";
    let out = run_alone(&case, script);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    tally.run = 1;
    case.wait_until_closed();
    // As an older prov left it before the upgrade, an hour ago: no end, no
    // status, no collector named.
    sqlite3(
        &case.database(),
        "UPDATE commands SET end_ns = NULL, exit_status = NULL, observer = NULL, start_ns = start_ns - 3600000000000",
    );

    let history = case.query(["history"]);
    let record = record_with_text(&history, &format!("sh -c '{script}'"));
    tally.found = record.is_some() as usize;
    let reason = record.and_then(|r| r["incomplete_reason"].as_str()).unwrap_or_default().to_owned();
    tally.marked_incomplete = (!reason.is_empty()) as usize;
    // Its status is unknown, and says so.
    tally.status_right = record.is_some_and(|r| r["exit_status"].is_null()) as usize;
    tally.print_row();
    let record = record.unwrap_or_else(|| panic!("{history:#?}"));
    assert!(!record["end_ns"].is_null(), "ended: {record:#}");
    assert!(reason.contains("collector was gone"), "{record:#}");
    let stats = case.prov(["stats", "--json"]);
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(stats["running_or_unfinished"], 0, "{stats:#}");
}

/// A record whose end waits in the spool while its collector is gone (the
/// database could not take the end, or a writer still holds the file): the
/// next query leaves it to the spool rather than ending it with its own
/// time, and once the spool is moved in, the record has the command's end
/// time and status, without the "collector was gone" guess.
#[test]
fn a_spooled_end_is_the_end_the_record_keeps() {
    let mut tally = Tally::new("end waiting in the spool, collector gone");
    let case = Case::new("faults-spooled-end");
    let script = "echo late > late.txt";
    run_alone(&case, script);
    tally.run = 1;
    case.wait_until_closed();
    let uuid = sqlite3(&case.database(), "SELECT uuid FROM commands").trim().to_owned();
    // The command ended with status 5 at a time of its own; its collector
    // is gone (another boot's) and the end is in the spool only.
    let end_ns: i64 = sqlite3(&case.database(), "SELECT start_ns + 1000000 FROM commands").trim().parse().unwrap();
    sqlite3(&case.database(), "UPDATE commands SET end_ns = NULL, exit_status = NULL, observer = 'another-boot:1:1'");
    let spool = case.spool_dir();
    std::fs::create_dir_all(&spool).unwrap();
    let file = spool.join(format!("{uuid}.jsonl"));
    let end = format!(
        "{{\"End\":{{\"end_ns\":{end_ns},\"exit_status\":5,\"text\":null,\"incomplete\":null,\"untraced\":null}}}}\n"
    );
    std::fs::write(&file, end).unwrap();
    case.chown_tree(&case.home);
    // A writer still holds it: the first query cannot move it in.
    let held = std::fs::File::open(&file).unwrap();
    held.lock().unwrap();
    case.query(["history"]);
    drop(held);

    let history = case.query(["history"]);
    let record = record_with_text(&history, &format!("sh -c '{script}'"));
    tally.found = record.is_some() as usize;
    tally.status_right = record.is_some_and(|r| r["exit_status"] == 5 && r["end_ns"] == end_ns) as usize;
    tally.print_row();
    let record = record.unwrap_or_else(|| panic!("{history:#?}; {}", case.collector_state()));
    assert_eq!(record["exit_status"], 5, "{record:#}");
    assert_eq!(record["end_ns"], end_ns, "{record:#}");
    assert!(record["incomplete_reason"].is_null(), "{record:#}");
    assert!(!file.exists(), "moved in: {}", case.collector_state());
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

/// The writer of an observation kept ready is killed while it waits: that
/// observation is not handed out, and the next command's record is stored
/// whole rather than saying "the database writer stopped".
#[test]
fn a_ready_observation_whose_writer_died_is_not_handed_out() {
    use prov_e2e::processes::children_of;
    let mut tally = Tally::new("writer of a ready observation killed");
    let case = Case::new("faults-ready-writer");
    case.run_sh("true");
    let mut ready = 0;
    wait_until("a preparer keeps an observation ready", || {
        ready = preparers(&case)
            .into_iter()
            .find_map(|p| children_of(p).into_iter().find(|(_, n)| n == "prov-collector").map(|(c, _)| c))
            .unwrap_or(0);
        ready != 0
    });
    let writer = children_of(ready).into_iter().find(|(_, n)| n == "prov-writer").map(|(p, _)| p).expect("a writer");
    pty::nix_kill(writer);
    // Its collector ends rather than wait for a record it cannot store.
    wait_until("the collector of the dead writer ends", || !alive(ready));

    let script = "echo after > after.txt; exit 4";
    let out = case.run(["sh", "-c", script]);
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    tally.run = 1;
    let history = case.query(["history"]);
    let record = record_with_text(&history, &format!("sh -c '{script}'"));
    tally.found = record.is_some() as usize;
    tally.status_right = record.is_some_and(|r| r["exit_status"] == 4) as usize;
    tally.print_row();
    let record = record.unwrap_or_else(|| panic!("{history:#?}; {}", case.collector_state()));
    assert!(record["incomplete_reason"].is_null(), "{record:#}");
    assert_eq!(case.writer_of("after.txt")["exit_status"], 4);
}

/// An interactive command whose collector, or whose collector's writer, is
/// killed while it runs keeps the exit status the shell knew and its own
/// end time (before the next command's start, not at the next prov call),
/// marked incomplete with the reason: bash and zsh.
#[test]
fn a_typed_command_whose_collector_or_writer_is_killed_keeps_its_status() {
    use expectrl::Expect;
    use prov_e2e::processes::{children_of, collector_of_child_of};
    let mut tally = Tally::new("typed command, collector or writer killed (bash, zsh)");
    for shell in ["bash", "zsh"] {
        for victim in ["prov-collector", "prov-writer"] {
            let case = Case::new(&format!("faults-killed-typed-{shell}-{victim}"));
            let mut sh = pty::Shell::start(&case, shell);
            let text = "echo x > x.txt; sleep 3; (exit 5)";
            sh.session.send_line(text).unwrap();
            let collector = collector_of_child_of(sh.pid, "sleep").expect("an observed sleep");
            // Its start is stored (bash's comes with its first events): what
            // the shell has to keep is the end.
            wait_until("the running command's record", || {
                case.query(["history"]).iter().any(|r| r["end_ns"].is_null())
            });
            let pid = match victim {
                "prov-collector" => collector,
                _ => children_of(collector).into_iter().find(|(_, n)| n == victim).expect("a writer").0,
            };
            pty::nix_kill(pid);
            sh.wait_prompt();
            sh.run("echo next > next.txt");
            sh.exit();
            tally.run += 1;
            let history = case.query(["history"]);
            let killed = record_with_text(&history, text);
            tally.found += killed.is_some() as usize;
            tally.status_right += killed.is_some_and(|r| r["exit_status"] == 5) as usize;
            tally.marked_incomplete += killed.is_some_and(|r| !r["incomplete_reason"].is_null()) as usize;
            let killed = killed.unwrap_or_else(|| panic!("{shell}, {victim}: {history:#?}"));
            let next = record_with_text(&history, "echo next > next.txt").expect("the next command's record");
            assert_eq!(killed["exit_status"], 5, "{shell}, {victim}: {killed:#}");
            assert!(
                killed["end_ns"].as_i64().is_some_and(|end| end < next["start_ns"].as_i64().unwrap()),
                "{shell}, {victim}: ends before the next command starts: {killed:#} {next:#}"
            );
            assert!(!killed["incomplete_reason"].is_null(), "{shell}, {victim}: {killed:#}");
        }
    }
    tally.print_row();
}
