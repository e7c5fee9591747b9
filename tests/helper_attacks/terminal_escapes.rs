//! Issue #10, item 4: another user names a file so that printing its name
//! clears the victim's screen and sets the window title. Recorded names and
//! command texts reach human output escaped, never as control characters;
//! `--json` still gives the exact bytes.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::Output;

use expectrl::session::OsSession;
use expectrl::Expect;

use super::*;

/// Clears the screen, homes the cursor, prints a fake all-clear, sets the title.
const HOSTILE: &[u8] = b"data\x1b[2J\x1b[1;1Hprov: all clean\x1b]0;pwned\x07.csv";
const HOSTILE_SHOWN: &str = r"data\e[2J\e[1;1Hprov: all clean\e]0;pwned\a.csv";
/// A script (archived, so restore prints it) whose name sets the title.
const SCRIPT: &[u8] = b"run\x1b]0;pwned\x07.sh";
const SCRIPT_SHOWN: &str = r"run\e]0;pwned\a.sh";
/// A command-line word with colour sequences and a right-to-left override.
const WORD: &str = "\x1b[31mred\x1b[0m \u{202e}txt.exe";
const WORD_SHOWN: &str = r"\e[31mred\e[0m \u{202e}txt.exe";

/// What a terminal would act on: C0 controls but the line break, DEL, C1
/// controls, bidirectional overrides and isolates, bytes that are not UTF-8.
fn terminal_controls(bytes: &[u8]) -> Vec<String> {
    let Ok(text) = std::str::from_utf8(bytes) else { return vec!["bytes that are not UTF-8".into()] };
    text.char_indices()
        .filter(|&(_, c)| {
            c != '\n'
                && matches!(c, '\0'..='\x1f' | '\x7f' | '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .map(|(i, c)| format!("{c:?} at byte {i}"))
        .collect()
}

fn assert_terminal_safe(what: &str, out: &Output) {
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let found = terminal_controls(bytes);
        assert!(found.is_empty(), "`{what}`: {stream} hands the terminal {found:?}\n{}", describe(out));
    }
}

/// `prov ARGS…` as the user, checked for terminal safety; returns stdout and
/// stderr as text.
fn human(case: &Case, args: &[&OsStr]) -> (Output, String, String) {
    let out = case.prov(args);
    let what = args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ");
    assert_terminal_safe(&what, &out);
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let stderr = String::from_utf8(out.stderr.clone()).unwrap();
    (out, stdout, stderr)
}

/// `prov ARGS…` as the user in a pseudo-terminal (stdin, stdout and stderr
/// a tty), until it waits for `until` (answered with `reply`) or exits;
/// returns everything it wrote, line ends as the tty gives them.
fn in_pty(case: &Case, args: &[&OsStr], until: Option<(&str, &str)>) -> Vec<u8> {
    let mut cmd = std::process::Command::new("setpriv");
    cmd.arg(format!("--reuid={}", case.inst.uid))
        .arg(format!("--regid={}", case.inst.gid))
        .arg("--init-groups")
        .args(["--", "env", "-i"])
        .arg(format!("HOME={}", case.home.display()))
        .arg("PATH=/usr/local/bin:/usr/bin:/bin")
        .arg("TERM=xterm-256color")
        // Colour and the pager write prov's own control sequences; what is
        // tested here is that recorded names and texts never add any.
        .arg("NO_COLOR=1")
        .arg("PAGER=cat")
        .arg("LANG=C.UTF-8")
        .arg(case.inst.prov())
        .args(args)
        .current_dir(&case.work);
    let mut session = OsSession::spawn(cmd).expect("spawn prov in a pty");
    session.set_expect_timeout(Some(std::time::Duration::from_secs(30)));
    let mut seen = Vec::new();
    if let Some((prompt, reply)) = until {
        let asked = session.expect(prompt).unwrap_or_else(|e| panic!("prov asks {prompt:?}: {e}"));
        seen.extend_from_slice(asked.before());
        seen.extend_from_slice(prompt.as_bytes());
        session.send_line(reply).unwrap();
    }
    let rest = session.expect(expectrl::Eof).expect("prov exits");
    seen.extend(rest.get(0).unwrap_or_default());
    let _ = session.get_process_mut().wait();
    seen
}

#[test]
fn hostile_names_and_command_texts_are_shown_escaped() {
    let case = Case::new("escapes");
    let hostile = case.write(OsStr::from_bytes(HOSTILE), b"1,2\n");
    let script = case.write(OsStr::from_bytes(SCRIPT), b"cat \"$1\" > copy.csv\n");
    let out = case.run([OsStr::new("sh"), script.as_os_str(), hostile.as_os_str(), OsStr::new(WORD)]);
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));

    // JSON keeps the exact bytes, as before.
    let cmd = case.writer_of("copy.csv");
    let text = cmd["text"].as_str().unwrap().as_bytes().to_vec();
    assert!(text.windows(HOSTILE.len()).any(|w| w == HOSTILE), "{cmd:#}");
    assert!(text.windows(WORD.len()).any(|w| w == WORD.as_bytes()), "{cmd:#}");
    let paths: Vec<Vec<u8>> = files(&cmd).into_iter().map(|(_, p)| p).collect();
    assert!(paths.contains(&bytes_of(&hostile)) && paths.contains(&bytes_of(&script)), "{cmd:#}");
    let id = cmd["id"].to_string();

    // Human output: escaped, the same way everywhere.
    let (_, history, _) = human(&case, &["query".as_ref(), "history".as_ref(), "--files".as_ref()]);
    for shown in [HOSTILE_SHOWN, SCRIPT_SHOWN, WORD_SHOWN] {
        assert!(history.contains(shown), "history shows {shown}:\n{history}");
    }
    let (_, wrote, _) = human(&case, &["query".as_ref(), "wrote".as_ref(), "copy.csv".as_ref()]);
    assert!(wrote.contains(HOSTILE_SHOWN) && wrote.contains(WORD_SHOWN), "{wrote}");
    let (_, read, _) = human(&case, &["query".as_ref(), "read".as_ref(), hostile.as_os_str()]);
    // Asked from the work directory: the file is shown relative to it.
    assert!(read.contains(&format!("* read  {HOSTILE_SHOWN}")), "{read}");
    let unknown = case.work.join(OsStr::from_bytes(b"gone\x1b[2J\xff.csv"));
    let (out, _, nobody) = human(&case, &["query".as_ref(), "wrote".as_ref(), unknown.as_os_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(nobody.contains(r"gone\e[2J\xff.csv"), "{nobody}");
    let (_, tree, _) = human(&case, &["query".as_ref(), "lineage".as_ref(), "copy.csv".as_ref()]);
    assert!(tree.contains(HOSTILE_SHOWN) && tree.contains(SCRIPT_SHOWN) && tree.contains(WORD_SHOWN), "{tree}");

    // Restore's messages name the script escaped.
    let (out, restored, _) = human(&case, &["restore".as_ref(), id.as_ref(), "--to".as_ref(), "back".as_ref()]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(restored.starts_with("restored back/") && restored.trim_end().ends_with(SCRIPT_SHOWN), "{restored}");
    let (_, list, _) = human(&case, &["restore".as_ref(), id.as_ref(), "--list".as_ref()]);
    assert!(list.trim_end().ends_with(SCRIPT_SHOWN), "{list}");
    let listed = parse_json_lines(&case.prov(["restore", id.as_str(), "--list", "--json"]).stdout);
    assert_eq!(listed.iter().map(path_bytes).collect::<Vec<_>>(), vec![bytes_of(&script)], "--json: exact bytes");
    let back = case.work.join("back").join(script.strip_prefix("/").unwrap());
    std::fs::write(&back, b"edited\n").unwrap();
    let (out, _, differs) = human(&case, &["restore".as_ref(), id.as_ref(), "--to".as_ref(), "back".as_ref()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(differs.lines().count(), 1, "{differs}");
    assert!(differs.contains(&format!("{SCRIPT_SHOWN} exists and differs")), "{differs}");

    // On a terminal the same: the listing, and restore's question.
    let tty = in_pty(&case, &["query".as_ref(), "history".as_ref(), "--files".as_ref()], None);
    let tty_text = String::from_utf8_lossy(&tty).replace("\r\n", "\n");
    assert!(terminal_controls(tty_text.as_bytes()).is_empty(), "pty: {:?}", terminal_controls(tty_text.as_bytes()));
    assert!(tty_text.contains(HOSTILE_SHOWN), "{tty_text}");
    let args: [&OsStr; 4] = ["restore".as_ref(), id.as_ref(), "--to".as_ref(), "back".as_ref()];
    let asked = in_pty(&case, &args, Some(("overwrite? [y/N] ", "n")));
    let asked_text = String::from_utf8_lossy(&asked).replace("\r\n", "\n");
    assert!(terminal_controls(asked_text.as_bytes()).is_empty(), "pty: {asked_text:?}");
    assert!(asked_text.contains(&format!("{SCRIPT_SHOWN} exists and differs; overwrite?")), "{asked_text}");
    assert_eq!(std::fs::read(&back).unwrap(), b"edited\n", "declined: kept");
}

/// The helper prints the paths it was handed (a program that cannot run, a
/// directory it cannot enter): another user may have chosen those names too.
#[test]
fn the_helpers_own_lines_show_hostile_names_escaped() {
    let case = Case::new("escapes-helper");
    let missing = case.work.join(OsStr::from_bytes(HOSTILE));
    let out = super::helper(&case)
        .args([OsStr::new("join"), OsStr::new("4000000"), OsStr::new("0"), OsStr::new("-")])
        .arg(&missing)
        .arg("x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127), "{}", describe(&out));
    assert_terminal_safe("prov-helper join … MISSING", &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(r"data\x1b[2J\x1b[1;1Hprov: all clean\x1b]0;pwned\x07.csv"), "{stderr}");
}
