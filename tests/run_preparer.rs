//! Issue 15: `prov run` takes an observation its user's preparer
//! (`prov __run-preparer`) keeps ready, so the helper, collector and writer
//! starts are off the command's path. The preparer is started by the first
//! `prov run`, lingers, and exits when idle; a killed preparer or a killed
//! ready collector costs nothing but speed; two runs at once never share an
//! observation; another user gets nothing through its socket.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use prov_e2e::processes::{children_of, collector_of, preparers, status_field, wait_or_hang, write_fifo};
use prov_e2e::*;

/// Seconds an idle preparer stays in these tests.
const LINGER: &str = "3";

fn run(case: &Case, script: &str) -> Command {
    let mut cmd = case.command(case.inst.prov());
    cmd.env("PROV_RUN_LINGER", LINGER).args(["run", "--", "sh", "-c", script]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

fn run_ok(case: &Case, script: &str) -> Output {
    let out = run(case, script).output().unwrap();
    assert_traced(&out);
    assert!(out.status.success(), "{script}: {}", describe(&out));
    assert!(out.stderr.is_empty(), "{script}: {}", describe(&out));
    out
}

fn state_dir(case: &Case) -> PathBuf {
    case.home.join(".local/state/prov")
}

/// The preparer's socket, once it listens.
fn socket(case: &Case) -> Option<PathBuf> {
    std::fs::read_dir(state_dir(case)).ok()?.flatten().map(|e| e.path()).find(|p| {
        p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("run-"))
            && p.extension().is_some_and(|x| x == "sock")
    })
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A preparer started by a first run, with an observation ready: its
/// pid and its ready collector's.
fn warm(case: &Case) -> (u32, u32) {
    run_ok(case, "true");
    wait_until("the first prov run starts a preparer", || preparers(case).len() == 1 && socket(case).is_some());
    let preparer = preparers(case)[0];
    let mut ready = 0;
    wait_until("the preparer keeps an observation ready", || {
        ready = children_of(preparer).into_iter().find(|(_, n)| n == "prov-collector").map_or(0, |(p, _)| p);
        ready != 0
    });
    (preparer, ready)
}

/// `run`, its stderr going to a file, as a batch job's or a terminal's
/// does: `prov run` then hands its record to the preparer (a pipe's reader
/// would wait for the preparer to let it go: see crates/prov-cli/src/run/handover.rs).
fn run_with_stderr_file(case: &Case, script: &str) -> (std::process::Child, PathBuf) {
    let path = case.work.join(format!("stderr-{}.txt", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    case.chown_tree(&path);
    (run(case, script).stderr(file).spawn().unwrap(), path)
}

/// A run on the ready observation of a warm preparer whose writer is then
/// stopped (the caller continues it): the preparer, the writer, the run and
/// its stderr file.
fn run_with_writer_stopped(case: &Case, script: &str) -> (u32, u32, std::process::Child, PathBuf) {
    let (preparer, ready) = warm(case);
    let writer = writer_of(ready);
    let (run, stderr) = run_with_stderr_file(case, script);
    assert_eq!(collector_of(run.id()), ready, "the run took the ready observation");
    signal(writer, "STOP");
    (preparer, writer, run, stderr)
}

/// Waits until no start file is left ended but held: the record finished.
fn wait_until_finished(case: &Case) {
    wait_until("the preparer finishes the record", || {
        std::fs::read_dir(case.spool_dir())
            .map(|d| d.flatten().all(|e| !e.file_name().to_string_lossy().ends_with(".ended.jsonl")))
            .unwrap_or(true)
    });
}

/// The writer of collector `collector`.
fn writer_of(collector: u32) -> u32 {
    children_of(collector).into_iter().find(|(_, n)| n == "prov-writer").map(|(p, _)| p).expect("a writer")
}

/// Sends signal `sig` (e.g. "STOP") to `pid`.
fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill").args([format!("-{sig}"), pid.to_string()]).status().unwrap();
    assert!(st.success(), "kill -{sig} {pid}");
}

fn parent_of(pid: u32) -> Option<u32> {
    status_field(pid, "PPid")?.parse().ok()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[test]
fn prov_run_takes_the_ready_observation_and_the_preparer_exits_when_idle() {
    let case = Case::new("run-preparer-linger");
    let (preparer, ready) = warm(&case);
    // This run's collector is the one that was ready, not a child of its own.
    let child = run(&case, "echo pooled > pooled.txt; sleep 1").spawn().unwrap();
    let collector = collector_of(child.id());
    assert_eq!(collector, ready, "the run took the ready observation");
    assert_eq!(parent_of(collector), Some(preparer));
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{}", describe(&out));
    let r = case.writer_of_eventually("pooled.txt");
    assert_eq!((r["complete"].as_bool(), r["exit_status"].as_i64()), (Some(true), Some(0)), "{r:#}");
    // An observation is ready again (the same one, its command having left
    // it clean: see the reuse tests below), then, idle for LINGER seconds,
    // the preparer leaves with it.
    let mut next = 0;
    wait_until("the preparer has an observation ready again", || {
        next = children_of(preparer).into_iter().find(|(_, n)| n == "prov-collector").map_or(0, |(p, _)| p);
        next != 0
    });
    wait_until("an idle preparer exits", || !alive(preparer));
    wait_until("its ready collector exits with it", || !alive(next));
    assert!(socket(&case).is_none(), "the socket is removed");
    assert!(preparers(&case).is_empty());
    // The next run works the direct way and starts a preparer again.
    run_ok(&case, "echo again > again.txt");
    wait_until("a new preparer", || preparers(&case).len() == 1);
}

#[test]
fn concurrent_prov_runs_get_distinct_observations() {
    let case = Case::new("run-preparer-concurrent");
    warm(&case);
    const RUNS: usize = 6;
    let children: Vec<_> = (0..RUNS)
        .map(|i| run(&case, &format!("echo {i} > out{i}.txt; cat out{i}.txt; sleep 0.5")).spawn().unwrap())
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert_traced(&out);
        assert!(out.status.success(), "{}", describe(&out));
    }
    for i in 0..RUNS {
        let r = case.writer_of_eventually(&format!("out{i}.txt"));
        assert_eq!(r["text"], format!("sh -c 'echo {i} > out{i}.txt; cat out{i}.txt; sleep 0.5'"), "{r:#}");
        assert_eq!(r["complete"], true, "{r:#}");
        // Its own files only: no other run's output in its record.
        let files: Vec<String> = r["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f["path"].as_str().map(str::to_string))
            .filter(|p| p.contains("/out"))
            .collect();
        assert!(files.iter().all(|p| p.ends_with(&format!("/out{i}.txt"))), "run {i}: {files:?}");
    }
    let uuids: std::collections::HashSet<String> =
        case.query(["history", "-n", "100"]).iter().filter_map(|r| r["uuid"].as_str().map(str::to_string)).collect();
    assert_eq!(uuids.len(), RUNS + 1, "one record each");
}

#[test]
fn a_killed_preparer_or_ready_collector_makes_prov_run_fall_back() {
    let case = Case::new("run-preparer-killed");
    let (preparer, ready) = warm(&case);
    // The ready collector killed: the run is traced all the same.
    signal(ready, "KILL");
    wait_until("the killed ready collector is gone", || !alive(ready));
    run_ok(&case, "echo one > one.txt");
    let r = case.writer_of_eventually("one.txt");
    assert_eq!(r["complete"], true, "{r:#}");
    // The preparer killed (its socket left behind): the next run works the
    // direct way, and a new preparer replaces it.
    signal(preparer, "KILL");
    wait_until("the killed preparer is gone", || !alive(preparer));
    assert!(socket(&case).is_some(), "a killed preparer leaves its socket");
    let child = run(&case, "echo two > two.txt; sleep 0.5").spawn().unwrap();
    let collector = collector_of(child.id());
    assert_eq!(parent_of(collector), Some(child.id()), "the run prepared its own observation");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{}", describe(&out));
    let r = case.writer_of_eventually("two.txt");
    assert_eq!(r["complete"], true, "{r:#}");
    wait_until("a new preparer replaces the killed one", || preparers(&case).iter().any(|&p| p != preparer));
    let new = preparers(&case)[0];
    wait_until("the new preparer keeps an observation ready", || {
        children_of(new).iter().any(|(_, n)| n == "prov-collector")
    });
    // A collector the preparer handed out and that is killed: prov run
    // stores the end itself and says how the collector ended.
    let child = run(&case, "sleep 1; exit 4").spawn().unwrap();
    let collector = collector_of(child.id());
    assert_eq!(parent_of(collector), Some(new), "the run took the new preparer's observation");
    signal(collector, "KILL");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("record incomplete") && err.contains("killed by SIGKILL"), "{err}");
    let r = case.last_command_ended();
    assert_eq!((r["exit_status"].as_i64(), r["complete"].as_bool()), (Some(4), Some(false)), "{r:#}");
}

/// What `nobody` gets from connecting to the user's preparer socket (a
/// Python client: SOCK_SEQPACKET, descriptors counted): "denied", or the
/// message and the number of descriptors.
fn connect_as_nobody(sock: &std::path::Path) -> String {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid", "nobody", "--regid", "nogroup", "--clear-groups", "--"]);
    connect_as(cmd, sock)
}

/// What a Python client started by `prefix` (a `setpriv … --` and the
/// like) gets from the preparer socket: "denied", or the message and the
/// number of descriptors.
fn connect_as(mut prefix: Command, sock: &std::path::Path) -> String {
    let script = r#"
import array, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.settimeout(5)
try:
    s.connect(sys.argv[1])
except PermissionError:
    print("denied"); sys.exit(0)
try:
    msg, anc, _, _ = s.recvmsg(1024, socket.CMSG_SPACE(16 * 4))
except socket.timeout:
    print("timeout"); sys.exit(0)
fds = sum(len(d) // 4 for (l, t, d) in anc if l == socket.SOL_SOCKET and t == socket.SCM_RIGHTS)
print(repr(msg), fds)
"#;
    let out = prefix.args(["/usr/bin/python3", "-c", script]).arg(sock).output().unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn another_user_gets_nothing_through_the_preparer_socket() {
    use std::os::unix::fs::PermissionsExt;
    let case = Case::new("run-preparer-other-user");
    warm(&case);
    let sock = socket(&case).unwrap();
    // The directory is the user's alone.
    assert_eq!(connect_as_nobody(&sock), "denied");
    // Even with every directory on the way and the socket opened to all,
    // the preparer hands another uid nothing.
    let mut dir = sock.parent().unwrap().to_path_buf();
    while dir.starts_with(&case.home) {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir.pop();
    }
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert_eq!(connect_as_nobody(&sock), "b'' 0");
    // The user is still served.
    run_ok(&case, "echo mine > mine.txt");
    assert_eq!(case.writer_of_eventually("mine.txt")["complete"], true);
}

/// The record's start is `prov run`'s to keep (a spool file of its own,
/// written before the command starts), not the writer's commit to wait
/// for: with the writer stalled, the command still starts at once, and when
/// `prov run` returns its command's status once the command has ended, not
/// once the record is stored: the writer stopped while the command runs is
/// continued only after `prov run` has returned, and nothing is said (before,
/// `prov run` waited for it 5 s and said the record would follow). The
/// preparer finishes the record (run/handover.rs), and a query run meanwhile
/// waits for it (beside another `prov run` whose command still runs, which
/// it does not wait for: see prov-store's `a_query_waits_for_ended_files_only`).
#[test]
fn prov_run_returns_before_its_record_is_stored_and_a_query_waits_for_it() {
    let case = Case::new("run-preparer-finisher");
    let (_, writer, mut run, stderr) = run_with_writer_stopped(&case, "echo data > out.txt; sleep 1; exit 5");
    let mut running = self::run(&case, "sleep 120").spawn().unwrap();
    let status = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    signal(writer, "CONT");
    assert_eq!(status.code(), Some(5));
    // A query now waits for the record (the preparer's), not for the
    // command still running.
    let r = case.writer_of("out.txt");
    assert_eq!((r["complete"].as_bool(), r["exit_status"].as_i64()), (Some(true), Some(5)), "{r:#}");
    // Nothing to say.
    let err = std::fs::read_to_string(&stderr).unwrap();
    assert!(err.is_empty(), "{err}");
    // The other run is listed as running. Its start is stored by its own
    // collector's writer, which waited for the stopped writer's lock: it
    // may come a moment after the record the query waited for.
    wait_until("the running command is listed", || {
        case.query(["history", "-n", "5"]).iter().any(|r| r["text"] == "sh -c 'sleep 120'" && r["end_ns"].is_null())
    });
    running.kill().unwrap();
    let _ = running.wait();
}

/// A problem storing the record is still told on `prov run`'s stderr, by
/// the preparer that finishes it once `prov run` has returned: with the
/// database locked, the record goes to the spool, and the line says so.
#[test]
fn a_record_finished_by_the_preparer_still_tells_its_problem() {
    let case = Case::new("run-preparer-handover-problem");
    let (_, ready) = warm(&case);
    let locker = lock_database(&case, "EXCLUSIVE");
    let (mut run, stderr) = run_with_stderr_file(&case, "echo locked > locked.txt; sleep 1; exit 4");
    assert_eq!(collector_of(run.id()), ready, "the run took the ready observation");
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(4));
    wait_until_finished(&case);
    locker.release();
    let err = std::fs::read_to_string(&stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("database unavailable") && err.contains("spool"), "{err}");
    let r = case.writer_of_eventually("locked.txt");
    assert_eq!((r["complete"].as_bool(), r["exit_status"].as_i64()), (Some(true), Some(4)), "{r:#}");
}

/// The preparer killed while it finishes a record for a `prov run` that has
/// returned (a batch job's end may kill it): `prov run` sent the end before
/// it handed the rest over, so the collector stores the whole record, and
/// the start file the preparer held is ingested without doubling it.
#[test]
fn a_preparer_killed_while_it_finishes_a_record_leaves_the_record_whole() {
    let case = Case::new("run-preparer-handover-killed");
    let (preparer, writer, mut run, _stderr) = run_with_writer_stopped(&case, "echo data > out.txt; sleep 1; exit 5");
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(5));
    // The process holding the start file, renamed as ended: the preparer.
    let spool = case.spool_dir();
    let ended = std::fs::read_dir(&spool)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".ended.jsonl"))
        .unwrap_or_else(|| panic!("no ended start file: {}", case.collector_state()));
    let holder = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .find(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd"))
                .is_ok_and(|fds| fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l == ended)))
        })
        .expect("a process holds the ended start file");
    assert_eq!(holder, preparer, "the preparer finishes the record");
    signal(preparer, "KILL");
    wait_until("the preparer is gone", || !alive(preparer));
    signal(writer, "CONT");
    let r = case.writer_of_eventually("out.txt");
    assert_eq!((r["complete"].as_bool(), r["exit_status"].as_i64()), (Some(true), Some(5)), "{r:#}");
    wait_until("the start file is ingested", || {
        let _ = case.query(["history", "-n", "1"]);
        !ended.exists()
    });
    let history = case.query(["history", "-n", "10"]);
    assert_eq!(history.iter().filter(|r| r["text"] == "sh -c 'echo data > out.txt; sleep 1; exit 5'").count(), 1);
}

/// `prov run` sends `End` with its pidfd when it means to hand the record
/// over, and the collector then waits for it to exit before storing the
/// end. With the preparer killed while the command runs, the handover
/// fails and `prov run` waits for `Stored` itself: the collector's wait is
/// bounded, so the record is stored and `prov run` says nothing (a wait for
/// an exit that never comes would end in "still storing" after 5 s).
#[test]
fn a_run_whose_handover_fails_still_gets_its_record_stored() {
    let case = Case::new("run-preparer-handover-fails");
    let (preparer, ready) = warm(&case);
    let release = case.work.join("release");
    assert!(Command::new("mkfifo").arg(&release).status().unwrap().success());
    case.chown_tree(&release);
    let (run, stderr) = run_with_stderr_file(&case, "read x < release; echo done > done.txt; exit 4");
    assert_eq!(collector_of(run.id()), ready, "the run took the ready observation");
    signal(preparer, "KILL");
    wait_until("the preparer is gone", || !alive(preparer));
    write_fifo(&release, b"go\n");
    let out = wait_or_hang(run, Duration::from_secs(60), "prov run");
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    let said = std::fs::read_to_string(&stderr).unwrap();
    assert!(said.is_empty(), "prov run said: {said}");
    let r = case.writer_of_eventually("done.txt");
    assert_eq!((r["complete"].as_bool(), r["exit_status"].as_i64()), (Some(true), Some(4)), "{r:#}");
}

/// `prov run`, the collector and the writer are then killed together (a
/// batch job's cgroup.kill), the next prov finds the record and ends it.
/// Before, the command waited 2 s for the stalled writer and then started
/// with no start stored anywhere: killed then, it left no record. The
/// record keeps its text too, with its secret taken out (the start file
/// carried no text before: a batch step killed within milliseconds of its
/// start lost it).
#[test]
fn the_start_prov_run_keeps_itself_survives_everything_killed_at_once() {
    let case = Case::new("run-preparer-start-file");
    let (preparer, ready) = warm(&case);
    let writer = writer_of(ready);
    signal(writer, "STOP");
    let started = Instant::now();
    let script = "echo go > started.txt; sleep 60 # ghp_1A2b3C4d5E6f7G8h9I0jK1l2M3n4O5p6Q7r8";
    let mut run = run(&case, script).spawn().unwrap();
    wait_until("the command starts", || case.work.join("started.txt").exists());
    let waited = started.elapsed();
    let collector = collector_of(run.id());
    assert_eq!(collector, ready);
    let command = children_of(run.id()).into_iter().find(|(_, n)| n == "sh").map(|(p, _)| p).unwrap();
    for pid in [run.id(), collector, writer, command] {
        let st = Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
        assert!(st.success());
    }
    let _ = Command::new("kill").args(["-CONT", &writer.to_string()]).status();
    let _ = run.wait();
    wait_until("everything is gone", || !alive(collector) && !alive(writer));
    let history = case.query(["history", "-n", "10"]);
    let r = history.iter().find(|r| r["text"] != "true").unwrap_or_else(|| panic!("no record: {history:#?}"));
    assert!(!r["end_ns"].is_null() && r["exit_status"].is_null(), "{r:#}");
    assert!(r["incomplete_reason"].as_str().is_some_and(|s| s.contains("collector was gone")), "{r:#}");
    assert_eq!(r["cwd"], case.work.display().to_string(), "{r:#}");
    assert_eq!(r["text"], "sh -c 'echo go > started.txt; sleep 60 # [REDACTED]'", "{r:#}");
    // Stays below what waiting for the writer would have cost (BEGIN_WAIT,
    // 2 s); not a timing goal, the sign of which way the start was kept.
    eprintln!("the command started {waited:?} after prov run");
    let _ = preparer;
}

/// A `prov run` that is itself a command of an observation (here of another
/// `prov run`; a traced shell's commands are the same) starts no preparer:
/// one would live on in the outer observation's namespace and keep the
/// outer record open until it left.
#[test]
fn a_prov_run_inside_an_observation_starts_no_preparer() {
    let case = Case::new("run-preparer-nested");
    let prov = case.inst.prov().display().to_string();
    let out =
        run(&case, &format!("PROV_RUN_LINGER={LINGER} {prov} run -- sh -c 'echo inner > inner.txt'")).output().unwrap();
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(out.stderr.is_empty(), "the outer record is stored at once: {}", describe(&out));
    // The outer run may start one, where it runs; none lives in the
    // namespace the inner run ran in.
    let ours = std::fs::read_link("/proc/self/ns/mnt").unwrap();
    let elsewhere: Vec<u32> = preparers(&case)
        .into_iter()
        .filter(|p| std::fs::read_link(format!("/proc/{p}/ns/mnt")).is_ok_and(|ns| ns != ours))
        .collect();
    assert!(elsewhere.is_empty(), "a preparer started inside the observation: {elsewhere:?}");
    assert_eq!(case.writer_of_eventually("inner.txt")["complete"], true);
}

/// Sends SIGCONT to a stopped process when dropped, whether the test
/// passed or not (a stopped preparer would outlive the test).
struct Stopped(u32);

impl Stopped {
    fn stop(pid: u32) -> Stopped {
        let st = Command::new("kill").args(["-STOP", &pid.to_string()]).status().unwrap();
        assert!(st.success());
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-CONT", &self.0.to_string()]).status();
    }
}

/// Connections queued on the stopped preparer's socket until its listen
/// queue is full (a loop of runs against a suspended preparer ends that
/// way): a Python process, as root, holding them until killed.
fn fill_queue(sock: &std::path::Path) -> std::process::Child {
    let script = r#"
import socket, sys, time
held = []
while True:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.setblocking(False)
    try:
        s.connect(sys.argv[1])
    except BlockingIOError:
        break
    held.append(s)
print(len(held), flush=True)
time.sleep(3600)
"#;
    let mut filler =
        Command::new("/usr/bin/python3").args(["-c", script]).arg(sock).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(filler.stdout.take().unwrap()), &mut line).unwrap();
    assert!(line.trim().parse::<u32>().is_ok_and(|n| n > 0), "queued: {line:?}");
    filler
}

/// A stopped preparer (SIGSTOP, a frozen cgroup, a suspended batch job)
/// whose listen queue is full: `prov run` must not wait in `connect` for
/// it to accept. Its command runs, traced the direct way. Before, the run
/// slept in the kernel until the preparer was resumed.
#[test]
fn a_stopped_preparer_with_a_full_queue_does_not_hold_up_prov_run() {
    let case = Case::new("run-preparer-stopped");
    let (preparer, _) = warm(&case);
    let stopped = Stopped::stop(preparer);
    let mut filler = fill_queue(&socket(&case).unwrap());
    let child = run(&case, "echo direct > direct.txt; sleep 0.5").spawn().unwrap();
    let collector = collector_of(child.id());
    assert_eq!(parent_of(collector), Some(child.id()), "the run prepared its own observation");
    let out = child.wait_with_output().unwrap();
    assert_traced(&out);
    assert!(out.status.success() && out.stderr.is_empty(), "{}", describe(&out));
    assert_eq!(case.writer_of_eventually("direct.txt")["complete"], true);
    let _ = filler.kill();
    let _ = filler.wait();
    drop(stopped);
}

/// The one command that read `file` (by query), once it is stored.
fn reader_of_eventually(case: &Case, file: &str) -> serde_json::Value {
    let _ = case.last_command_ended();
    let mut found = Vec::new();
    wait_until(&format!("one reader of {file}"), || {
        found = case.query(["read", file]);
        found.len() == 1
    });
    found.pop().unwrap()
}

/// The ready observation's namespace is a copy of the mount table made
/// when it was prepared: a filesystem mounted after that must not be
/// missing from the next command's view (the preparer discards the
/// observation and the command sees what a direct run would).
#[test]
fn a_mount_made_after_preparation_is_seen_by_the_next_run() {
    let case = Case::new("run-preparer-new-mount");
    own_mount_namespace();
    warm(&case);
    let mnt = mount_tmpfs(&case.work.join("late-mount"));
    std::fs::write(mnt.path.join("late.txt"), b"mounted after preparation\n").unwrap();
    case.chown_tree(&mnt.path);
    let out = run_ok(&case, "cat late-mount/late.txt");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "mounted after preparation\n");
    let r = reader_of_eventually(&case, "late-mount/late.txt");
    assert_eq!(r["complete"], true, "{r:#}");
}

/// A run of the same user with a supplementary group the preparer's
/// starter lacked (`sg`, `newgrp`, a session from before `usermod -aG`):
/// its collector must have the caller's groups, so a file it read through
/// that group is recorded, not dropped as denied.
#[test]
fn a_run_with_another_group_gets_a_collector_with_its_groups() {
    use std::os::unix::fs::PermissionsExt;
    const GROUP: u32 = 47_411;
    let case = Case::new("run-preparer-groups");
    warm(&case);
    let file = case.work.join("group-only.txt");
    std::fs::write(&file, b"for the group\n").unwrap();
    std::os::unix::fs::chown(&file, Some(0), Some(GROUP)).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = Command::new("setpriv")
        .arg(format!("--reuid={}", case.inst.uid))
        .arg(format!("--regid={}", case.inst.gid))
        .arg(format!("--groups={GROUP}"))
        .arg("--")
        .arg(case.inst.prov())
        .args(["run", "--", "cat", "group-only.txt"])
        .env_clear()
        .env("HOME", &case.home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .env("USER", TEST_USER)
        .env("PROV_RUN_LINGER", LINGER)
        .current_dir(&case.work)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_traced(&out);
    assert!(out.status.success() && out.stderr.is_empty(), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "for the group\n");
    let r = reader_of_eventually(&case, "group-only.txt");
    assert_eq!(r["complete"], true, "{r:#}");
}

/// A cgroup v2 group of the test's, removed (its processes killed) when
/// dropped.
struct Cgroup(PathBuf);

impl Cgroup {
    fn new(name: &str) -> Option<Cgroup> {
        let root = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
            .into_iter()
            .map(PathBuf::from)
            .find(|r| r.join("cgroup.procs").exists() && r.join("cgroup.subtree_control").exists())?;
        let dir = root.join(format!("prov-e2e-{}-{name}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        Some(Cgroup(dir))
    }

    /// Makes `cmd` start in this group (moved before it execs).
    fn enter(&self, cmd: &mut Command) {
        use std::os::unix::process::CommandExt;
        let procs = std::ffi::CString::new(self.0.join("cgroup.procs").into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: between fork and exec only async-signal-safe calls (open,
        // write, close) on memory prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(fd);
                Ok(())
            });
        }
    }

    /// The line a member process shows in /proc/PID/cgroup for cgroup v2.
    fn line(&self) -> String {
        format!("0::/{}", self.0.file_name().unwrap().to_string_lossy())
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("cgroup.kill"), b"1");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::remove_dir(&self.0).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn cgroup_v2_line(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .ok()?
        .lines()
        .find(|l| l.starts_with("0::"))
        .map(str::to_string)
}

/// Another job's (or session's) cgroup never holds this run's collector: a
/// preparer serves only callers of its own cgroup, so a batch job's
/// cgroup.kill cannot end another job's records.
#[test]
fn a_run_in_another_cgroup_gets_a_collector_in_its_own() {
    let case = Case::new("run-preparer-cgroups");
    let (Some(a), Some(b)) = (Cgroup::new("a"), Cgroup::new("b")) else {
        eprintln!("no writable cgroup v2 hierarchy: skipped");
        return;
    };
    let mut first = run(&case, "true");
    a.enter(&mut first);
    let out = first.output().unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    wait_until("the first run in cgroup a starts a preparer", || preparers(&case).len() == 1);
    let preparer = preparers(&case)[0];
    wait_until("it keeps an observation ready", || children_of(preparer).iter().any(|(_, n)| n == "prov-collector"));
    assert_eq!(cgroup_v2_line(preparer), Some(a.line()));
    let mut second = run(&case, "echo b > b.txt; sleep 0.5");
    b.enter(&mut second);
    let child = second.spawn().unwrap();
    let collector = collector_of(child.id());
    assert_eq!(cgroup_v2_line(collector), Some(b.line()), "the collector is in the caller's cgroup");
    let out = child.wait_with_output().unwrap();
    assert_traced(&out);
    assert!(out.status.success() && out.stderr.is_empty(), "{}", describe(&out));
    assert_eq!(case.writer_of_eventually("b.txt")["complete"], true);
    // The user's own process in cgroup b, connecting to the preparer of
    // cgroup a's socket itself: none for it.
    let sock_a = socket_of(&case, preparer);
    let mut client = Command::new("setpriv");
    client
        .arg(format!("--reuid={}", case.inst.uid))
        .arg(format!("--regid={}", case.inst.gid))
        .args(["--init-groups", "--"]);
    b.enter(&mut client);
    assert_eq!(connect_as(client, &sock_a), "b'N' 0");
}

/// The socket preparer `pid` listens on.
fn socket_of(case: &Case, pid: u32) -> PathBuf {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']').map(str::to_string))
        .collect();
    let table = std::fs::read_to_string("/proc/net/unix").unwrap();
    let path = table
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && inodes.contains(&f[6].to_string())).then(|| f[7].to_string())
        })
        .find(|p| p.ends_with(".sock"))
        .unwrap_or_else(|| panic!("preparer {pid} listens nowhere"));
    // Bound through /proc/self/fd/N/…: the name, in the state directory.
    state_dir(case).join(std::path::Path::new(&path).file_name().unwrap())
}

/// Where mounts propagate (systemd hosts make `/` shared), a mount made
/// while an observation idles reaches its namespace; it was there before
/// the command, so the next command's record must not count it as an
/// unmarked mount ("incomplete").
#[test]
fn a_mount_propagated_into_a_ready_observation_is_not_counted_against_the_next_run() {
    let case = Case::new("run-preparer-shared-mount");
    own_mount_namespace();
    let shared = case.work.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    let sh = |script: &str| {
        let st = Command::new("sh").args(["-c", script]).status().unwrap();
        assert!(st.success(), "{script}");
    };
    let d = shared.display();
    sh(&format!("mount --bind '{d}' '{d}' && mount --make-shared '{d}'"));
    struct Unmount(String);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").args(["-R", "-l", &self.0]).status();
        }
    }
    let _unmount = Unmount(d.to_string());
    warm(&case);
    let _late = mount_tmpfs(&shared.join("sub"));
    run_ok(&case, "echo after > after-shared-mount.txt");
    let r = case.writer_of_eventually("after-shared-mount.txt");
    assert_eq!(r["complete"], true, "{r:#}");
}

/// A stopped preparer whose queue is not full: the first run waits for its
/// answer, gives up and goes the direct way; the runs after it skip the
/// preparer for a while instead of each waiting again (and queueing one
/// more connection).
#[test]
fn runs_after_one_found_the_preparer_stopped_do_not_ask_it_again() {
    let case = Case::new("run-preparer-unresponsive");
    let (preparer, _) = warm(&case);
    let stopped = Stopped::stop(preparer);
    let bench = case.work.join("bench.jsonl");
    // The mark's mtime, once a run left it: a run that waited in vain again
    // would make a new one.
    let marked = || {
        std::fs::read_dir(state_dir(&case))
            .unwrap()
            .flatten()
            .find(|e| e.path().extension().is_some_and(|x| x == "stuck"))
            .map(|e| e.metadata().unwrap().modified().unwrap())
    };
    let mut marks = Vec::new();
    for i in 0..3 {
        let mut cmd = run(&case, &format!("echo {i} > direct{i}.txt"));
        let out = cmd.env("PROV_BENCH_REPORT", &bench).output().unwrap();
        assert!(out.status.success() && out.stderr.is_empty(), "{}", describe(&out));
        marks.push(marked());
    }
    let report = std::fs::read_to_string(&bench).unwrap_or_default();
    assert_eq!(report.matches("\"prepared\":false").count(), 3, "each went the direct way: {report}");
    assert!(marks[0].is_some(), "the first run marks the preparer unresponsive");
    assert!(marks.iter().all(|m| *m == marks[0]), "only the first run waited for it: {marks:?}");
    for i in 0..3 {
        assert_eq!(case.writer_of_eventually(&format!("direct{i}.txt"))["complete"], true);
    }
    drop(stopped);
}

/// Runs `script` (then a short sleep, so its collector can be found) and
/// returns the pid of the collector that served it. Pids are not reused
/// while the system has others left, so two runs served by the same pid
/// were served by the same collector.
fn served_by(case: &Case, script: &str) -> u32 {
    let child = run(case, &format!("{script}; sleep 0.3")).spawn().unwrap();
    let collector = collector_of(child.id());
    let out = child.wait_with_output().unwrap();
    assert_traced(&out);
    assert!(out.status.success() && out.stderr.is_empty(), "{script}: {}", describe(&out));
    collector
}

/// The processes of record `id` (`prov query processes`), their executables.
fn process_exes(case: &Case, id: &serde_json::Value) -> Vec<String> {
    let mut found = Vec::new();
    wait_until(&format!("the process table of record {id}"), || {
        found = case.query(["processes", &id.to_string()]);
        !found.is_empty()
    });
    found.iter().filter_map(|p| p["exe"].as_str().map(|e| e.rsplit('/').next().unwrap().to_string())).collect()
}

/// Issue 15: a collector whose record is stored and whose namespace is
/// clean (the command's last process gone, no mount came or went) serves
/// the next `prov run` too: the helper, collector and writer starts are
/// paid once, not per command. Each record has its own files and processes
/// only, and the idle observation holds no database open. Before, every
/// collector ended with its record.
#[test]
fn consecutive_runs_are_served_by_one_collector_each_with_its_own_files() {
    let case = Case::new("run-preparer-reuse");
    let (preparer, ready) = warm(&case);
    let first_collector = served_by(&case, "echo first > a.txt");
    assert_eq!(first_collector, ready, "the first run took the ready observation");
    // Stored and closed before prov run returns: nothing holds it open.
    case.wait_until_closed();
    let second_collector = served_by(&case, "echo second > b.txt; cat a.txt");
    case.wait_until_closed();
    let third_collector = served_by(&case, "echo third > c.txt");
    assert_eq!(second_collector, ready, "the second run was served by the first one's collector");
    assert_eq!(third_collector, ready, "the third run too");
    assert_eq!(parent_of(ready), Some(preparer));
    let first = case.writer_of_eventually("a.txt");
    let second = case.writer_of_eventually("b.txt");
    let third = case.writer_of_eventually("c.txt");
    assert_ne!(first["id"], second["id"]);
    assert_eq!(txt_files(&first), ["a.txt"], "{first:#}");
    assert_eq!(txt_files(&second), ["a.txt", "b.txt"], "{second:#}");
    assert_eq!(txt_files(&third), ["c.txt"], "{third:#}");
    // a.txt: written by the first, read by the second, in neither twice.
    let accesses = |r: &serde_json::Value, name: &str| -> Vec<String> {
        r["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["path"].as_str().is_some_and(|p| p.ends_with(&format!("/{name}"))))
            .filter_map(|f| f["access"].as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(accesses(&first, "a.txt"), ["write"], "{first:#}");
    assert_eq!(accesses(&second, "a.txt"), ["read"], "{second:#}");
    for r in [&first, &second, &third] {
        assert_eq!(r["complete"], true, "{r:#}");
        assert_eq!(r["exit_status"], 0, "{r:#}");
    }
    // Each process table holds that command's processes: sh and sleep,
    // and for the second cat; none of another run's.
    let exes1 = process_exes(&case, &first["id"]);
    let exes2 = process_exes(&case, &second["id"]);
    let exes3 = process_exes(&case, &third["id"]);
    let count = |exes: &[String], name: &str| exes.iter().filter(|e| *e == name).count();
    for exes in [&exes1, &exes2, &exes3] {
        assert_eq!(count(exes, "sleep"), 1, "{exes:?}");
    }
    assert_eq!(count(&exes1, "cat"), 0, "{exes1:?}");
    assert_eq!(count(&exes2, "cat"), 1, "{exes2:?}");
    assert_eq!(count(&exes3, "cat"), 0, "{exes3:?}");
}

/// A command that leaves a process behind (here one writing a file two
/// seconds later) makes its observation unfit for another record: the next
/// run gets another collector, and the late write lands in the first
/// command's record.
#[test]
fn a_run_that_leaves_a_process_behind_is_not_reused() {
    let case = Case::new("run-preparer-reuse-lingering");
    warm(&case);
    let zeroth = served_by(&case, "echo zero > zero.txt");
    let first = served_by(&case, "(sleep 2; echo late > late.txt) >/dev/null 2>&1 & echo one > one.txt");
    let second = served_by(&case, "echo two > two.txt");
    assert_eq!(first, zeroth, "the clean run's observation was reused");
    assert_ne!(second, first, "the observation with a process left behind was not");
    wait_until("the late write", || case.work.join("late.txt").exists());
    wait_until("the lingering run's collector ends", || !alive(first));
    let late = case.writer_of_eventually("late.txt");
    let one = case.writer_of_eventually("one.txt");
    assert_eq!(late["id"], one["id"], "{late:#}");
    assert_eq!(txt_files(&one), ["late.txt", "one.txt"], "{one:#}");
    assert_eq!(txt_files(&case.writer_of_eventually("two.txt")), ["two.txt"]);
}

/// The configuration and the database are read for each record, not once
/// per observation: a database path edited between two runs, an exclusion
/// added, or the database file removed, applies to the next run served by
/// the same collector.
#[test]
fn a_reused_collector_follows_the_configuration_and_database_of_each_run() {
    let case = Case::new("run-preparer-reuse-config");
    warm(&case);
    let collector = served_by(&case, "echo one > one.txt");
    case.wait_until_closed();
    case.write_config("[database]\npath = \"~/elsewhere/journal.db\"\n");
    assert_eq!(served_by(&case, "echo two > two.txt"), collector);
    let elsewhere = case.home.join("elsewhere/journal.db");
    assert!(elsewhere.exists(), "the second record went to the configured database");
    // An exclusion added between runs applies to the next one.
    case.write_config("[database]\npath = \"~/elsewhere/journal.db\"\n\n[write]\nexclude_also = [\"ignored*\"]\n");
    assert_eq!(served_by(&case, "echo three > three.txt; echo x > ignored.txt"), collector);
    assert_eq!(txt_files(&case.writer_of_eventually("three.txt")), ["three.txt"], "ignored.txt is left out");
    // The database removed between runs: the next record is in a new file.
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", elsewhere.display()));
    }
    assert_eq!(served_by(&case, "echo four > four.txt"), collector);
    let history = case.query(["history", "-n", "10"]);
    assert_eq!(history.len(), 1, "only the last record is in the new file: {history:#?}");
    assert_eq!(history[0]["text"], "sh -c 'echo four > four.txt; sleep 0.3'", "{history:#?}");
    // Back to the default database: the first record is there, the others
    // are not.
    case.write_config("");
    assert_eq!(txt_files(&case.writer_of_eventually("one.txt")), ["one.txt"]);
    assert!(same_file(case.query(["wrote", "two.txt"])).is_empty());
}

/// A reused collector killed while it waits in the pool: the next run is
/// traced all the same.
#[test]
fn a_reused_collector_killed_while_idle_makes_prov_run_fall_back() {
    let case = Case::new("run-preparer-reuse-killed");
    let (preparer, ready) = warm(&case);
    assert_eq!(served_by(&case, "echo one > one.txt"), ready);
    assert_eq!(served_by(&case, "echo two > two.txt"), ready, "reused");
    wait_until("the reused collector waits in the pool", || {
        children_of(preparer).iter().any(|(p, n)| *p == ready && n == "prov-collector")
    });
    signal(ready, "KILL");
    wait_until("the killed collector is gone", || !alive(ready));
    assert_ne!(served_by(&case, "echo three > three.txt"), ready);
    let r = case.writer_of_eventually("three.txt");
    assert_eq!(r["complete"], true, "{r:#}");
    assert_eq!(txt_files(&r), ["three.txt"], "{r:#}");
}

/// An observation handed back after a clean run goes back into the pool
/// only if the mount table has not changed since it was prepared: a
/// filesystem mounted between two runs is seen by the second.
#[test]
fn a_mount_made_between_runs_is_seen_by_the_next_run() {
    let case = Case::new("run-preparer-reuse-mount");
    own_mount_namespace();
    let (_, ready) = warm(&case);
    assert_eq!(served_by(&case, "echo one > one.txt"), ready);
    let mnt = mount_tmpfs(&case.work.join("between"));
    std::fs::write(mnt.path.join("between.txt"), b"mounted between runs\n").unwrap();
    case.chown_tree(&mnt.path);
    let out = run_ok(&case, "cat between/between.txt");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "mounted between runs\n");
    let r = reader_of_eventually(&case, "between/between.txt");
    assert_eq!(r["complete"], true, "{r:#}");
}

/// The collector the preparer keeps ready, once it has one.
fn ready_collector(preparer: u32) -> u32 {
    let mut ready = 0;
    wait_until("the preparer keeps an observation ready", || {
        ready = children_of(preparer).into_iter().find(|(_, n)| n == "prov-collector").map_or(0, |(p, _)| p);
        ready != 0
    });
    ready
}

/// A run served by the preparer skips the helper checks the preparer made
/// when it started, except for the helper file's own: made non-setuid
/// while an observation waits ready, the next run takes that observation,
/// finds the helper unusable, and runs its command untraced with the one
/// line a direct run prints (not a join helper refusing to start it).
#[test]
fn a_helper_unset_while_an_observation_waits_ready_runs_untraced_and_says_why() {
    use std::os::unix::fs::PermissionsExt;
    let case = Case::new("run-preparer-unset-helper");
    // A copy of the installed programs in a directory of root's, so the
    // helper can be changed without touching the one the other tests use.
    let dir = case.work.join("libexec");
    std::fs::create_dir(&dir).unwrap();
    let installed = case.inst.helper().parent().unwrap().to_owned();
    for program in ["prov-helper", "prov-collector", "prov-writer"] {
        std::fs::copy(installed.join(program), dir.join(program)).unwrap();
    }
    std::fs::set_permissions(dir.join("prov-collector"), std::fs::Permissions::from_mode(0o711)).unwrap();
    let helper = dir.join("prov-helper");
    Command::new("chown").arg("root:prov").arg(&helper).status().unwrap();
    let set_mode = |mode| std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(mode)).unwrap();
    set_mode(0o4755);
    let out = run(&case, "true").env("PROV_HELPER", &helper).output().unwrap();
    assert_traced(&out);
    assert!(out.status.success() && out.stderr.is_empty(), "{}", describe(&out));
    wait_until("the first prov run starts a preparer", || preparers(&case).len() == 1);
    let ready = ready_collector(preparers(&case)[0]);
    set_mode(0o755);
    let out = run(&case, "echo visible; exit 5").env("PROV_HELPER", &helper).output().unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", describe(&out));
    assert_eq!(out.stdout, b"visible\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("not tracing") && err.contains("not setuid root"), "{err}");
    // It was the ready observation that this run took, and let go.
    wait_until("the observation taken and found unusable ends", || !alive(ready));
}

/// A process with no_new_privs set cannot gain privilege through the
/// setuid join helper. The preparer (started without it) must not serve
/// such a run, which skips the checks a served run skips: it runs the
/// command untraced and says why, and the ready observation stays for
/// runs that can use it.
#[test]
fn a_run_with_no_new_privs_is_not_served_by_a_preparer_without_it() {
    let case = Case::new("run-preparer-nnp");
    let (_, ready) = warm(&case);
    let out = case
        .command("setpriv")
        .arg("--no-new-privs")
        .arg(case.inst.prov())
        .args(["run", "--", "sh", "-c", "echo visible; exit 3"])
        .env("PROV_RUN_LINGER", LINGER)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert_eq!(out.stdout, b"visible\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("not tracing") && err.contains("no_new_privs"), "{err}");
    assert!(alive(ready), "the ready observation is still there");
    run_ok(&case, "echo traced > traced.txt");
    assert_eq!(case.writer_of_eventually("traced.txt")["complete"], true);
}
