//! The pty driver of the interactive-shell tests: bash or zsh started as
//! the test user in a pseudo-terminal with the test's rc file, commands typed
//! and the output read up to the next prompt.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use expectrl::session::OsSession;
use expectrl::Expect;

use crate::Case;

pub const PROMPT: &str = "PROMPT> ";

pub struct Shell {
    pub name: &'static str,
    pub session: OsSession,
    pub pid: u32,
    /// What the shell printed before its first prompt.
    pub startup: String,
    /// The lines prov said after the commands typed so far, in order.
    pub prov_said: Vec<String>,
}

pub fn rc_file(case: &Case, shell: &str) -> PathBuf {
    case.home.join(if shell == "bash" { ".bashrc" } else { ".zshrc" })
}

/// The rc lines that set the test's prompt.
pub fn prompt_rc(shell: &str) -> String {
    if shell == "bash" {
        format!("PS1='{PROMPT}'\n")
    } else {
        format!("PROMPT='{PROMPT}'\nunsetopt PROMPT_SP\n")
    }
}

/// Writes the rc file: `before` (the user's own settings), the prompt, and
/// the integration line, in that order.
pub fn write_rc(case: &Case, shell: &str, prov: &Path, before: &str) {
    let rc = format!("{before}\n{}{}\n", prompt_rc(shell), init_line(shell, prov));
    std::fs::write(rc_file(case, shell), rc).unwrap();
    case.chown_tree(&case.home);
}

pub fn init_line(shell: &str, prov: &Path) -> String {
    format!("eval \"$({} init {shell})\"", prov.display())
}

impl Shell {
    pub fn start(case: &Case, name: &'static str) -> Shell {
        Shell::start_with(case, name, "", &case.inst.prov())
    }

    pub fn start_with(case: &Case, name: &'static str, rc: &str, prov: &Path) -> Shell {
        write_rc(case, name, prov, rc);
        Shell::spawn(case, name)
    }

    /// Starts the shell with the rc file as it is.
    pub fn spawn(case: &Case, name: &'static str) -> Shell {
        Shell::spawn_program(case, name, Path::new(name), &["-i"])
    }

    /// Starts `program ARGS` (a shell, or `prov shell`) in a pty as the user.
    pub fn spawn_program(case: &Case, name: &'static str, program: &Path, args: &[&str]) -> Shell {
        let env = ["TERM=dumb".to_string(), "LANG=C.UTF-8".to_string(), format!("SHELL=/bin/{name}")];
        let mut cmd = case.pty_command(program, &env);
        cmd.args(args);
        let mut session = OsSession::spawn(cmd).expect("spawn shell in a pty");
        session.set_expect_timeout(Some(Duration::from_secs(30)));
        let mut shell = Shell { name, session, pid: 0, startup: String::new(), prov_said: Vec::new() };
        shell.startup = shell.wait_prompt();
        shell.assert_outside_observations();
        shell
    }

    /// The interactive shell itself never lives inside an observation.
    pub fn assert_outside_observations(&mut self) {
        let pid = self.run("echo \"P\"\"ID=$$\"");
        let pid: u32 =
            pid.split("PID=").nth(1).and_then(|s| s.split_whitespace().next()?.parse().ok()).expect("shell pid");
        let ns = |p: String| std::fs::read_link(p).unwrap();
        assert_eq!(
            ns(format!("/proc/{pid}/ns/mnt")),
            // This thread's: a test may have moved it into a namespace of its own.
            ns("/proc/thread-self/ns/mnt".into()),
            "{} shell {pid} is inside a mount namespace",
            self.name
        );
        self.pid = pid;
    }

    pub fn wait_prompt(&mut self) -> String {
        let first = match self.session.expect(PROMPT) {
            Ok(found) => return String::from_utf8_lossy(found.before()).into_owned(),
            Err(e) => e,
        };
        // What the shell and its processes were doing, for the report.
        let pid = self.session.get_process().pid().as_raw();
        let tree = Command::new("ps").args(["-e", "--forest", "-o", "pid,ppid,stat,wchan:24,args"]).output().ok();
        let tree = tree.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
        let near: Vec<&str> = tree
            .lines()
            .filter(|l| l.contains("prov") || l.contains(&pid.to_string()) || l.contains(self.name))
            .collect();
        let report = format!("{} (pid {pid}): no prompt: {first}\n{}", self.name, near.join("\n"));
        // zsh's line editor has been seen, about once in a dozen runs of
        // this suite and once in the benchmarks, waiting for a key without
        // having drawn its prompt; whether prov plays a part is not known
        // (see docs/guide.md, "The shell integration"). A shell idle in its line editor,
        // with no process of its own left, is not hung: Ctrl-L redraws the
        // prompt and runs nothing, and the test goes on, saying so on
        // stderr. Anything else fails the test with this report.
        let children = tree.lines().filter(|l| l.split_whitespace().nth(1) == Some(&pid.to_string())).count();
        let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
        if children == 0 && (wchan.contains("wait_woken") || wchan.contains("tty")) {
            eprintln!("{report}\n(idle in its line editor: Ctrl-L to redraw the prompt)");
            self.session.send("\x0c").unwrap();
            if let Ok(found) = self.session.expect(PROMPT) {
                return String::from_utf8_lossy(found.before()).into_owned();
            }
        }
        panic!("{report}\nwchan: {wchan}");
    }

    /// Types `line` and returns what was printed before the next prompt.
    pub fn run(&mut self, line: &str) -> String {
        self.session.send_line(line).unwrap();
        let out = self.wait_prompt();
        // What prov said in the terminal (e.g. why it did not trace) is shown
        // with a failing test's output.
        for said in out.lines().filter(|l| l.contains("prov:")) {
            eprintln!("{} after {line:?}: {said}", self.name);
            self.prov_said.push(said.to_string());
        }
        out
    }

    /// Types `exit` (twice if the shell objects, as zsh does to running
    /// jobs); a shell that still does not exit fails the test instead of
    /// hanging it.
    pub fn exit(mut self) {
        for _ in 0..2 {
            let _ = self.session.send_line("exit");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if !self.session.get_process().is_alive().unwrap_or(false) {
                    let _ = self.session.get_process_mut().wait();
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        nix_kill(self.session.get_process().pid().as_raw() as u32);
        panic!("{} did not exit", self.name);
    }
}

/// SIGKILL to `pid`.
pub fn nix_kill(pid: u32) {
    let st = Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
    assert!(st.success());
}
