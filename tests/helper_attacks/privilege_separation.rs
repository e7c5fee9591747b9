//! The fanotify group opens files without a permission check; the user's
//! database and spool are input anything the user runs can craft. They live
//! in two processes: the collector holds the group and no file of the user's
//! prov directories, links no SQLite; its child prov-writer holds the
//! database and nothing of the collector's. Killing the writer (it is the
//! user's own process) costs the record, never a hang.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use prov_e2e::*;

use prov_e2e::processes::{child_named, collector_of, spawn_prov_run, wait_or_hang};

/// (descriptor number, link target, open flags in octal) of a process, as root sees them.
fn descriptors(pid: u32) -> Vec<(u32, String, u32)> {
    let mut fds = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().flatten() {
        let Ok(n) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(target) = std::fs::read_link(entry.path()) else { continue };
        let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{n}")).unwrap_or_default();
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            .unwrap_or(0);
        fds.push((n, target.to_string_lossy().into_owned(), flags));
    }
    fds
}

fn prov_dirs(case: &Case) -> [PathBuf; 3] {
    [".local/share/prov", ".local/state/prov", ".config/prov"].map(|d| case.home.join(d))
}

fn within(target: &str, dirs: &[PathBuf]) -> bool {
    dirs.iter().any(|d| Path::new(target).starts_with(d))
}

#[test]
fn the_collector_holds_fanotify_and_no_user_file_the_writer_holds_the_database_and_nothing_else() {
    let case = Case::new("privsep");
    case.write("in.txt", b"input\n");
    let data_dir = case.home.join(".local/share/prov");
    let run = spawn_prov_run(&case, "cat in.txt > out.txt; sleep 3");
    // setpriv execs prov, which starts the helper that becomes the collector.
    let collector = collector_of(run.id());
    let writer = child_named(collector, "prov-writer");
    // The writer opens the database once the first events are flushed
    // (200 ms) or the start is due (1 s).
    let deadline = Instant::now() + Duration::from_millis(2500);
    while !descriptors(writer).iter().any(|(_, t, _)| t == &data_dir.join("prov.db").to_string_lossy()) {
        assert!(Instant::now() < deadline, "the writer never opened prov.db: {:?}", descriptors(writer));
        std::thread::sleep(Duration::from_millis(20));
    }

    let held = descriptors(collector);
    assert!(held.iter().any(|(_, t, _)| t == "anon_inode:[fanotify]"), "collector holds the group: {held:?}");
    let dirs = prov_dirs(&case);
    let mine: Vec<_> = held.iter().filter(|(_, t, _)| within(t, &dirs)).collect();
    assert!(mine.is_empty(), "the collector must hold nothing of the user's prov directories: {mine:?}");
    // Nothing the collector holds may reach a program it starts.
    let inherited: Vec<_> = held.iter().filter(|(n, _, flags)| *n > 2 && flags & 0o2000000 == 0).collect();
    assert!(inherited.is_empty(), "collector descriptors without O_CLOEXEC: {inherited:?}");

    // The writer: its two pipes, stderr (/dev/null) and prov's own files
    // (and, for a moment when it opens the database, its own mount table:
    // whether the database is on a network filesystem).
    let held = descriptors(writer);
    let own_mount_table = format!("/proc/{writer}/mountinfo");
    let foreign: Vec<_> = held
        .iter()
        .filter(|(_, t, _)| !(t.starts_with("pipe:[") || t == "/dev/null" || within(t, &dirs) || *t == own_mount_table))
        .collect();
    assert!(foreign.is_empty(), "the writer holds more than its pipes and prov's files: {foreign:?}");
    assert!(!held.iter().any(|(_, t, _)| t.contains("fanotify")));

    // SQLite is linked into the writer only.
    let libexec = case.inst.prefix.join("libexec/prov");
    let has_sqlite = |name: &str| {
        let bytes = std::fs::read(libexec.join(name)).unwrap();
        bytes.windows(8).any(|w| w == b"sqlite3_")
    };
    assert!(!has_sqlite("prov-collector"), "prov-collector contains SQLite");
    assert!(has_sqlite("prov-writer"), "prov-writer stores with SQLite");

    let out = wait_or_hang(run, Duration::from_secs(20), "prov run");
    assert!(out.status.success(), "{}", describe(&out));
    let found = case.writer_of("out.txt");
    let reads: Vec<_> = files(&found).into_iter().filter(|(a, _)| a == "read").map(|(_, p)| p).collect();
    assert!(reads.iter().any(|p| p.ends_with(b"/in.txt")), "{found:#}");
}

#[test]
fn a_killed_writer_costs_the_record_not_a_hang() {
    let case = Case::new("privsep-kill");
    let run = spawn_prov_run(&case, "echo a > a.txt; sleep 2; echo b > b.txt; exit 3");
    let started = Instant::now();
    let collector = collector_of(run.id());
    let writer = child_named(collector, "prov-writer");
    // As the user: it is their own process.
    let kill = case.command("kill").args(["-KILL", &writer.to_string()]).output().unwrap();
    assert!(kill.status.success(), "{}", describe(&kill));

    let out = wait_or_hang(run, Duration::from_secs(15), "prov run");
    assert!(started.elapsed() < Duration::from_secs(8), "prov run took {:?}", started.elapsed());
    assert_eq!(out.status.code(), Some(3), "the command's status: {}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("record incomplete") && err.contains("writer"), "{err}");
    // prov run kept the start and the end itself, and says what is missing.
    let cmd = case.last_command();
    assert_eq!(cmd["exit_status"], 3, "{cmd:#}");
    assert_eq!(cmd["complete"], false, "{cmd:#}");
    assert!(cmd["incomplete_reason"].as_str().is_some_and(|r| r.contains("writer")), "{cmd:#}");

    // The next command is recorded as usual.
    case.run_sh("echo c > c.txt");
    assert_eq!(case.writer_of("c.txt")["exit_status"], 0);
}

/// The installation puts the writer beside the collector, root's, not
/// writable by others.
#[test]
fn the_writer_is_installed_like_the_collector() {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(installation().prefix.join("libexec/prov/prov-writer")).unwrap();
    assert_eq!(m.uid(), 0);
    assert_eq!(m.mode() & 0o7022, 0, "no setuid, not writable by others");
}
