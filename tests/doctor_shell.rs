//! `prov doctor` answers "why wasn't my command recorded?" first: run at the
//! prompt of a real bash or zsh (through a pty), its first lines say whether
//! that shell is traced and whether the rc line is there, with a remedy on
//! every line that is not ok.

use prov_e2e::pty::*;
use prov_e2e::*;

fn doctor_in(sh: &mut Shell, case: &Case) -> String {
    sh.run(&format!("{} doctor > doctor.txt 2>&1; echo status=$? >> doctor.txt", case.inst.prov().display()));
    std::fs::read_to_string(case.work.join("doctor.txt")).unwrap()
}

/// Every line that is not ok is followed by its remedy.
fn assert_remedies(report: &str) {
    let lines: Vec<&str> = report.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("FAIL") || l.starts_with("WARN") || l.starts_with("note") {
            assert!(
                lines.get(i + 1).is_some_and(|n| n.trim_start().starts_with("->")),
                "no remedy for {l:?}:\n{report}"
            );
        }
    }
}

fn traced_shell_is_said_first(shell: &'static str) {
    let case = Case::new(&format!("doctor-traced-{shell}"));
    let mut sh = Shell::start(&case, shell);
    let report = doctor_in(&mut sh, &case);
    sh.exit();
    let first: Vec<&str> = report.lines().take(2).collect();
    assert!(first[0].starts_with(&format!("ok    this {shell} (pid ")) && first[0].contains("is traced"), "{report}");
    assert!(first[1].starts_with("ok ") && first[1].contains("has the prov line"), "{report}");
    assert!(report.contains("configuration: defaults, no file"), "{report}");
    assert!(report.ends_with("status=0\n"), "{report}");
    assert_remedies(&report);
}

fn untraced_shell_is_said_first_with_what_to_do(shell: &'static str) {
    let case = Case::new(&format!("doctor-untraced-{shell}"));
    // The user's rc file without prov's line.
    std::fs::write(rc_file(&case, shell), prompt_rc(shell)).unwrap();
    case.chown_tree(&case.home);
    let mut sh = Shell::spawn(&case, shell);
    let report = doctor_in(&mut sh, &case);
    sh.exit();
    let lines: Vec<&str> = report.lines().collect();
    assert!(lines[0].starts_with(&format!("FAIL  this {shell} (pid ")) && lines[0].contains("not traced"), "{report}");
    assert!(lines[1].contains(&format!("prov shell {shell}")), "{report}");
    let rc = rc_file(&case, shell);
    assert!(lines[2].starts_with("FAIL") && lines[2].contains(&format!("{} has no", rc.display())), "{report}");
    assert!(lines[3].contains(&format!("eval \"$(prov init {shell})\"")), "{report}");
    assert!(report.ends_with("status=1\n"), "{report}");
    assert_remedies(&report);
}

#[test]
fn traced_bash_is_said_first() {
    traced_shell_is_said_first("bash");
}

#[test]
fn traced_zsh_is_said_first() {
    traced_shell_is_said_first("zsh");
}

#[test]
fn untraced_bash_is_said_first_with_what_to_do() {
    untraced_shell_is_said_first_with_what_to_do("bash");
}

#[test]
fn untraced_zsh_is_said_first_with_what_to_do() {
    untraced_shell_is_said_first_with_what_to_do("zsh");
}
