//! Everyday use as a person sees it (issue 14): a history read at a glance,
//! colour and a pager on a terminal only, short session ids, lineage that
//! folds repeats, `--stat` that answers "is my file stale?", restore that
//! asks before writing, and the documentation that travels with prov.

use std::os::unix::fs::PermissionsExt;
use std::process::Output;

use expectrl::session::OsSession;
use expectrl::Expect;
use prov_e2e::*;
use serde_json::Value;

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn ok(out: Output) -> Output {
    assert!(out.status.success(), "{}", describe(&out));
    out
}

/// `prov ARGS…` run directly in a pseudo-terminal as the user, with `env`
/// (`NAME=value`) added; everything it printed.
fn prov_on_terminal(case: &Case, args: &[&str], env: &[&str]) -> String {
    let mut env: Vec<String> = env.iter().map(|s| s.to_string()).collect();
    env.push("LANG=C.UTF-8".into());
    let mut cmd = case.pty_command(case.inst.prov(), &env);
    cmd.args(args);
    let mut session = OsSession::spawn(cmd).expect("spawn prov in a pty");
    session.set_expect_timeout(Some(std::time::Duration::from_secs(30)));
    let found = session.expect(expectrl::Eof).expect("prov ends");
    let mut all = found.before().to_vec();
    for m in found.matches() {
        all.extend_from_slice(m);
    }
    let _ = session.get_process_mut().wait();
    String::from_utf8_lossy(&all).into_owned()
}

const ESC: &str = "\x1b[";

#[test]
fn history_is_one_line_per_command() {
    let case = Case::new("everyday-history");
    std::fs::create_dir_all(case.work.join("proj")).unwrap();
    case.chown_tree(&case.work);
    let in_proj = |script: &str| {
        let mut cmd = case.command(case.inst.prov());
        cmd.args(["run", "--", "sh", "-c", script]).current_dir(case.work.join("proj"));
        let out = cmd.output().unwrap();
        assert_traced(&out);
        out
    };
    in_proj("printf 'b\\na\\n' > in.csv");
    assert_eq!(in_proj("sort in.csv > out.csv; exit 3").status.code(), Some(3));
    let all = case.query(["history"]);
    let out = ok(case.prov(["query", "history"]));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "one line per command:\n{text}");
    // Newest first: the failed sort, with its id, status, short cwd and text.
    let (sort, printf) = (lines[0], lines[1]);
    assert!(sort.starts_with(&format!("#{} ", all[0]["id"])), "{text}");
    assert!(
        sort.contains("exit 3") && sort.contains("~/work/proj") && sort.contains("sort in.csv > out.csv"),
        "{text}"
    );
    assert!(printf.contains(" ok ") && printf.contains("printf"), "{text}");
    // A three-digit status leaves the directory column where it was.
    assert_eq!(in_proj("exit 127").status.code(), Some(127));
    let text = stdout(&ok(case.prov(["query", "history"])));
    let columns: Vec<Option<usize>> = text.lines().map(|l| l.find("~/work/proj")).collect();
    assert_eq!(columns.len(), 3, "{text}");
    assert!(columns.iter().all(|&c| c.is_some() && c == columns[0]), "one directory column:\n{text}");
    // The time is shown (the order of ids is not the order of starts).
    let hhmm = all[0]["start"].as_str().unwrap();
    assert!(hhmm.len() > 16, "{hhmm}");
    assert!(!text.contains(ESC), "no colour into a pipe: {text:?}");
    assert!(!text.contains("in.csv  "), "no files unless asked: {text}");
    // The files only when asked, on the lines below their command.
    let text = stdout(&ok(case.prov(["query", "history", "--files"])));
    assert!(text.lines().any(|l| l.starts_with("    ") && l.contains("write") && l.contains("out.csv")), "{text}");
}

#[test]
fn a_filter_matching_nothing_says_so_and_exits_1() {
    let case = Case::new("everyday-nomatch");
    case.run_sh("echo hi > a.txt");
    for args in [
        &["query", "history", "--text", "no-such-text"][..],
        &["query", "history", "--failed"][..],
        &["query", "session", "--text", "no-such-text"][..],
    ] {
        let out = case.prov(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", describe(&out));
        assert_eq!(stderr(&out).trim(), "prov: no command matched", "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn colour_and_pager_only_on_a_terminal() {
    let case = Case::new("everyday-colour");
    case.run_sh("echo hi > a.txt");
    let _ = case.run(["sh", "-c", "exit 2"]);
    // On a terminal: colour, through the pager ($PAGER, else `less -FRX`).
    let paged = prov_on_terminal(&case, &["query", "history"], &["TERM=xterm", "PAGER=sed s/^/PAGED:/"]);
    let lines: Vec<&str> = paged.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() == 2 && lines.iter().all(|l| l.starts_with("PAGED:")), "{paged:?}");
    assert!(paged.contains(ESC), "colour on a terminal: {paged:?}");
    // NO_COLOR and --color never turn it off; --color always on into a pipe.
    let plain = prov_on_terminal(&case, &["query", "history"], &["TERM=xterm", "PAGER=cat", "NO_COLOR=1"]);
    assert!(plain.contains("exit 2") && !plain.contains(ESC), "{plain:?}");
    let plain = prov_on_terminal(&case, &["query", "history", "--color", "never"], &["TERM=xterm", "PAGER=cat"]);
    assert!(plain.contains("exit 2") && !plain.contains(ESC), "{plain:?}");
    let piped = stdout(&ok(case.prov(["query", "history", "--color", "always"])));
    assert!(piped.contains(ESC), "{piped:?}");
    // The default pager is less with -FRX (found on PATH).
    let fake = case.home.join("fakebin");
    std::fs::create_dir_all(&fake).unwrap();
    std::fs::write(fake.join("less"), "#!/bin/sh\necho \"LESS ARGS: $*\"\ncat\n").unwrap();
    std::fs::set_permissions(fake.join("less"), std::fs::Permissions::from_mode(0o755)).unwrap();
    case.chown_tree(&fake);
    let path = format!("PATH={}:/usr/local/bin:/usr/bin:/bin", fake.display());
    let less = prov_on_terminal(&case, &["query", "history"], &["TERM=xterm", &path]);
    assert!(less.contains("LESS ARGS: -FRX"), "{less:?}");
    // Without less (a minimal container), the text still arrives.
    let empty = case.home.join("no-less");
    std::fs::create_dir_all(&empty).unwrap();
    let path = format!("PATH={}", empty.display());
    let plain = prov_on_terminal(&case, &["query", "history"], &["TERM=xterm", &path]);
    assert!(plain.contains("exit 2") && !plain.contains("not found"), "{plain:?}");
}

#[test]
fn sessions_have_one_short_form_and_prov_run_groups_by_terminal() {
    let case = Case::new("everyday-sessions");
    // Two `prov run`s from one terminal session, one from another (setsid).
    case.run_sh("echo 1 > one.txt");
    case.run_sh("echo 2 > two.txt");
    let mut other = case.command("setsid");
    other.arg("-w").arg(case.inst.prov()).args(["run", "--", "sh", "-c", "echo 3 > three.txt"]);
    assert_traced(&ok(other.output().unwrap()));
    let sessions = case.query(["session"]);
    assert_eq!(sessions.len(), 2, "grouped by the terminal session: {sessions:#?}");
    // Two more from a session whose leader is out of sight (in an outer pid
    // namespace, as under a CI runner or in a container): one session too.
    let mut unseen = in_new_pid_namespace(case.command("sh"));
    unseen.arg("-c").arg(format!("{prov} run -- true && {prov} run -- true", prov = case.inst.prov().display()));
    let out = ok(unseen.output().unwrap());
    assert_traced(&out);
    let sessions = case.query(["session"]);
    assert_eq!(sessions.len(), 3, "grouped when the session leader is out of sight: {sessions:#?}");
    assert_eq!(sessions.iter().filter(|s| s["commands"] == 2).count(), 2, "{sessions:#?}");
    let two = sessions
        .iter()
        .filter(|s| s["commands"] == 2)
        .min_by_key(|s| s["first_ns"].as_u64())
        .expect("the first session of two");
    let short = two["short"].as_str().expect("a short form").to_string();
    assert_eq!(short.len(), 8, "{short}");
    assert!(two["session"].as_str().unwrap().replace('-', "").ends_with(&short));
    // The short form is what the listing shows and what the filters take.
    let listing = stdout(&ok(case.prov(["query", "session"])));
    assert!(listing.lines().any(|l| l.starts_with(&short)), "{listing}");
    assert_eq!(case.query(["session", &short]).len(), 2);
    assert_eq!(case.query(["history", "--session", &short]).len(), 2);
    // The report's lanes are labelled with it.
    ok(case.prov(["report", "-o", "r.html"]));
    let page = std::fs::read_to_string(case.work.join("r.html")).unwrap();
    assert!(page.contains(&format!("\"label\":\"{short}\"")), "lane label {short} not in the report");
}

/// `command` (as built by `Case::command`) started by `unshare --pid --fork
/// --mount-proc`, so its session leader is in the outer pid namespace.
fn in_new_pid_namespace(command: std::process::Command) -> std::process::Command {
    let mut wrapped = std::process::Command::new("unshare");
    wrapped.args(["--pid", "--fork", "--mount-proc"]).arg(command.get_program()).args(command.get_args());
    wrapped.env_clear().stdin(std::process::Stdio::null());
    for (name, value) in command.get_envs() {
        if let Some(value) = value {
            wrapped.env(name, value);
        }
    }
    if let Some(dir) = command.get_current_dir() {
        wrapped.current_dir(dir);
    }
    wrapped
}

/// The record of `sh job.sh` with an archived job.sh; returns its id.
fn archived_job(case: &Case) -> String {
    case.write("job.sh", b"echo original > made.txt\n");
    case.run_sh("sh job.sh");
    case.last_command()["id"].to_string()
}

#[test]
fn restore_shows_first_and_writes_only_when_told() {
    let case = Case::new("everyday-restore");
    let id = archived_job(&case);
    let job = case.work.join("job.sh");
    std::fs::write(&job, b"my edits\n").unwrap();
    // By default: what would be restored, and where; nothing written.
    let before: Vec<_> = std::fs::read_dir(&case.work).unwrap().map(|e| e.unwrap().file_name()).collect();
    let out = ok(case.prov(["restore", &id]));
    assert!(stdout(&out).contains(job.to_str().unwrap()), "{}", describe(&out));
    assert!(stderr(&out).contains("--to DIR") && stderr(&out).contains("--in-place"), "{}", describe(&out));
    let after: Vec<_> = std::fs::read_dir(&case.work).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(before, after, "nothing written into the current directory");
    // --file alone needs no id.
    let out = ok(case.prov(["restore", "--file", "job.sh"]));
    assert!(stdout(&out).contains(job.to_str().unwrap()), "{}", describe(&out));
    // --in-place writes at the recorded path, but never over a changed
    // file without a yes (none can come here) or --force.
    let out = case.prov(["restore", &id, "--in-place"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert_eq!(std::fs::read(&job).unwrap(), b"my edits\n");
    ok(case.prov(["restore", &id, "--in-place", "--force"]));
    assert_eq!(std::fs::read(&job).unwrap(), b"echo original > made.txt\n");
}

#[test]
fn lineage_folds_repeats_and_knows_a_file_the_command_wrote_itself() {
    let case = Case::new("everyday-lineage");
    case.run_sh("mkdir d; for i in $(seq 1 40); do echo $i > d/f$i.txt; done");
    case.run_sh("tar cf d.tar d");
    let tree = stdout(&ok(case.prov(["query", "lineage", "d.tar"])));
    assert!(!tree.contains("shown above"), "{tree}");
    assert!(tree.lines().count() < 15, "folded:\n{tree}");
    assert!(tree.contains("40 files"), "{tree}");
    let all = stdout(&ok(case.prov(["query", "lineage", "d.tar", "--all-files"])));
    for i in 1..=40 {
        assert!(all.contains(&format!("d/f{i}.txt")), "f{i} with --all-files:\n{all}");
    }
    // A make-like command that writes a file and then reads it back.
    case.run_sh("printf 'b\\na\\n' > in.csv");
    case.run_sh("sort in.csv > mid.csv; cat mid.csv > final.csv");
    let tree = stdout(&ok(case.prov(["query", "lineage", "final.csv"])));
    // Paths below the current directory are shown relative to it.
    let mid = tree.lines().find(|l| l.contains("── mid.csv  ")).unwrap_or_else(|| panic!("{tree}"));
    assert!(mid.contains("written earlier by this command"), "{tree}");
    assert!(!mid.contains("no recorded writer"), "{tree}");
}

#[test]
fn stat_says_whether_the_asked_file_is_up_to_date() {
    let case = Case::new("everyday-stat");
    case.write("in.csv", b"b\na\n");
    case.run_sh("sort in.csv > sorted.csv");
    case.run_sh("cat sorted.csv > result.csv");
    // The input is renamed afterwards: a change upstream, not of result.csv.
    std::fs::rename(case.work.join("sorted.csv"), case.work.join("renamed.csv")).unwrap();
    let out = ok(case.prov(["query", "wrote", "result.csv", "--stat"]));
    let text = stdout(&out);
    assert!(text.contains("result.csv is up to date"), "{text}");
    assert!(text.contains("sorted.csv") && text.contains("missing"), "{text}");
    std::fs::write(case.work.join("result.csv"), b"changed\n").unwrap();
    // No recorded command wrote it as it is now (exit 1), and --stat says
    // how it differs from the last recorded write.
    let out = case.prov(["query", "wrote", "result.csv", "--stat"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = stdout(&out);
    assert!(text.contains("result.csv was modified since"), "{text}");
    // Lineage --stat: the whole tree of its last recorded version, each
    // file with its state (exit 1: no recorded command wrote it as it is).
    let out = case.prov(["query", "lineage", "result.csv", "--stat"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let tree = stdout(&out);
    assert!(tree.lines().next().unwrap_or("").contains("(changed since #"), "{tree}");
    assert!(tree.lines().any(|l| l.contains("in.csv") && l.contains("[up to date]")), "{tree}");
    assert!(tree.lines().any(|l| l.contains("sorted.csv") && l.contains("[missing]")), "{tree}");
}

#[test]
fn help_man_page_and_completions_come_from_the_definitions() {
    let case = Case::new("everyday-docs");
    for sub in [&["query", "wrote"][..], &["query", "lineage"][..], &["query", "read"][..]] {
        let mut args = sub.to_vec();
        args.push("--help");
        let help = stdout(&ok(case.prov(&args)));
        // The description follows on the same line, or (long help) on the next.
        let lines: Vec<&str> = help.lines().collect();
        let at = lines.iter().position(|l| l.trim_start().starts_with("<FILE>")).unwrap_or_else(|| panic!("{help}"));
        let same_line = lines[at].trim().len() > "<FILE>".len() + 5;
        let indent = |l: &str| l.len() - l.trim_start().len();
        let next_line = lines.get(at + 1).is_some_and(|n| n.trim().len() > 5 && indent(n) > indent(lines[at]));
        assert!(same_line || next_line, "{sub:?}: <FILE> has no description:\n{help}");
    }
    let dir = case.work.join("docs");
    ok(case.prov([std::ffi::OsStr::new("__docs"), dir.as_os_str()]));
    for f in [
        "man/man1/prov.1",
        "man/man1/prov-query.1",
        "man/man1/prov-query-history.1",
        "bash-completion/completions/prov",
        "zsh/site-functions/_prov",
        "fish/vendor_completions.d/prov.fish",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    // The man page renders, and says where the field documentation is.
    let man = ok(case.command("man").arg("-l").arg(dir.join("man/man1/prov-query-history.1")).output().unwrap());
    let page = stdout(&man);
    assert!(page.contains("--json") && page.contains("JSON Lines"), "{page}");
    // bash completes the subcommands.
    let script = format!(
        "source {}; COMP_WORDS=(prov qu); COMP_CWORD=1; COMP_LINE='prov qu'; COMP_POINT=7; _prov prov qu prov; echo \"${{COMPREPLY[*]}}\"",
        dir.join("bash-completion/completions/prov").display()
    );
    let out = ok(case.command("bash").args(["-c", &script]).output().unwrap());
    assert!(stdout(&out).contains("query"), "{}", describe(&out));
}

#[test]
fn report_without_output_and_database_mode() {
    let case = Case::new("everyday-report");
    case.run_sh("echo hi > a.txt");
    let out = ok(case.prov(["report"]));
    let written = case.work.join("prov-report.html");
    assert!(written.is_file(), "{}", describe(&out));
    assert!(stderr(&out).contains(written.to_str().unwrap()), "says where: {}", describe(&out));
    let mode = std::fs::metadata(case.database()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the database is the user's alone");
}

#[test]
fn json_stays_the_same() {
    // The one-line layout is for people: --json still has every field.
    let case = Case::new("everyday-json");
    case.run_sh("echo hi > a.txt");
    let found: Vec<Value> = case.query(["history"]);
    assert_eq!(found.len(), 1);
    assert!(found[0]["session"].is_string() && found[0]["cwd"].is_string());
}

/// `prov ARGS…` as the user with no locale set at all (as after `su -`):
/// the C locale, whose character set is ASCII.
fn prov_in_c_locale(case: &Case, args: &[&str]) -> String {
    let mut cmd = case.command(case.inst.prov());
    cmd.env_remove("LANG").args(args);
    stdout(&ok(cmd.output().unwrap()))
}

#[test]
fn a_locale_that_is_not_utf8_gets_ascii_trees_and_marks() {
    let case = Case::new("everyday-ascii");
    case.run_sh("printf 'b\\na\\n' > in.csv");
    case.run_sh("sort in.csv |\nuniq > out.csv");
    let tree = prov_in_c_locale(&case, &["query", "lineage", "out.csv"]);
    assert!(tree.is_ascii(), "only ASCII in the C locale:\n{tree}");
    assert!(tree.contains("`-- "), "the tree drawn in ASCII:\n{tree}");
    let history = prov_in_c_locale(&case, &["query", "history"]);
    assert!(history.is_ascii(), "only ASCII in the C locale:\n{history}");
    assert!(history.contains("sort in.csv | ^J uniq > out.csv"), "the line break marked in ASCII:\n{history}");
    // The same in a UTF-8 locale draws with lines and arrows.
    let tree = stdout(&ok(case.prov(["query", "lineage", "out.csv"])));
    assert!(tree.contains("└── "), "{tree}");
    let history = stdout(&ok(case.prov(["query", "history"])));
    assert!(history.contains("sort in.csv | ↵ uniq > out.csv"), "{history}");
}

#[test]
fn a_command_typed_on_several_lines_stays_inside_the_tree() {
    let case = Case::new("everyday-multiline");
    case.run_sh("printf 'b\\na\\n' |\nsort > in.csv");
    case.run_sh("uniq in.csv > out.csv");
    let tree = stdout(&ok(case.prov(["query", "lineage", "out.csv"])));
    let lines: Vec<&str> = tree.lines().collect();
    let first = lines.iter().position(|l| l.contains("printf")).unwrap_or_else(|| panic!("{tree}"));
    let next = lines.get(first + 1).unwrap_or_else(|| panic!("{tree}"));
    // The second line of the text starts where the first did, after the
    // tree's own lines.
    let column = |line: &str, part: &str| line.find(part).map(|at| line[..at].chars().count());
    let text_at = column(lines[first], "sh -c");
    assert!(text_at.is_some());
    assert_eq!(column(next, "sort > in.csv"), text_at, "continued under the text:\n{tree}");
    let before: String = next.chars().take(text_at.unwrap()).collect();
    assert!(before.chars().all(|c| c == ' ' || c == '│'), "only the tree's lines before it:\n{tree}");
}

/// The lines under "Commands:" in `--help`: one per subcommand, each
/// within an 80-column terminal (there, a longer one wraps).
fn summaries_are_one_line_each(help: &str) {
    let listed: Vec<&str> =
        help.lines().skip_while(|l| !l.starts_with("Commands:")).skip(1).take_while(|l| !l.is_empty()).collect();
    assert!(listed.len() > 3, "{help}");
    for line in listed {
        assert!(line.chars().count() <= 80, "a summary longer than a terminal line: {line:?}");
    }
}

#[test]
fn subcommand_summaries_are_one_line_each() {
    let case = Case::new("everyday-summaries");
    summaries_are_one_line_each(&stdout(&ok(case.prov(["--help"]))));
    summaries_are_one_line_each(&stdout(&ok(case.prov(["query", "--help"]))));
}

#[test]
fn man_pages_have_examples_files_environment_and_see_also() {
    let case = Case::new("everyday-man-sections");
    let dir = case.work.join("docs");
    ok(case.prov([std::ffi::OsStr::new("__docs"), dir.as_os_str()]));
    let page = |name: &str| {
        let mut man = case.command("man");
        man.arg("-l").arg(dir.join("man/man1").join(name)).env("MANWIDTH", "100");
        stdout(&ok(man.output().unwrap()))
    };
    let main = page("prov.1");
    for section in ["EXIT STATUS", "EXAMPLES", "FILES", "ENVIRONMENT", "SEE ALSO"] {
        assert!(main.lines().any(|l| l == section), "prov(1) has no {section} section:\n{main}");
    }
    assert!(main.contains("prov query lineage results.csv") && main.contains("config.toml"), "{main}");
    let history = page("prov-query-history.1");
    assert!(history.lines().any(|l| l == "SEE ALSO") && history.contains("prov(1)"), "{history}");
}

#[test]
fn no_records_is_one_rule_exit_1_with_a_reason() {
    let case = Case::new("everyday-no-records");
    for args in [&["query", "history"][..], &["query", "session"][..], &["report", "-o", "r.html"][..]] {
        let out = case.prov(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", describe(&out));
        assert_eq!(stderr(&out), "prov: no records yet\n", "{args:?}");
    }
}

#[test]
fn init_says_how_to_turn_on_the_ctrl_r_binding() {
    let case = Case::new("everyday-init-ctrl-r");
    for shell in ["bash", "zsh"] {
        let init = stdout(&ok(case.prov(["init", shell])));
        let turn_on = format!("prov init {shell} --bind-ctrl-r");
        assert!(init.lines().any(|l| l.starts_with('#') && l.contains(&turn_on)), "{init}");
    }
}
