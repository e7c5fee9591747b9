//! The data the page embeds, built from the records: short field names
//! (a report of 10 000 commands is mostly this JSON), times in microseconds
//! (exact as JavaScript numbers, unlike nanoseconds since the epoch), byte
//! strings decoded lossily, and caps that keep the file small whatever was
//! recorded:
//!
//! - at most [`FILES_PER_ACCESS`] files written and as many read per
//!   command, with the totals (a `cp -r` of a source tree has 100 000);
//! - command text cut after [`TEXT_BYTES`], script text after
//!   [`SCRIPT_BYTES`], with the number of bytes left out;
//! - each distinct archived script text stored once, however many commands
//!   read it, and each directory of a file path once (a build reads the same
//!   directories over and over; this halves a typical report).
//!
//! Counts (and the charts) are always of all events, not of the capped lists.

use std::collections::HashMap;

use prov_model::Access;
use prov_store::{CommandRow, FileRow};
use serde::Serialize;

use crate::stats::{self, Charts};
use crate::ReportInput;

/// Files of each access (written, read) listed per command.
pub const FILES_PER_ACCESS: usize = 200;
/// Bytes of a command's text embedded.
pub const TEXT_BYTES: usize = 16 * 1024;
/// Bytes of an archived script embedded.
pub const SCRIPT_BYTES: usize = 256 * 1024;
/// Bytes of a file's lineage tree embedded.
pub const LINEAGE_BYTES: usize = 64 * 1024;
/// Processes listed per command (a kernel build runs tens of thousands).
pub const PROCESSES_PER_COMMAND: usize = 1000;
/// Bytes of a process's line embedded.
pub const PROCESS_LINE_BYTES: usize = 1024;

#[derive(Debug, Serialize)]
pub struct Data {
    pub title: String,
    pub description: String,
    pub generated_us: i64,
    /// The cap in force, so the page can say why a list is short.
    pub files_per_access: usize,
    /// Ordered by their first command.
    pub sessions: Vec<Session>,
    /// Oldest first.
    pub commands: Vec<Command>,
    /// Distinct archived script texts; commands refer to them by index.
    pub scripts: Vec<Cut>,
    /// Distinct directories of file paths; files refer to them by index.
    pub dirs: Vec<String>,
    /// Distinct lineage trees of file versions; files refer to them by index.
    pub lineages: Vec<Cut>,
    /// Distinct environments, each as lines (`NAME=VALUE`, then the git
    /// state); commands refer to them by index.
    pub envs: Vec<Vec<String>>,
    pub charts: Charts,
}

#[derive(Debug, Serialize)]
pub struct Session {
    pub id: String,
    /// The short form of the id, as `prov query session` shows it.
    pub label: String,
    pub host: String,
    pub user: String,
    pub shell: String,
    /// Start of its first command.
    pub start_us: i64,
    pub commands: usize,
}

#[derive(Debug, Serialize)]
pub struct Command {
    pub id: i64,
    /// Index into `sessions`.
    pub s: usize,
    pub seq: u64,
    pub text: Cut,
    pub cwd: String,
    pub start_us: i64,
    pub end_us: Option<i64>,
    pub exit: Option<i32>,
    /// Non-zero completeness counters (empty: the record is complete).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub incomplete: Vec<(&'static str, u64)>,
    /// All files written / read, before capping.
    pub n_w: u64,
    pub n_r: u64,
    pub w: Vec<File>,
    pub r: Vec<File>,
    /// Archived scripts: path and index into `scripts`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scripts: Vec<(String, usize)>,
    /// The process tree: depth, pid, line, files written; at most
    /// [`PROCESSES_PER_COMMAND`] of `n_p`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub p: Vec<(usize, u32, String, usize)>,
    #[serde(skip_serializing_if = "is_zero")]
    pub n_p: usize,
    /// Index of its environment in `envs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<usize>,
    /// The programs it ran: executable, size and partial hash.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub x: Vec<String>,
    /// Housekeeping ([`is_housekeeping`]): left out of the command list
    /// unless asked for.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub aside: bool,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Directory (index into `dirs`), name, size, mtime (µs), hash (16 hex
/// digits; `None`: unreadable), the id of the command that wrote what was
/// read (`None`: a write, or no recorded writer) and the index of its
/// lineage in `lineages`. The path is the directory, "/" unless it ends in
/// one, and the name.
pub type File = (usize, String, u64, i64, Option<String>, Option<i64>, Option<usize>);

/// A possibly shortened text and how many bytes were left out.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Cut(pub String, pub usize);

impl Cut {
    pub fn new(text: &str, max: usize) -> Cut {
        if text.len() <= max {
            return Cut(text.to_owned(), 0);
        }
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        Cut(text[..end].to_owned(), text.len() - end)
    }
}

/// Recorded bytes as page text: lossy UTF-8, and the bidirectional
/// overrides and isolates shown as `\u{202e}`: on the page they would
/// reorder the text around them, so a command would read as another
/// ("Trojan Source"). Markup needs nothing here: the page sets text only.
pub fn lossy(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    if !text.chars().any(reorders) {
        return text.into_owned();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for ch in text.chars() {
        match reorders(ch) {
            true => out.push_str(&format!("\\u{{{:x}}}", ch as u32)),
            false => out.push(ch),
        }
    }
    out
}

fn reorders(ch: char) -> bool {
    matches!(ch, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn us(ns: i64) -> i64 {
    ns.div_euclid(1000)
}

/// Directory paths and lineage trees, each stored once.
struct Dirs<'a> {
    list: Vec<String>,
    index: HashMap<String, usize>,
    input: &'a ReportInput,
    lineages: Vec<Cut>,
    lineage_index: HashMap<&'a str, usize>,
}

impl<'a> Dirs<'a> {
    fn new(input: &'a ReportInput) -> Dirs<'a> {
        Dirs { list: Vec::new(), index: HashMap::new(), input, lineages: Vec::new(), lineage_index: HashMap::new() }
    }

    fn file(&mut self, f: &FileRow) -> File {
        // Split before decoding: a lossy directory is still one directory.
        let (dir, name) = match f.path.iter().rposition(|&b| b == b'/') {
            Some(0) => (&b"/"[..], &f.path[1..]),
            Some(i) => (&f.path[..i], &f.path[i + 1..]),
            None => (&b""[..], &f.path[..]),
        };
        let dir = lossy(dir);
        let d = match self.index.get(&dir) {
            Some(&d) => d,
            None => {
                self.list.push(dir.clone());
                self.index.insert(dir, self.list.len() - 1);
                self.list.len() - 1
            }
        };
        let lineage = self.input.lineages.get(&f.id).map(|tree| {
            *self.lineage_index.entry(tree).or_insert_with(|| {
                self.lineages.push(Cut::new(&lossy(tree.as_bytes()), LINEAGE_BYTES));
                self.lineages.len() - 1
            })
        });
        let writer = self.input.writers.get(&f.id).copied();
        (d, lossy(name), f.size, us(f.mtime_ns), f.hash.map(|h| format!("{h:016x}")), writer, lineage)
    }

    /// The first `cap` files of `access` and how many there are.
    fn capped(&mut self, files: &[FileRow], access: Access, cap: usize) -> (u64, Vec<File>) {
        let mut all = files.iter().filter(|f| f.access == access);
        let shown = all.by_ref().take(cap).map(|f| self.file(f)).collect::<Vec<_>>();
        (shown.len() as u64 + all.count() as u64, shown)
    }
}

pub fn build(input: &ReportInput) -> Data {
    let cap = input.files_per_access.unwrap_or(FILES_PER_ACCESS);
    let mut sessions: Vec<Session> = Vec::new();
    let mut session_index: HashMap<&str, usize> = HashMap::new();
    let mut scripts: Vec<Cut> = Vec::new();
    let mut script_index: HashMap<&str, usize> = HashMap::new();
    let mut envs: Vec<Vec<String>> = Vec::new();
    let mut env_index: HashMap<i64, usize> = HashMap::new();
    let mut dirs = Dirs::new(input);
    let mut commands = Vec::with_capacity(input.records.len());

    for (c, files) in &input.records {
        let s = *session_index.entry(&c.session).or_insert_with(|| {
            sessions.push(Session {
                id: c.session.clone(),
                label: prov_store::short_session(&c.session).to_owned(),
                host: lossy(c.host.as_bytes()),
                user: lossy(c.user.as_bytes()),
                shell: c.shell.clone(),
                start_us: us(c.start_ns),
                commands: 0,
            });
            sessions.len() - 1
        });
        let session = &mut sessions[s];
        session.commands += 1;
        session.start_us = session.start_us.min(us(c.start_ns));

        let (n_w, w) = dirs.capped(files, Access::Write, cap);
        let (n_r, r) = dirs.capped(files, Access::Read, cap);
        let archived = input.archived.get(&c.id).map(Vec::as_slice).unwrap_or_default();
        let command_scripts = archived
            .iter()
            .map(|a| {
                let i = *script_index.entry(&a.text).or_insert_with(|| {
                    scripts.push(Cut::new(&lossy(a.text.as_bytes()), SCRIPT_BYTES));
                    scripts.len() - 1
                });
                (lossy(&a.path), i)
            })
            .collect();
        let processes = input.processes.get(&c.id).map(Vec::as_slice).unwrap_or_default();
        let p = processes
            .iter()
            .take(PROCESSES_PER_COMMAND)
            .map(|l| (l.depth, l.pid, Cut::new(&lossy(l.label.as_bytes()), PROCESS_LINE_BYTES).0, l.writes))
            .collect();
        let shown_env = input.environments.get(&c.id);
        let env = shown_env.and_then(|e| e.env.as_ref()).map(|(id, env)| {
            *env_index.entry(*id).or_insert_with(|| {
                envs.push(crate::environment_lines(env));
                envs.len() - 1
            })
        });
        let x = shown_env.map(|e| e.executables.iter().map(crate::executable_line).collect()).unwrap_or_default();
        commands.push(Command {
            id: c.id,
            s,
            seq: c.seq,
            text: Cut::new(&lossy(&c.text), TEXT_BYTES),
            cwd: lossy(&c.cwd),
            start_us: us(c.start_ns),
            end_us: c.end_ns.map(us),
            exit: c.exit_status,
            incomplete: incomplete_of(c),
            n_w,
            n_r,
            w,
            r,
            scripts: command_scripts,
            p,
            n_p: processes.len(),
            env,
            x,
            aside: is_housekeeping(c),
        });
    }
    // Lanes in order of their first command, whatever order records came in.
    let mut order: Vec<usize> = (0..sessions.len()).collect();
    order.sort_by_key(|&i| (sessions[i].start_us, i));
    let mut new_index = vec![0; sessions.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    for c in &mut commands {
        c.s = new_index[c.s];
    }
    let mut slots: Vec<Option<Session>> = sessions.into_iter().map(Some).collect();
    let sessions: Vec<Session> = order.iter().map(|&i| slots[i].take().expect("each session once")).collect();

    let charts = stats::charts(&input.records, &commands, &sessions, input.include_prov);
    Data {
        title: input.title.clone(),
        description: input.description.clone(),
        generated_us: us(input.generated_ns),
        files_per_access: cap,
        sessions,
        commands,
        scripts,
        dirs: dirs.list,
        lineages: dirs.lineages,
        envs,
        charts,
    }
}

/// Housekeeping rather than work: prov's own commands, the shell's own
/// exit (it writes only the history file) and clearing the screen. The
/// command list leaves them out unless asked; the charts never count them
/// (prov's own work only with `include_prov`).
pub fn is_housekeeping(c: &CommandRow) -> bool {
    c.is_prov_own_work() || is_shell_exit_or_clear(&c.text)
}

/// `exit`, `logout`, `exit 3`, `clear`, `reset`: nothing else on the line.
pub fn is_shell_exit_or_clear(text: &[u8]) -> bool {
    let mut words = text.split(|b| b.is_ascii_whitespace()).filter(|w| !w.is_empty());
    matches!(
        (words.next(), words.next(), words.next()),
        (Some(b"exit" | b"logout"), _, None) | (Some(b"clear" | b"reset"), None, None)
    )
}

/// The counters of an incomplete record, plus whether it ended short (its
/// collector or caller was gone) or ran untraced: those have a reason, not a
/// count, and are shown as 1.
fn incomplete_of(c: &CommandRow) -> Vec<(&'static str, u64)> {
    let mut reasons = c.completeness.reasons();
    // The reason for nested namespaces goes with their counter.
    let nested = |why: &str| {
        why.ends_with(prov_model::NESTED_NAMESPACES_REASON_END)
            || why.ends_with(prov_model::NESTED_NAMESPACES_FOLLOWED_END)
    };
    if c.incomplete.as_deref().is_some_and(|why| !nested(why)) {
        reasons.push(("ended_short", 1));
    }
    if c.untraced.is_some() {
        reasons.push(("untraced", 1));
    }
    reasons
}
