//! The script archive, end to end: scripts read by commands under the real
//! tracer are kept, and `prov restore` gives them back byte for byte.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use prov_e2e::*;

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// `prov run -- ARGS…`, asserting it was traced and succeeded; returns the
/// new record's id.
fn run_ok<I, S>(case: &Case, args: I) -> i64
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = case.run(args);
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    case.last_command()["id"].as_i64().unwrap()
}

fn restore<I, S>(case: &Case, args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = case.command(case.inst.prov());
    cmd.arg("restore").args(args);
    cmd.output().unwrap()
}

/// The archived paths of command `id`, from `prov restore ID --list --json`.
fn archived_paths(case: &Case, id: i64) -> Vec<Vec<u8>> {
    let out = restore(case, [id.to_string().as_str(), "--list", "--json"]);
    if String::from_utf8_lossy(&out.stderr).trim() == format!("prov: command {id} has no archived files") {
        assert_eq!(out.status.code(), Some(1));
        return Vec::new();
    }
    assert!(out.status.success(), "{}", describe(&out));
    parse_json_lines(&out.stdout).iter().map(path_bytes).collect()
}

/// Where `restore --to DIR` puts the file recorded at `recorded`.
fn rerooted(dir: &Path, recorded: &Path) -> PathBuf {
    dir.join(recorded.strip_prefix("/").unwrap())
}

/// A count from the user's database, read with the sqlite3 shell as the user.
fn sql_count(case: &Case, sql: &str) -> u64 {
    let out = case.command("sqlite3").arg("-readonly").arg(case.database()).arg(sql).output().unwrap();
    assert!(out.status.success(), "sqlite3: {}", describe(&out));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[test]
fn a_shell_script_is_restored_byte_for_byte_with_its_mode() {
    let case = Case::new("archive-sh");
    let script = b"#!/bin/sh\n# builds the report\nsort data.csv > sorted.csv\necho '\xc3\xa9t\xc3\xa9 \xff raw byte' > note.txt\n";
    let job = case.write("job.sh", script);
    set_mode(&job, 0o750);
    case.write("data.csv", b"b\na\n");
    let id = run_ok(&case, ["sh", "./job.sh"]);
    assert_eq!(archived_paths(&case, id), vec![bytes_of(&job)], "only the script is archived, not data.csv");

    let out = restore(&case, [id.to_string().as_str(), "--to", "restored"]);
    assert!(out.status.success(), "{}", describe(&out));
    let restored = rerooted(&case.work.join("restored"), &job);
    assert_eq!(std::fs::read(&restored).unwrap(), script);
    assert_eq!(mode_of(&restored), 0o750);
    assert!(String::from_utf8_lossy(&out.stdout).contains("restored/"), "{}", describe(&out));

    // After the script changed, the archived version is still the one that ran.
    std::fs::write(&job, b"#!/bin/sh\necho edited\n").unwrap();
    let out = restore(&case, ["--file", "job.sh", "--stdout"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(out.stdout, script);
}

#[test]
fn a_python_script_and_its_local_module_are_restored() {
    let case = Case::new("archive-py");
    let main = b"import helper_mod\nprint(helper_mod.greet('prov'))\n";
    let module = b"def greet(name):\n    return 'hello ' + name\n";
    let main_path = case.write("analysis.py", main);
    let module_path = case.write("helper_mod.py", module);
    set_mode(&module_path, 0o600);
    let id = run_ok(&case, ["python3", "analysis.py"]);
    let paths = archived_paths(&case, id);
    assert!(paths.contains(&bytes_of(&main_path)) && paths.contains(&bytes_of(&module_path)), "{paths:?}");

    let target = case.work.join("back");
    let out = restore(&case, [OsStr::new(&id.to_string()), OsStr::new("--to"), target.as_os_str()]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(std::fs::read(rerooted(&target, &main_path)).unwrap(), main);
    assert_eq!(std::fs::read(rerooted(&target, &module_path)).unwrap(), module);
    assert_eq!(mode_of(&rerooted(&target, &module_path)), 0o600);
    assert_eq!(mode_of(&rerooted(&target, &main_path)), mode_of(&main_path));
}

#[test]
fn the_same_content_is_stored_once() {
    let case = Case::new("archive-dedupe");
    let script: Vec<u8> = (0..400).flat_map(|i| format!("echo line {i}\n").into_bytes()).collect();
    case.write("job.sh", &script);
    case.write("copy.sh", &script);
    let first = run_ok(&case, ["sh", "job.sh"]);
    let second = run_ok(&case, ["sh", "job.sh"]);
    let third = run_ok(&case, ["sh", "copy.sh"]);
    for id in [first, second, third] {
        assert_eq!(archived_paths(&case, id).len(), 1, "command {id}");
    }
    assert_eq!(sql_count(&case, "SELECT count(*) FROM archived_files"), 3);
    assert_eq!(sql_count(&case, "SELECT count(*) FROM archive_blobs"), 1);
    // 5 KiB of repetitive text is stored compressed.
    let stored = sql_count(&case, "SELECT sum(length(data)) FROM archive_blobs");
    assert!(stored * 3 < script.len() as u64, "stored {stored} of {} bytes", script.len());
    // Each command gives back the path it read.
    let out = restore(&case, [third.to_string().as_str(), "--stdout"]);
    assert_eq!(out.stdout, script);
}

#[test]
fn oversized_and_surplus_scripts_are_not_archived() {
    let case = Case::new("archive-limits");
    // Default limits: 500 KiB, 8 files per command.
    case.write("big.sh", &vec![b'#'; 500 * 1024 + 1]);
    let fits = case.write("fits.sh", &vec![b'#'; 500 * 1024]);
    let id = run_ok(&case, ["sh", "-c", "cat big.sh fits.sh > /dev/null"]);
    assert_eq!(archived_paths(&case, id), vec![bytes_of(&fits)]);

    let names: Vec<String> = (1..=10).map(|i| format!("s{i:02}.sh")).collect();
    for name in &names {
        case.write(name, format!("echo {name}\n").as_bytes());
    }
    let reads: String = names.iter().map(|n| format!("cat {n} > /dev/null; ")).collect();
    let id = run_ok(&case, ["sh", "-c", &reads]);
    let want: Vec<Vec<u8>> = names[..8].iter().map(|n| bytes_of(&case.work.join(n))).collect();
    assert_eq!(archived_paths(&case, id), want, "the first 8 closed are kept");

    // Configured limits apply ("echo s01.sh\n" has 12 bytes).
    case.write_config("[archive]\nmax_size = 12\nmax_per_command = 2\n");
    let id = run_ok(&case, ["sh", "-c", &reads]);
    assert_eq!(archived_paths(&case, id), want[..2].to_vec());
    case.write("long.sh", b"echo long.sh\n");
    let small = case.write("tiny.sh", b"true\n");
    let id = run_ok(&case, ["sh", "-c", "cat long.sh tiny.sh > /dev/null"]);
    assert_eq!(archived_paths(&case, id), vec![bytes_of(&small)], "long.sh has 13 bytes");

    case.write_config("[archive]\nenabled = false\n");
    let id = run_ok(&case, ["sh", "-c", "cat tiny.sh"]);
    assert!(archived_paths(&case, id).is_empty());
}

#[test]
fn files_are_archived_by_extension_name_or_shebang() {
    let case = Case::new("archive-shebang");
    let tool = case.write("tool", b"#!/bin/sh\necho tool\n"); // no extension
    let cgi = case.write("report.cgi", b"#!/usr/bin/perl\nprint 1;\n");
    set_mode(&cgi, 0o755); // an extension, but executable
    case.write("notes.txt", b"#! not a program, just text\n"); // extension, not executable
    case.write("data", b"1,2,3\n"); // no extension, no shebang
    case.write("table.csv", b"a,b\n");
    let makefile = case.write("Makefile", b"all:\n\ttrue\n"); // a configured name
    let odd = case.write(OsStr::from_bytes(b"\xffweird"), b"#!/bin/sh\n");
    let id = run_ok(
        &case,
        ["sh", "-c", "cat tool report.cgi notes.txt data table.csv Makefile \"$(printf '\\377weird')\" > /dev/null"],
    );
    let mut got = archived_paths(&case, id);
    got.sort();
    let mut want = vec![bytes_of(&tool), bytes_of(&cgi), bytes_of(&odd), bytes_of(&makefile)];
    want.sort();
    assert_eq!(got, want);

    // A configured extension is archived without a shebang.
    case.write_config("[archive]\nextensions = [\"csv\"]\nshebang = false\n");
    let id = run_ok(&case, ["sh", "-c", "cat tool table.csv > /dev/null"]);
    assert_eq!(archived_paths(&case, id), vec![bytes_of(&case.work.join("table.csv"))]);
}

#[test]
fn non_utf8_paths_are_restored() {
    let case = Case::new("archive-nonutf8");
    let dir = case.work.join(OsStr::from_bytes(b"proj\xfe"));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join(OsStr::from_bytes(b"r\xffn.sh"));
    std::fs::write(&script, b"echo non-utf8\n").unwrap();
    case.chown_tree(&dir);
    let id = run_ok(&case, [OsStr::new("sh"), script.as_os_str()]);
    assert_eq!(archived_paths(&case, id), vec![bytes_of(&script)]);
    let out = restore(&case, [id.to_string().as_str(), "--to", "out"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(std::fs::read(rerooted(&case.work.join("out"), &script)).unwrap(), b"echo non-utf8\n");
    let out = restore(&case, [OsStr::new("--file"), script.as_os_str(), OsStr::new("--stdout")]);
    assert_eq!(out.stdout, b"echo non-utf8\n", "{}", describe(&out));
}

#[test]
fn an_existing_file_is_not_overwritten_without_a_terminal_or_force() {
    let case = Case::new("archive-overwrite");
    let job = case.write("job.sh", b"echo one\n");
    let other = case.write("other.sh", b"echo two\n");
    let id = run_ok(&case, ["sh", "-c", "sh job.sh; sh other.sh"]);
    let id = id.to_string();
    let target = case.work.join("restored");
    let restored_job = rerooted(&target, &job);
    let restored_other = rerooted(&target, &other);
    assert!(restore(&case, [id.as_str(), "--to", "restored"]).status.success());

    // Again, unchanged: nothing to ask, success.
    let out = restore(&case, [id.as_str(), "--to", "restored"]);
    assert!(out.status.success(), "{}", describe(&out));

    // A changed file is refused (stdin is not a terminal), the other restored.
    std::fs::write(&restored_job, b"my edits\n").unwrap();
    std::fs::remove_file(&restored_other).unwrap();
    let out = restore(&case, [id.as_str(), "--to", "restored"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("exists and differs; not overwritten (use --force)"), "{err}");
    assert!(err.contains("job.sh"), "{err}");
    assert_eq!(std::fs::read(&restored_job).unwrap(), b"my edits\n");
    assert_eq!(std::fs::read(&restored_other).unwrap(), b"echo two\n");
    let leftovers: Vec<_> = std::fs::read_dir(restored_job.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.as_bytes().starts_with(b".prov-restore"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let out = restore(&case, [id.as_str(), "--to", "restored", "--force"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(std::fs::read(&restored_job).unwrap(), b"echo one\n");
}

#[test]
fn unknown_commands_and_files_are_named() {
    let case = Case::new("archive-unknown");
    let id = run_ok(&case, ["sh", "-c", "echo nothing to archive"]);
    let out = restore(&case, [id.to_string().as_str()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), format!("prov: command {id} has no archived files"));
    let out = restore(&case, ["999999"]);
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), "prov: no command with id 999999");
    let out = restore(&case, ["--file", "nope.sh"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("prov: no archived file ") && err.trim_end().ends_with("/nope.sh"), "{err}");
}

#[test]
fn bad_archive_keys_are_named_with_their_line() {
    let case = Case::new("archive-badconfig");
    case.write_config("[archive]\nenabled = true\nmax_per_comand = 3\n");
    let out = case.run(["sh", "-c", "echo ran"]);
    assert!(out.status.success());
    assert_eq!(out.stdout, b"ran\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("config.toml:3:") && err.contains("max_per_comand"), "{err}");
    // A mistake in a section only tracing uses does not stop reading the
    // journal: one warning naming the line, then restore goes on (and finds
    // nothing: the command above ran untraced because of the first mistake).
    case.write_config("[archive]\nextensions = [\".sh\"]\n");
    let out = restore(&case, ["1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("prov: warning: ") && first.contains("config.toml:2:") && first.contains("without dots"),
        "{err}"
    );
    assert_eq!(err.matches("config.toml").count(), 1, "said once: {err}");
}

#[test]
fn on_a_terminal_prov_asks_before_overwriting() {
    use expectrl::session::OsSession;
    use expectrl::Expect;

    let case = Case::new("archive-tty");
    let job = case.write("job.sh", b"echo original\n");
    let id = run_ok(&case, ["sh", "job.sh"]).to_string();
    let restored = rerooted(&case.work.join("restored"), &job);
    assert!(restore(&case, [id.as_str(), "--to", "restored"]).status.success());
    std::fs::write(&restored, b"my edits\n").unwrap();

    let answer = |reply: &str| {
        let mut cmd = case.pty_command(case.inst.prov(), &[]);
        cmd.args(["restore", id.as_str(), "--to", "restored"]);
        let mut session = OsSession::spawn(cmd).expect("spawn prov in a pty");
        session.set_expect_timeout(Some(std::time::Duration::from_secs(30)));
        let asked = session.expect("overwrite? [y/N] ").expect("prov asks");
        assert!(String::from_utf8_lossy(asked.before()).contains("job.sh exists and differs"));
        session.send_line(reply).unwrap();
        let _ = session.expect(expectrl::Eof);
        session.get_process_mut().wait().unwrap()
    };
    answer("n");
    assert_eq!(std::fs::read(&restored).unwrap(), b"my edits\n", "declined: kept");
    answer("y");
    assert_eq!(std::fs::read(&restored).unwrap(), b"echo original\n", "accepted: restored");
}

#[test]
fn archived_content_waits_in_the_spool_with_its_record() {
    let case = Case::new("archive-spool");
    case.run_sh("true"); // creates the database
    let data_dir = case.home.join(".local/share/prov");
    let set_modes = |mode: u32| set_modes_in(&data_dir, mode, mode & 0o666);
    set_modes(0o500);
    let script = b"echo spooled\n";
    case.write("job.sh", script);
    let out = case.run(["sh", "job.sh"]);
    assert_traced(&out);
    assert_eq!(out.stdout, b"spooled\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("spool"), "{}", describe(&out));
    let spool = case.spool_dir();
    let spooled: Vec<u8> =
        std::fs::read_dir(&spool).unwrap().flat_map(|e| std::fs::read(e.unwrap().path()).unwrap()).collect();
    assert!(String::from_utf8_lossy(&spooled).contains("{\"Archive\":"), "the spool file holds the content");

    set_modes(0o700);
    // The next prov that can write the database moves the record in (once
    // the collector has let go of its spool file).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let out = loop {
        let out = restore(&case, ["--file", "job.sh", "--stdout"]);
        if out.status.success() || std::time::Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(out.stdout, script);
}
