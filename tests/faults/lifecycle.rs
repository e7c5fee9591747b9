//! Issue 11, items 1, 2, 8 and 10: every command that started has a record
//! from its start, and whoever is still alive ends it truthfully: killed
//! collectors, killed or terminated `prov run`, a stopped collector, and
//! commands that could not be traced at all.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use expectrl::Expect;
use prov_e2e::processes::{collector_answered, collector_of, spawn_prov_run, wait_or_hang, write_fifo};
use prov_e2e::*;
use serde_json::Value;

use super::tally::{record_with_text, Tally};

/// Sends signal `sig` (e.g. "KILL", "STOP") to `pid`.
fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill").args([format!("-{sig}"), pid.to_string()]).status().unwrap();
    assert!(st.success(), "kill -{sig} {pid}");
}

/// Sends SIGCONT to a stopped process when dropped.
struct Continue(u32);

impl Drop for Continue {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-CONT", &self.0.to_string()]).status();
    }
}

fn alive(pid: u32) -> bool {
    // A zombie is gone for our purposes: its descriptors are closed.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

/// Waits until `pid` has exited (a collector finishing in the background).
fn wait_gone(pid: u32, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while alive(pid) {
        assert!(Instant::now() < deadline, "{what} (pid {pid}) never exited");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A pseudo-random delay below `max_ms` (the moments of the kills).
fn random_ms(max_ms: u64, salt: u64) -> u64 {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos() as u64;
    (nanos ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15)) % max_ms
}

fn history(case: &Case) -> Vec<Value> {
    case.query(["history", "-n", "1000"])
}

/// Counts a record as a user checks it: there, ended, with the expected
/// status (`None`: shown as unknown), and saying why it is incomplete.
fn tally_record(t: &mut Tally, records: &[Value], text: &str, status: Option<i64>) -> Result<(), String> {
    t.run += 1;
    let Some(r) = record_with_text(records, text) else { return Err(format!("no record of {text:?}")) };
    t.found += 1;
    let reason = r["incomplete_reason"].as_str().or(r["untraced"].as_str());
    if r["complete"] == false && reason.is_some_and(|s| !s.is_empty()) {
        t.marked_incomplete += 1;
    }
    if r["exit_status"].as_i64() == status && !r["end_ns"].is_null() {
        t.status_right += 1;
    }
    Ok(())
}

/// Item 1: a collector killed at any moment while its command runs leaves a
/// record with text, start, end and status, marked incomplete with why.
#[test]
fn a_killed_collector_leaves_an_ended_record_that_says_so() {
    const KILLS: usize = 50;
    let case = Case::new("lifecycle-kill-collector");
    let mut texts = Vec::new();
    for i in 0..KILLS {
        let script = format!("sleep 0.6; exit {}", i % 7 + 1);
        let run = spawn_prov_run(&case, &script);
        let collector = collector_of(run.id());
        std::thread::sleep(Duration::from_millis(random_ms(400, i as u64)));
        signal(collector, "KILL");
        let out = wait_or_hang(run, Duration::from_secs(60), "prov run with a killed collector");
        assert_eq!(out.status.code(), Some(i as i32 % 7 + 1), "the command's own status: {}", describe(&out));
        texts.push((format!("sh -c '{script}'"), i as i64 % 7 + 1));
    }
    let records = history(&case);
    let mut t = Tally::new("collector killed (kill -9) while its command runs");
    let missing: Vec<String> =
        texts.iter().filter_map(|(text, status)| tally_record(&mut t, &records, text, Some(*status)).err()).collect();
    t.print_row();
    assert!(missing.is_empty(), "{missing:?}; {}", case.collector_state());
    assert_eq!((t.found, t.marked_incomplete, t.status_right), (KILLS, KILLS, KILLS), "{records:#?}");
    let reasons: Vec<&str> = records.iter().filter_map(|r| r["incomplete_reason"].as_str()).collect();
    assert!(reasons.iter().all(|r| r.contains("collector")), "{reasons:?}");
}

/// Item 2: `prov run` killed with SIGKILL: its command goes on; once it is
/// gone the collector ends the record, status unknown (never "success"), and
/// `prov delete` accepts it.
#[test]
fn a_killed_prov_run_leaves_a_record_ended_with_status_unknown() {
    let case = Case::new("lifecycle-kill-run");
    let script = "sleep 1; exit 0";
    let mut run = case.command(case.inst.prov());
    run.env("PROV_SESSION", "killed-run").args(["run", "--", "sh", "-c", script]);
    let run = run.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let collector = collector_of(run.id());
    std::thread::sleep(Duration::from_millis(200));
    signal(run.id(), "KILL");
    let _ = wait_or_hang(run, Duration::from_secs(10), "killed prov run");
    wait_gone(collector, "the collector of a killed prov run");
    let records = history(&case);
    let mut t = Tally::new("prov run killed (kill -9)");
    let text = format!("sh -c '{script}'");
    let found = tally_record(&mut t, &records, &text, None);
    t.print_row();
    found.unwrap();
    let r = record_with_text(&records, &text).unwrap();
    assert!(!r["end_ns"].is_null(), "still running: {r:#}");
    assert!(r["exit_status"].is_null(), "status must be unknown: {r:#}");
    assert_eq!(r["complete"], false, "{r:#}");
    // The human view says unknown, not success.
    let shown = case.prov(["query", "history", "-n", "1"]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("exit ?") && !shown.contains("running"), "{shown}");
    let del = case.prov(["delete", "--session", "killed-run", "--yes"]);
    assert!(String::from_utf8_lossy(&del.stdout).contains("deleted 1 command"), "{}", describe(&del));
}

/// Item 2, at once: `prov run` killed by its own command within
/// milliseconds of the start (before the collector has stored the start it
/// keeps back, see `a_running_command_is_in_the_history_while_it_runs`):
/// the collector still ends the record, saying the caller was gone.
#[test]
fn a_prov_run_killed_at_once_by_its_command_is_ended_by_the_collector() {
    let case = Case::new("lifecycle-kill-run-at-once");
    let script = "kill -9 $PPID; exit 0";
    let out = case.prov(["run", "--", "sh", "-c", script]);
    assert_eq!(out.status.signal(), Some(9), "{}", describe(&out));
    let text = format!("sh -c '{script}'");
    let r = ended_record(&case, &text).unwrap_or_else(|| panic!("no record: {:#?}", history(&case)));
    assert!(!r["end_ns"].is_null() && r["exit_status"].is_null(), "{r:#}");
    let why = r["incomplete_reason"].as_str().unwrap_or_default();
    assert!(why.contains("prov run was gone"), "{r:#}");
}

/// Item 2: `timeout 2 prov run …` (SIGTERM): the command is terminated as
/// it would be without prov, and its record ends with that status.
#[test]
fn a_terminated_prov_run_ends_its_record() {
    let case = Case::new("lifecycle-term-run");
    let script = "sleep 20; exit 0";
    let mut cmd = case.command("timeout");
    cmd.arg("2").arg(case.inst.prov()).args(["run", "--", "sh", "-c", script]);
    let run = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let out = wait_or_hang(run, Duration::from_secs(60), "timeout 2 prov run");
    assert_eq!(out.status.code(), Some(124), "{}", describe(&out));
    let text = format!("sh -c '{script}'");
    // The collector may still be storing: wait (bounded) for the end.
    let deadline = Instant::now() + Duration::from_secs(60);
    let records = loop {
        let records = history(&case);
        let ended = record_with_text(&records, &text).is_some_and(|r| !r["end_ns"].is_null());
        if ended || Instant::now() > deadline {
            break records;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut t = Tally::new("timeout 2 prov run (SIGTERM)");
    let found = tally_record(&mut t, &records, &text, Some(128 + 15));
    t.print_row();
    found.unwrap();
    let r = record_with_text(&records, &text).unwrap();
    assert!(!r["end_ns"].is_null(), "still running: {r:#}");
    assert_eq!(r["exit_status"], 128 + 15, "{r:#}");
}

/// Item 10: a stopped collector does not hold `prov run`: it returns the
/// command's status and says the record follows; the collector finishes
/// the record when it runs again.
#[test]
fn a_stopped_collector_does_not_hold_prov_run() {
    let case = Case::new("lifecycle-stop-collector");
    let script = "echo data > out.txt; sleep 1; exit 6";
    let run = spawn_prov_run(&case, script);
    let collector = collector_answered(&case, run.id());
    std::thread::sleep(Duration::from_millis(300));
    signal(collector, "STOP");
    // Continued whatever happens, so no stopped collector outlives the test.
    let continued = Continue(collector);
    let out = wait_or_hang(run, Duration::from_secs(30), "prov run with a stopped collector");
    drop(continued);
    assert_eq!(out.status.code(), Some(6), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("will follow"), "{err}");
    wait_gone(collector, "the collector, continued");
    let r = case.writer_of_eventually("out.txt");
    let t = Tally {
        run: 1,
        found: 1,
        marked_incomplete: usize::from(r["complete"] == false),
        status_right: usize::from(r["exit_status"] == 6),
        ..Tally::new("collector stopped (SIGSTOP) while prov run waits")
    };
    t.print_row();
    assert_eq!(r["exit_status"], 6, "{r:#}");
    assert_eq!(r["complete"], true, "{r:#}");
}

/// Item 8: commands that ran untraced are recorded with text, times and
/// status and marked untraced with the reason.
#[test]
fn untraced_commands_are_recorded_as_untraced() {
    let case = Case::new("lifecycle-untraced");
    let prov = case.inst.prov().display().to_string();
    let mut t = Tally::new("untraced (deleted cwd, unreadable parent, no helper)");
    // The working directory is gone when the command starts.
    let deleted = format!("mkdir -p gone && cd gone && rmdir ../gone && {prov} run -- sh -c 'exit 7'");
    // The parent of the working directory may not be searched.
    let unreadable = format!(
        "mkdir -p locked/in && cd locked/in && chmod 0 .. && {prov} run -- sh -c 'exit 8'; s=$?; chmod 755 ..; exit $s"
    );
    for (script, status) in [(deleted, 7), (unreadable, 8)] {
        let out = case.command("sh").args(["-c", &script]).output().unwrap();
        assert_eq!(out.status.code(), Some(status), "{}", describe(&out));
    }
    let out = case
        .command(case.inst.prov())
        .env("PROV_HELPER", "/nonexistent/prov-helper")
        .args(["run", "--", "sh", "-c", "exit 9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(9), "{}", describe(&out));
    let records = history(&case);
    let mut missing = Vec::new();
    for (text, status) in [("sh -c 'exit 7'", 7), ("sh -c 'exit 8'", 8), ("sh -c 'exit 9'", 9)] {
        if let Err(e) = tally_record(&mut t, &records, text, Some(status)) {
            missing.push(e);
        }
    }
    t.print_row();
    assert!(missing.is_empty(), "{missing:?}: {records:#?}");
    // The join helper's words: a deleted directory cannot even be named.
    for (text, why) in
        [("sh -c 'exit 7'", "directory"), ("sh -c 'exit 8'", "cannot enter"), ("sh -c 'exit 9'", "nonexistent")]
    {
        let r = record_with_text(&records, text).unwrap();
        assert_eq!(r["complete"], false, "{r:#}");
        let untraced = r["untraced"].as_str().unwrap_or_else(|| panic!("not marked untraced: {r:#}"));
        assert!(untraced.contains(why), "{text}: {untraced}");
    }
    // No query mistakes them for traced commands that touched no files.
    let incomplete = case.query(["history", "--incomplete"]);
    assert_eq!(incomplete.len(), 3, "{incomplete:#?}");
}

/// Item 8 in an interactive shell: with no observation to be had (the
/// helper removed from the installation), every typed command still has its
/// record (text, times, status), marked untraced with the words the shell
/// printed; a line typed with a leading space stays out, as when traced.
fn an_interactive_shell_without_tracing_still_records(shell: &'static str) {
    let case = Case::new(&format!("lifecycle-shell-untraced-{shell}"));
    let mut t = Tally::new(if shell == "bash" { "bash without the helper" } else { "zsh without the helper" });
    // A private copy of the installation, outside the user's home.
    let prefix = case.home.parent().unwrap().join("prefix");
    let st = Command::new("cp").arg("-a").arg(&case.inst.prefix).arg(&prefix).status().unwrap();
    assert!(st.success());
    std::fs::remove_file(prefix.join("libexec/prov/prov-helper")).unwrap();
    case.write_config("[shell]\nskip_space_prefixed = true\n");
    let mut sh = pty::Shell::start_with(&case, shell, "", &prefix.join("bin/prov"));
    let typed = [("echo one > one.txt", 0), ("(exit 4)", 4), ("/bin/echo three; false", 1)];
    let mut said = String::new();
    for (line, _) in typed {
        said += &sh.run(line);
    }
    said += &sh.run(" echo private");
    sh.exit();
    assert!(said.matches("not tracing").count() <= 1, "at most one line per cause: {said}");
    // Stored by the shell's preparer after each command, not on its way.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut records = history(&case);
    while typed.iter().any(|(line, _)| record_with_text(&records, line).is_none()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        records = history(&case);
    }
    let mut missing = Vec::new();
    for (line, status) in typed {
        if let Err(e) = tally_record(&mut t, &records, line, Some(status)) {
            missing.push(e);
        }
    }
    t.print_row();
    assert!(missing.is_empty(), "{missing:?}: {records:#?}");
    assert_eq!((t.marked_incomplete, t.status_right), (3, 3), "{records:#?}");
    for (line, _) in typed {
        let r = record_with_text(&records, line).unwrap();
        let untraced = r["untraced"].as_str().unwrap_or_else(|| panic!("not marked untraced: {r:#}"));
        assert!(untraced.contains("prov-helper"), "{line}: {untraced}");
        assert_eq!(r["shell"], shell, "{r:#}");
    }
    assert!(record_with_text(&records, " echo private").is_none(), "{records:#?}");
    assert!(record_with_text(&records, "echo private").is_none(), "{records:#?}");
}

#[test]
fn an_interactive_bash_without_tracing_still_records() {
    an_interactive_shell_without_tracing_still_records("bash");
}

#[test]
fn an_interactive_zsh_without_tracing_still_records() {
    an_interactive_shell_without_tracing_still_records("zsh");
}

/// The record of `text`, once it has an end, waited for (bounded): the
/// collector ends it when the last process of the command is gone.
fn ended_record(case: &Case, text: &str) -> Option<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let records = history(case);
        let found = record_with_text(&records, text).cloned();
        if found.as_ref().is_some_and(|r| !r["end_ns"].is_null()) || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The record of `text`, once it exists, waited for (bounded): the command
/// has started and its start is stored.
fn started_record(case: &Case, text: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(r) = record_with_text(&history(case), text) {
            return r.clone();
        }
        assert!(Instant::now() < deadline, "no record of the running command");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Item 2 in a shell session (zsh: the text is known at the start): a typed
/// A shell killed by hang-up while a command runs leaves a record that is
/// ended, status unknown, not "running" forever. A typed `exit` is a
/// command like any other: ended, with the status the shell exits with.
#[test]
fn a_shell_that_exits_or_hangs_up_leaves_no_running_record() {
    let case = Case::new("lifecycle-shell-gone");
    let mut t = Tally::new("zsh: hang-up during a command");
    let sh = pty::Shell::start(&case, "zsh");
    sh.exit();
    let exit = ended_record(&case, "exit").expect("the typed exit is recorded");
    assert_eq!((&exit["exit_status"], &exit["complete"]), (&0.into(), &true.into()), "{exit:#?}");
    let mut sh = pty::Shell::start(&case, "zsh");
    sh.run("echo before > before.txt");
    sh.session.send_line("sleep 30").unwrap();
    // The command has started once its record exists.
    started_record(&case, "sleep 30");
    signal(sh.pid, "HUP");
    let mut found = Vec::new();
    for text in ["sleep 30"] {
        t.run += 1;
        let Some(r) = ended_record(&case, text) else { continue };
        t.found += 1;
        if r["complete"] == false && r["incomplete_reason"].as_str().is_some() {
            t.marked_incomplete += 1;
        }
        if r["exit_status"].is_null() && !r["end_ns"].is_null() {
            t.status_right += 1;
        }
        found.push(r);
    }
    t.print_row();
    assert_eq!((t.found, t.marked_incomplete, t.status_right), (1, 1, 1), "{found:#?}");
}

/// Item 1: a `prov run` command that runs for a while, opening no file, is
/// in the history while it runs (no end yet), and once it ends, ended with
/// its status. (`prov run` keeps the start in a file of its own, so the
/// collector's writer stores it with the first events, the end, or at the
/// latest 200 ms after the start: docs/architecture.md.)
#[test]
fn a_running_command_is_in_the_history_while_it_runs() {
    let case = Case::new("lifecycle-running");
    let fifo = case.work.join("release");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    case.chown_tree(&fifo);
    let script = "read x < release; exit 3";
    let run = spawn_prov_run(&case, script);
    let text = format!("sh -c '{script}'");
    let running = started_record(&case, &text);
    assert!(running["end_ns"].is_null() && running["exit_status"].is_null(), "{running:#}");
    write_fifo(&fifo, b"go\n");
    let out = wait_or_hang(run, Duration::from_secs(60), "prov run");
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    let ended = ended_record(&case, &text).unwrap();
    assert_eq!(ended["exit_status"], 3, "{ended:#}");
}

/// Item 2: when nobody who knew is left (the collector and `prov run`
/// both killed while the command runs), the next `prov` finds the dead
/// collector and ends the record: status unknown, and why.
#[test]
fn the_next_prov_ends_a_record_whose_collector_is_gone() {
    let case = Case::new("lifecycle-orphan");
    let script = "sleep 1; exit 0";
    let run = spawn_prov_run(&case, script);
    let collector = collector_of(run.id());
    // Its record exists once the writer has begun it.
    let text = format!("sh -c '{script}'");
    started_record(&case, &text);
    signal(run.id(), "KILL");
    signal(collector, "KILL");
    let _ = wait_or_hang(run, Duration::from_secs(10), "killed prov run");
    wait_gone(collector, "the killed collector");
    let records = history(&case);
    let mut t = Tally::new("collector and prov run killed (kill -9)");
    let found = tally_record(&mut t, &records, &text, None);
    t.print_row();
    found.unwrap();
    let r = record_with_text(&records, &text).unwrap();
    assert!(!r["end_ns"].is_null() && r["exit_status"].is_null(), "{r:#}");
    assert!(r["incomplete_reason"].as_str().is_some_and(|s| s.contains("collector was gone")), "{r:#}");
}

/// An idle traced shell holds the observation for its next line ready, but
/// lets the writer of it go after its idle time (30 s), and an observation
/// prepared ahead for lines typed quickly (as the harness types them):
/// three processes are left, the preparer, the holder and the collector
/// (four or seven before). The next line typed is recorded as before, its
/// writer started again while it runs, and a query typed right after it
/// finds it.
fn an_idle_shell_lets_its_writer_go(shell: &'static str) {
    let case = Case::new(&format!("lifecycle-idle-writer-{shell}"));
    let mut sh = pty::Shell::start(&case, shell);
    sh.run("echo one > one.txt");
    let pid = sh.session.get_process().pid().as_raw() as u32;
    let below = || {
        // The preparer is `prov`, or the full build it execs (install.sh).
        let mut names: Vec<String> = prov_e2e::processes::descendants_of(pid)
            .into_iter()
            .map(|(_, n)| if n == "prov-full" { "prov".into() } else { n })
            .collect();
        names.sort();
        names
    };
    let tree = || {
        let ps = Command::new("ps").args(["-u", "provtest", "--forest", "-o", "pid,ppid,nlwp,etimes,args"]).output();
        ps.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default()
    };
    let idle = ["prov", "prov-collector", "prov-helper"];
    let deadline = Instant::now() + Duration::from_secs(90);
    while below() != idle && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(below(), idle, "{shell}: what an idle shell keeps after 90 s:\n{}", tree());
    sh.run("echo two > two.txt");
    let out = sh.run(&format!("{} query wrote two.txt", case.inst.prov().display()));
    assert!(out.contains("echo two > two.txt"), "{shell}: the query right after finds it: {out}");
    let two = case.writer_of("two.txt");
    assert_eq!((&two["exit_status"], &two["complete"]), (&0.into(), &true.into()), "{two:#?}");
    let one = case.writer_of("one.txt");
    assert_eq!(one["text"], "echo one > one.txt", "{one:#?}");
}

#[test]
fn an_idle_bash_lets_its_writer_go() {
    an_idle_shell_lets_its_writer_go("bash");
}

#[test]
fn an_idle_zsh_lets_its_writer_go() {
    an_idle_shell_lets_its_writer_go("zsh");
}
