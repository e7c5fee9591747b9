//! What prov is handed at a path or in a variable it reads: a FIFO or a
//! link to /dev/zero where its configuration or a `.provignore` should be,
//! a number out of range. Nothing may hang, eat memory or panic; the
//! command runs and prov names the problem in one line.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use prov_e2e::processes::wait_or_hang;
use prov_e2e::*;

use super::tally::{record_with_text, Tally};

/// Longer than any of these takes on a loaded machine; what is still
/// running then hangs (the test fails, naming it).
const HANG: Duration = Duration::from_secs(60);

/// `prov ARGS…` as the user, failing the test if it hangs.
fn prov_or_hang(case: &Case, env: &[(&str, &str)], args: &[&str]) -> Output {
    let child = case
        .command(case.inst.prov())
        .envs(env.iter().copied())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_or_hang(child, HANG, &format!("prov {}", args.join(" ")))
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// The user's config.toml replaced by `make` (a FIFO, a link to /dev/zero).
fn config_replaced(case: &Case, make: fn(&Path)) -> std::path::PathBuf {
    let dir = case.home.join(".config/prov");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.toml");
    make(&file);
    case.chown_tree(&case.home);
    file
}

/// A regular file of 8 GiB (sparse: no disk used), far above any real one.
fn sparse_8_gib(path: &Path) {
    std::fs::File::create(path).unwrap().set_len(8 << 30).unwrap();
}

fn link_to_dev_zero(path: &Path) {
    std::os::unix::fs::symlink("/dev/zero", path).unwrap();
}

/// A FIFO or a link to /dev/zero as the configuration: `prov init` still
/// prints the integration (a new shell starts), `prov run` runs the
/// command untraced with one line naming the file, a query ends with an
/// error naming it, and an interactive bash and zsh start and run commands.
#[test]
fn a_config_that_is_no_regular_file_is_named_and_nothing_hangs() {
    for (name, make, what) in
        [("fifo", mkfifo as fn(&Path), "a FIFO"), ("device", link_to_dev_zero as fn(&Path), "a device")]
    {
        let case = Case::new(&format!("faults-config-{name}"));
        config_replaced(&case, make);
        let init = prov_or_hang(&case, &[], &["init", "bash"]);
        assert!(init.status.success() && !init.stdout.is_empty(), "{}", describe(&init));

        let run = prov_or_hang(&case, &[], &["run", "--", "sh", "-c", "echo ran; exit 4"]);
        assert_eq!(run.status.code(), Some(4), "{}", describe(&run));
        assert_eq!(run.stdout, b"ran\n");
        let said = stderr_of(&run);
        assert_eq!(said.lines().count(), 1, "one line: {said:?}");
        assert!(said.contains("config.toml") && said.contains(what), "{said}");
        assert_eq!(said.matches(what).count(), 1, "said once: {said}");

        let query = prov_or_hang(&case, &[], &["query", "history"]);
        let said = stderr_of(&query);
        assert_eq!(said.lines().count(), 1, "one line: {}", describe(&query));
        assert!(said.contains("config.toml") && said.contains(what), "{said}");

        for shell in ["bash", "zsh"] {
            let mut sh = pty::Shell::start(&case, shell);
            let out = sh.run("echo typed-$((6*7))");
            assert!(out.contains("typed-42"), "{shell}: {out:?}");
            let out = sh.run("(exit 7); echo status=$?");
            assert!(out.contains("status=7"), "{shell}: {out:?}");
            sh.exit();
        }
    }
}

/// A `.provignore` that is a FIFO, a link to /dev/zero or 8 GiB counts as none:
/// the command's record is stored with the file it wrote.
#[test]
fn a_provignore_that_is_no_regular_file_is_passed_over() {
    let mut tally = Tally::new("`.provignore` a FIFO, a link to /dev/zero, 8 GiB");
    let case = Case::new("faults-provignore");
    let mut texts = Vec::new();
    let cases = [("fifo", mkfifo as fn(&Path)), ("device", link_to_dev_zero as fn(&Path)), ("huge", sparse_8_gib)];
    for (dir, make) in cases {
        let dir = case.work.join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        make(&dir.join(".provignore"));
        case.chown_tree(&case.work);
        // Each file its own content: a match by content would name the others.
        let script = format!("echo {} > {}/out.txt; exit 5", dir.display(), dir.display());
        let out = prov_or_hang(&case, &[], &["run", "--", "sh", "-c", &script]);
        assert_eq!(out.status.code(), Some(5), "{}", describe(&out));
        assert_traced(&out);
        texts.push(format!("sh -c '{script}'"));
        tally.run += 1;
    }
    let history = case.query(["history"]);
    let found: Vec<_> = texts.iter().filter_map(|t| record_with_text(&history, t)).collect();
    tally.found = found.len();
    tally.status_right = found.iter().filter(|r| r["exit_status"] == 5).count();
    tally.print_row();
    assert_eq!(tally.found, 3, "{history:#?}; {}", case.collector_state());
    for dir in ["fifo", "device", "huge"] {
        let writer = case.writer_of(case.work.join(dir).join("out.txt"));
        assert_eq!(writer["exit_status"], 5, "{writer:#}");
    }
}

/// `PROV_RUN_LINGER` no number of seconds in range (1e300 overflowed a
/// Duration): one line names it, the command runs traced and is recorded.
#[test]
fn an_out_of_range_linger_is_named_and_the_command_recorded() {
    let mut tally = Tally::new("`PROV_RUN_LINGER` out of range");
    let case = Case::new("faults-linger");
    for value in ["1e300", "-1", "soon"] {
        let script = format!("echo {value} > linger.txt; exit 3");
        let out = prov_or_hang(&case, &[("PROV_RUN_LINGER", value)], &["run", "--", "sh", "-c", &script]);
        tally.run += 1;
        assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
        let said = stderr_of(&out);
        assert_eq!(said.lines().count(), 1, "one line: {said:?}");
        assert!(said.contains("PROV_RUN_LINGER") && said.contains(value), "{said}");
        let history = case.query(["history"]);
        let record = record_with_text(&history, &format!("sh -c '{script}'"));
        tally.found += record.is_some() as usize;
        tally.status_right += record.is_some_and(|r| r["exit_status"] == 3) as usize;
    }
    tally.print_row();
    assert_eq!((tally.found, tally.status_right), (3, 3), "{}", case.collector_state());
}

/// A configured wait far beyond a minute is an error naming its line, as
/// any bad value is, not a shell that waits for days.
#[test]
fn a_config_number_out_of_range_names_its_line() {
    let case = Case::new("faults-config-range");
    case.write_config("[shell]\nprepare_wait_ms = 4000000000\n");
    let out = prov_or_hang(&case, &[], &["run", "--", "sh", "-c", "echo ran; exit 4"]);
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    assert_eq!(out.stdout, b"ran\n");
    let said = stderr_of(&out);
    assert_eq!(said.lines().count(), 1, "one line: {said:?}");
    assert!(said.contains("config.toml:2:") && said.contains("60000"), "{said}");
}

/// Under a tight `ulimit -u` the user's own forks fail first (bash
/// retried a failed fork for 30 s with 14 allowed): `prov doctor` says the
/// limit is near and what an idle traced shell takes of it.
#[test]
fn doctor_says_when_the_process_limit_is_near() {
    let case = Case::new("faults-nproc");
    let doctor = |limit: &str| {
        let script = format!("ulimit -Su {limit}; exec {} doctor", case.inst.prov().display());
        let out = prov_or_hang_program(&case, "bash", &["-c", &script]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let tight = doctor("8");
    let line = tight.lines().find(|l| l.contains("ulimit -u")).unwrap_or_default();
    assert!(line.starts_with("WARN") && line.contains("of the 8 processes"), "{tight}");
    // The limit counts threads: an idle shell's three processes are four.
    assert!(line.contains("each idle traced shell keeps 3 processes (4 threads)"), "{tight}");
    assert!(!doctor("hard").contains("ulimit -u"), "no warning under the usual limit");
}

/// `program ARGS…` as the user, failing the test if it hangs.
fn prov_or_hang_program(case: &Case, program: &str, args: &[&str]) -> Output {
    let child = case.command(program).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    wait_or_hang(child, HANG, program)
}
