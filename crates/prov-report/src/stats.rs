//! The charts' numbers, counted over all events (not the capped lists the
//! page embeds): commands with the most files written, sessions with the
//! most commands, directories with the most file events.

use std::collections::HashMap;

use prov_store::{CommandRow, FileRow};
use serde::Serialize;

use crate::model::{is_shell_exit_or_clear, lossy, Command, Cut, Session};

/// Bars per chart.
pub const CHART_ROWS: usize = 10;
/// Bytes of a command's text in a bar's label.
const LABEL_BYTES: usize = 80;

#[derive(Debug, Serialize)]
pub struct Charts {
    pub writes: Vec<Bar>,
    pub sessions: Vec<Bar>,
    pub dirs: Vec<Bar>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Bar {
    pub label: String,
    pub count: u64,
    /// What a click on the bar shows: a command index or a session index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<usize>,
}

/// The `CHART_ROWS` largest non-zero counts, ties in input order.
fn top<T>(items: impl Iterator<Item = (u64, T)>) -> Vec<(u64, T)> {
    let mut v: Vec<(u64, T)> = items.filter(|(n, _)| *n > 0).collect();
    // Stable: equal counts keep their order.
    v.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
    v.truncate(CHART_ROWS);
    v
}

/// `commands` are `records`' in the same order. prov's own work (a query
/// hashing files, the pager's history) counts only with `include_prov`;
/// the shell's own exit (its history file) and clearing the screen never.
pub fn charts(
    records: &[(CommandRow, Vec<FileRow>)],
    commands: &[Command],
    sessions: &[Session],
    include_prov: bool,
) -> Charts {
    let counted = |i: usize| {
        let c = &records[i].0;
        !is_shell_exit_or_clear(&c.text) && (include_prov || !c.is_prov_own_work())
    };
    let writes = top(commands.iter().enumerate().filter(|&(i, _)| counted(i)).map(|(i, c)| (c.n_w, i)))
        .into_iter()
        .map(|(count, i)| Bar {
            label: Cut::new(&commands[i].text.0, LABEL_BYTES).0,
            count,
            command: Some(i),
            session: None,
        })
        .collect();

    let sessions = top(sessions.iter().enumerate().map(|(i, s)| (s.commands as u64, i)))
        .into_iter()
        .map(|(count, i)| {
            let s = &sessions[i];
            Bar {
                label: format!("{}@{} {} session {}", s.user, s.host, s.shell, s.label),
                count,
                command: None,
                session: Some(i),
            }
        })
        .collect();

    let mut by_dir: HashMap<&[u8], u64> = HashMap::new();
    for f in records.iter().enumerate().filter(|&(i, _)| counted(i)).flat_map(|(_, (_, files))| files) {
        *by_dir.entry(parent(&f.path)).or_default() += 1;
    }
    let mut dirs: Vec<(&[u8], u64)> = by_dir.into_iter().collect();
    // HashMap order is random: sort by path first so ties come out the same.
    dirs.sort_unstable();
    let dirs = top(dirs.into_iter().map(|(d, n)| (n, d)))
        .into_iter()
        .map(|(count, d)| Bar { label: lossy(d), count, command: None, session: None })
        .collect();

    Charts { writes, sessions, dirs }
}

/// The directory of a path ("/" for a file in the root).
fn parent(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(0) => b"/",
        Some(i) => &path[..i],
        None => b".",
    }
}
