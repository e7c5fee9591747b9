//! Which processes and mounts belong to a command, and what it was: a
//! daemon that closes every inherited descriptor, a host mount that appears
//! while the command runs, and command texts of any length (issue 11, items
//! 3, 4 and 12).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

// The suite's imports (prov_e2e's helpers) and its tally.
use super::tally::{record_with_text, Tally};
use prov_e2e::*;

/// Waits (bounded) until `path` exists; false if it never did.
fn appears(path: &Path, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while !path.exists() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// A double-forked daemon that closes every descriptor it inherited (the
/// tracker socket among them) and then writes five files, one after the
/// other, after `prov run` has returned: every write belongs to the record.
#[test]
fn a_daemon_that_closes_every_descriptor_stays_in_its_command() {
    daemon_stays_in_its_command("faults-daemon-closerange", "", "daemon closes every descriptor", |_| {});
}

/// The same daemon, started right after pid allocation wrapped round: its
/// pid is below those of every process started before, where the
/// observation last looked (a look reads only the processes started since,
/// unless allocation wrapped). Root moves the allocation to its end, as a
/// busy machine does in time.
#[test]
fn a_daemon_started_after_pids_wrapped_stays_in_its_command() {
    let ns_last_pid = Path::new("/proc/sys/kernel/ns_last_pid");
    let last_pid = || std::fs::read_to_string(ns_last_pid).unwrap().trim().parse::<u64>().unwrap();
    let set_last_pid = |pid: u64| std::fs::write(ns_last_pid, pid.to_string()).unwrap();
    let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap().trim().parse().unwrap();
    // Every pid of the observation from here on is above those the wrap
    // hands out next (300 on).
    if last_pid() < 2000 {
        set_last_pid(2000);
    }
    daemon_stays_in_its_command("faults-daemon-wrapped", "", "daemon started after pids wrapped", |case| {
        // The observation the daemon's command gets has looked before.
        case.run_sh("true");
        set_last_pid(pid_max - 2);
    });
    assert!(last_pid() < 2000, "allocation wrapped: {}", last_pid());
}

/// The same daemon made non-dumpable first (as ssh-agent and gpg-agent make
/// themselves): its `/proc/PID/ns/mnt` cannot be read by its own user, yet
/// it is still inside the command's namespace and part of the command.
#[test]
fn a_non_dumpable_daemon_that_closes_every_descriptor_stays_in_its_command() {
    let dumpable_off = "import ctypes\nctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n";
    daemon_stays_in_its_command(
        "faults-daemon-nondumpable",
        dumpable_off,
        "non-dumpable daemon closes every descriptor",
        |_| {},
    );
}

/// `before_run`: what happens to the case before the daemon's command.
fn daemon_stays_in_its_command(name: &str, prelude: &str, scenario: &'static str, before_run: impl FnOnce(&Case)) {
    let case = Case::new(name);
    let daemon = format!(
        "{prelude}import os, time\n\
        if os.fork(): os._exit(0)\n\
        os.setsid()\n\
        if os.fork(): os._exit(0)\n\
        os.closerange(0, 1 << 20)\n\
        for i in range(5):\n\
        \x20   time.sleep(0.3)\n\
        \x20   with open('d%d' % i, 'w') as f: f.write('x')\n"
    );
    case.write("daemon.py", daemon.as_bytes());
    before_run(&case);
    let out = case.run(["python3", "daemon.py"]);
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(appears(&case.work.join("d4"), Duration::from_secs(20)), "the daemon never wrote d4");

    let mut tally = Tally::new(scenario);
    let mut attached = 0;
    for i in 0..5 {
        tally.run += 1;
        let found = case.query(["wrote", &format!("d{i}")]);
        if let Some(cmd) = found.first() {
            tally.found += 1;
            if cmd["text"] == "python3 daemon.py" {
                attached += 1;
            }
            if cmd["complete"] == false {
                tally.marked_incomplete += 1;
            }
            if cmd["exit_status"] == 0 {
                tally.status_right += 1;
            }
        }
    }
    tally.print_row();
    let history = case.query(["history"]);
    let record = record_with_text(&history, "python3 daemon.py");
    assert_eq!(
        attached,
        5,
        "every later write of the daemon is in its command's record: {record:#?}; {}",
        case.collector_state()
    );
}

/// `prov run -- true $(seq 1 20000)`: about 108 KB of text, more than one
/// datagram of the control socket holds.
#[test]
fn a_command_of_a_hundred_kilobytes_is_recorded_whole() {
    let case = Case::new("faults-text-100k");
    let mut args = vec!["true".to_string()];
    args.extend((1..=20000).map(|i| i.to_string()));
    let out = case.run(&args);
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    let last = case.last_command();
    let text = last["text"].as_str().unwrap_or_default();
    assert_eq!(text.len(), args.join(" ").len(), "the whole text: {}", &text[..text.len().min(200)]);
    assert_eq!(text, args.join(" "));
}

/// About 2 MB of text (18 arguments of 100 KB): as much as an exec through
/// the setuid helper takes (the kernel resets a setuid program's stack limit
/// to 8 MiB, so its exec takes at most 2 MiB of arguments), recorded byte for
/// byte. (Four megabytes cross the collector's socket in
/// `long_text::tests::four_megabytes_arrive_whole`.)
#[test]
fn a_command_of_two_megabytes_is_recorded_whole() {
    let case = Case::new("faults-text-2m");
    let mut args = vec!["true".to_string()];
    args.extend((0..18).map(|i| format!("{i:03}{}", "x".repeat(100_000 - 3))));
    let out = case.run(&args);
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    let want = args.join(" ");
    let last = case.last_command();
    let text = last["text"].as_str().unwrap_or_default();
    assert_eq!(text.len(), want.len(), "the whole text: {}…", &text[..text.len().min(200)]);
    assert!(text == want, "the text, byte for byte");
}

/// A mount point shared with the observed namespace; a tmpfs mounted on
/// the host below it while the command runs, which the command then writes
/// into (a second later: what is written before the collector has the new
/// mount marked, about a millisecond, is not seen): the write is recorded,
/// and the record counts the mount, since writes made there before its mark
/// would be missing.
#[test]
fn a_host_mount_made_while_the_command_runs_is_marked() {
    let case = Case::new("faults-new-mount");
    let shared = case.home.join("shared");
    let outer = mount_tmpfs(&shared);
    let st = Command::new("mount").arg("--make-shared").arg(&outer.path).status().unwrap();
    assert!(st.success());
    let inner_dir = shared.join("late");
    std::fs::create_dir_all(&inner_dir).unwrap();
    case.chown_tree(&shared);
    let go = case.work.join("go");
    let script = format!(
        "touch started; while [ ! -e {go} ]; do sleep 0.05; done; sleep 1; echo data > {late}/out.txt",
        go = go.display(),
        late = inner_dir.display()
    );
    let child = case.command(case.inst.prov()).args(["run", "--", "sh", "-c", &script]).spawn().unwrap();
    assert!(appears(&case.work.join("started"), Duration::from_secs(20)), "the command never started");
    let inner = mount_tmpfs(&inner_dir);
    std::fs::write(&go, b"").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(std::fs::read(inner_dir.join("out.txt")).unwrap(), b"data\n", "written into the new mount");

    let record = case.query(["history", "-n", "1", "--files"]).pop().expect("a record");
    let written = files(&record).contains(&("write".to_string(), bytes_of(&inner_dir.join("out.txt"))));
    let counted = record["incomplete"]["unmarked_mounts"].as_u64().unwrap_or(0) >= 1 && record["complete"] == false;
    let mut tally = Tally::new("host mount appears mid-command");
    tally.run = 1;
    tally.found = 1;
    tally.marked_incomplete = usize::from(record["complete"] == false);
    tally.status_right = usize::from(record["exit_status"] == 0);
    tally.print_row();
    drop(inner);
    drop(outer);
    assert!(written && counted, "the write into the new mount is recorded: {record:#}; {}", case.collector_state());
}
