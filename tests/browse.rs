//! `prov browse`, driven as a user would: in a real terminal (tmux), keys
//! sent with send-keys, the screen read with capture-pane. And the opt-in
//! Ctrl-R binding of bash and zsh, which puts the chosen command on the
//! prompt line without running it.

use std::process::Output;
use std::time::{Duration, Instant};

use prov_e2e::pty::{prompt_rc, rc_file, PROMPT};
use prov_e2e::*;

/// A tmux server of its own (`-L`) running as the test user.
struct Tmux<'a> {
    case: &'a Case,
    socket: String,
}

impl<'a> Tmux<'a> {
    /// Starts `command` (a shell command line) in a 160x40 window.
    fn start(case: &'a Case, name: &str, command: &str) -> Tmux<'a> {
        let t = Tmux { case, socket: format!("prov-{name}-{}", std::process::id()) };
        let out = t.tmux(&["new-session", "-d", "-x", "160", "-y", "40", command]);
        assert!(out.status.success(), "tmux: {}", describe(&out));
        t
    }

    fn tmux(&self, args: &[&str]) -> Output {
        self.case
            .command("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env("TERM", "xterm-256color")
            .output()
            .unwrap()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        assert!(self.tmux(&args).status.success());
    }

    fn type_text(&self, text: &str) {
        assert!(self.tmux(&["send-keys", "-t", "0", "-l", text]).status.success());
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "0"]).stdout).into_owned()
    }

    /// The screen once `ready` holds for it and it has settled: the same
    /// twice, 50 ms apart (the program draws when it gets to it, and tmux
    /// may show a frame half-drawn); fails with the last screen after 20 s.
    fn wait(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = String::new();
        loop {
            let s = self.screen();
            if ready(&s) && s == last {
                return s;
            }
            assert!(Instant::now() < deadline, "waiting for {what}; the screen:\n{s}");
            last = s;
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux<'_> {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// Three commands: one made data.csv, one sorted it, one failed.
fn journal(case: &Case) {
    case.run_sh("printf 'b\\na\\n' > data.csv");
    case.run_sh("sort data.csv > sorted.csv");
    let failed = case.run(["sh", "-c", "cat data.csv > /dev/null; exit 3"]);
    assert_eq!(failed.status.code(), Some(3));
}

fn chosen(case: &Case) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let file = case.work.join("chosen.txt");
    loop {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if text.contains("status=") || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn browse_command(case: &Case) -> String {
    format!("{} browse > chosen.txt; echo status=$? >> chosen.txt", case.inst.prov().display())
}

#[test]
fn search_files_pane_readers_and_enter_prints_the_command() {
    let case = Case::new("browse-search");
    journal(&case);
    let t = Tmux::start(&case, "search", &browse_command(&case));
    let first = t.wait("the command list", |s| s.contains("sort data.csv"));
    assert!(first.contains("printf") && first.contains("exit 3"), "{first}");
    // Type to search, case-insensitively, every word.
    t.type_text("SORTED sort");
    // The whole search typed and drawn (tmux may show a frame half-drawn, or
    // one of the letters typed so far): wait for all that is checked below.
    let s = t.wait("only the sort", |s| {
        s.contains("search> SORTED sort")
            && s.contains("[1/3")
            && !s.contains("printf")
            && s.contains("read  data.csv")
            && s.contains("wrote sorted.csv")
    });
    assert!(s.contains("sort data.csv > sorted.csv") && !s.contains("printf"), "{s}");
    // The files pane: what the selected command read and wrote.
    // (Paths below the command's directory are shown relative to it.)
    assert!(s.contains("read  data.csv") && s.contains("wrote sorted.csv"), "{s}");
    // From the file read to the commands that read it.
    t.keys(&["C-u"]);
    t.wait("all commands again", |s| s.contains("[3/3"));
    t.type_text("sort");
    t.wait("only the sort", |s| s.contains("[1/3"));
    t.keys(&["Tab"]);
    t.type_text("r");
    let readers = t.wait("the readers of data.csv", |s| s.contains("[2/2 readers of"));
    assert!(readers.contains("sort data.csv") && readers.contains("exit 3"), "{readers}");
    assert!(!readers.contains("printf"), "the writer did not read it: {readers}");
    t.keys(&["Escape"]);
    t.wait("the journal again, searched as before", |s| s.contains("search> sort   [1/3]"));
    t.keys(&["Enter"]);
    assert_eq!(chosen(&case), "sh -c 'sort data.csv > sorted.csv'\nstatus=0\n");
}

#[test]
fn narrowing_to_failed_and_quitting_prints_nothing() {
    let case = Case::new("browse-failed");
    journal(&case);
    let t = Tmux::start(&case, "failed", &browse_command(&case));
    t.wait("the command list", |s| s.contains("[3/3"));
    t.keys(&["C-f"]);
    let s = t.wait("failed only", |s| s.contains("[1/3 failed"));
    assert!(s.contains("exit 3") && !s.contains("sort data.csv"), "{s}");
    t.keys(&["Escape"]);
    assert_eq!(chosen(&case), "status=1\n", "nothing chosen, status 1");
}

/// Ctrl-R at a traced prompt: the browser opens with the typed line as its
/// search, and Enter puts the chosen command on the prompt line, unrun.
fn ctrl_r_puts_the_command_on_the_line(shell: &'static str, by_config: bool) {
    let case = Case::new(&format!("browse-ctrl-r-{shell}"));
    journal(&case);
    let prov = case.inst.prov().display().to_string();
    let init = if by_config {
        case.write_config("[browse]\nbind_ctrl_r = true\n");
        format!("eval \"$({prov} init {shell})\"")
    } else {
        format!("eval \"$({prov} init {shell} --bind-ctrl-r)\"")
    };
    std::fs::write(rc_file(&case, shell), format!("{}{init}\n", prompt_rc(shell))).unwrap();
    case.chown_tree(&case.home);
    std::fs::remove_file(case.work.join("sorted.csv")).unwrap();
    let t = Tmux::start(&case, shell, &format!("{shell} -i"));
    t.wait("the prompt", |s| s.contains(PROMPT.trim_end()));
    t.type_text("sorted");
    t.keys(&["C-r"]);
    let s = t.wait("the browser", |s| s.contains("search> sorted"));
    assert!(s.contains("[1/3"), "{s}");
    t.keys(&["Enter"]);
    let line = format!("{PROMPT}sh -c 'sort data.csv > sorted.csv'");
    let s = t.wait("the chosen command on the prompt line", |s| s.contains(&line));
    assert!(!s.contains("search>"), "{s}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!case.work.join("sorted.csv").exists(), "put on the line, not run");
    // Without the option, Ctrl-R stays the shell's own.
    let plain = Case::new(&format!("browse-no-ctrl-r-{shell}"));
    std::fs::write(rc_file(&plain, shell), format!("{}eval \"$({prov} init {shell})\"\n", prompt_rc(shell))).unwrap();
    plain.chown_tree(&plain.home);
    let t = Tmux::start(&plain, &format!("{shell}-plain"), &format!("{shell} -i"));
    t.wait("the prompt", |s| s.contains(PROMPT.trim_end()));
    t.keys(&["C-r"]);
    let s = t.wait("the shell's own search", |s| s.contains("i-search") || s.contains("bck-i-search"));
    assert!(!s.contains("search>"), "{s}");
}

#[test]
fn ctrl_r_bash_by_option() {
    ctrl_r_puts_the_command_on_the_line("bash", false);
}

#[test]
fn ctrl_r_zsh_by_config_key() {
    ctrl_r_puts_the_command_on_the_line("zsh", true);
}

/// `l` on a file a command wrote shows where that version came from, even
/// when a later command wrote the same content to the same path; the file
/// row `l` applies to is marked as the selected command is.
#[test]
fn lineage_starts_at_the_write_of_the_command_it_came_from() {
    let case = Case::new("browse-lineage");
    case.run_sh("printf 'b\\na\\n' > data.csv");
    case.run_sh("sort data.csv > out.csv");
    case.run_sh("printf 'a\\nb\\n' > out.csv");
    let t = Tmux::start(&case, "lineage", &browse_command(&case));
    t.wait("the command list", |s| s.contains("sort data.csv"));
    t.type_text("sort");
    t.wait("only the sort", |s| s.contains("[1/3") && s.contains("wrote out.csv"));
    t.keys(&["Tab"]);
    t.keys(&["Down"]);
    let s = t.wait("the written file selected", |s| s.lines().any(|l| l.contains("> wrote out.csv")));
    assert!(!s.lines().any(|l| l.contains("> read  data.csv")), "one file row marked:\n{s}");
    t.type_text("l");
    let popup = t.wait("the lineage", |s| s.contains("lineage of") && s.contains("$ "));
    let first = popup.lines().find(|l| l.contains("$ ")).unwrap_or_default();
    assert!(first.contains("sort data.csv > out.csv"), "starts at the sort's write:\n{popup}");
    // The texts as the tree shows them: `printf '\''a\nb\n'\'' > out.csv`.
    assert!(!popup.contains(r"a\nb\n"), "not the later writer of the same content:\n{popup}");
    assert!(popup.contains(r"b\na\n"), "and goes on to data.csv's writer:\n{popup}");
}

/// Each command in the list says how long ago it started and how long it
/// ran.
#[test]
fn the_list_says_how_long_ago_and_how_long_each_command_ran() {
    let case = Case::new("browse-durations");
    case.run_sh("sleep 1.2");
    let t = Tmux::start(&case, "durations", &browse_command(&case));
    let s = t.wait("the command list", |s| s.contains("sleep 1.2"));
    let row = s.lines().find(|l| l.contains("sleep 1.2")).unwrap_or_default();
    assert!(row.contains(" ago "), "when it started, as an age: {row:?}");
    let words: Vec<&str> = row.split_whitespace().collect();
    // Seconds that are not the age ("5s ago").
    let seconds: Vec<f64> = words
        .iter()
        .enumerate()
        .filter(|&(i, _)| words.get(i + 1) != Some(&"ago"))
        .filter_map(|(_, w)| w.strip_suffix('s')?.parse().ok())
        .collect();
    assert!(seconds.iter().any(|&s| s >= 1.2), "how long it ran, at least the 1.2 s it slept: {row:?}");
}
