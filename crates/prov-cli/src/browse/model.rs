//! The browser's state, apart from any terminal: the commands loaded, what
//! the user typed and narrowed by, what is selected. Kept free of drawing so
//! unit tests can drive it key by key.

use std::time::{SystemTime, UNIX_EPOCH};

use prov_store::{CommandRow, FileRow};

/// One command as the list needs it; the text is searched in lower case.
pub struct Entry {
    pub row: CommandRow,
    lower: String,
}

impl Entry {
    pub fn new(row: CommandRow) -> Entry {
        let lower = String::from_utf8_lossy(&row.text).to_lowercase();
        Entry { row, lower }
    }

    pub fn failed(&self) -> bool {
        self.row.exit_status.is_some_and(|s| s != 0)
    }
}

/// How far back the list reaches (Ctrl-T cycles through these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    All,
    Day,
    Week,
    Month,
}

impl Window {
    pub fn next(self) -> Window {
        match self {
            Window::All => Window::Day,
            Window::Day => Window::Week,
            Window::Week => Window::Month,
            Window::Month => Window::All,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Window::All => "any time",
            Window::Day => "last 24 h",
            Window::Week => "last 7 days",
            Window::Month => "last 30 days",
        }
    }

    fn seconds(self) -> Option<i64> {
        match self {
            Window::All => None,
            Window::Day => Some(86_400),
            Window::Week => Some(7 * 86_400),
            Window::Month => Some(30 * 86_400),
        }
    }
}

/// Which pane keys go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Commands,
    Files,
}

/// What the list shows: every command, or those that read or wrote one file
/// (reached from the files pane).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Journal,
    Readers(Vec<u8>),
    Writers(Vec<u8>),
}

pub struct App {
    /// Newest first.
    pub journal: Vec<Entry>,
    /// The commands of a `Readers`/`Writers` view.
    pub related: Vec<Entry>,
    pub source: Source,
    pub query: String,
    /// The journal's search, put aside while a readers/writers list shows.
    journal_query: Option<String>,
    pub failed_only: bool,
    /// Only commands run in this directory or below it (Ctrl-D).
    pub below: Option<Vec<u8>>,
    /// The directory Ctrl-D narrows to.
    pub here: Vec<u8>,
    /// Only commands of this session (Ctrl-S, from the selected command).
    pub session: Option<String>,
    pub window: Window,
    /// Indices into the shown entries (journal or related) passing the filters.
    pub shown: Vec<usize>,
    pub selected: usize,
    pub focus: Focus,
    /// The selected command's files (id, files, how many in all).
    pub files: Option<(i64, Vec<FileRow>, u64)>,
    pub file_selected: usize,
    /// A text shown over the panes (a lineage), with its title.
    pub popup: Option<(String, String)>,
    pub popup_scroll: u16,
    /// Whether every command is loaded (the first screen shows the newest).
    pub complete: bool,
}

impl App {
    pub fn new(journal: Vec<Entry>, here: Vec<u8>, query: String) -> App {
        let mut app = App {
            journal,
            related: Vec::new(),
            source: Source::Journal,
            query,
            journal_query: None,
            failed_only: false,
            below: None,
            here,
            session: None,
            window: Window::All,
            shown: Vec::new(),
            selected: 0,
            focus: Focus::Commands,
            files: None,
            file_selected: 0,
            popup: None,
            popup_scroll: 0,
            complete: false,
        };
        app.refilter();
        app
    }

    pub fn entries(&self) -> &[Entry] {
        match self.source {
            Source::Journal => &self.journal,
            _ => &self.related,
        }
    }

    /// The selected command, if any passes the filters.
    pub fn current(&self) -> Option<&Entry> {
        self.shown.get(self.selected).and_then(|&i| self.entries().get(i))
    }

    /// Recomputes the list after the query or a narrowing changed; the
    /// selection stays on the same command when it is still shown.
    pub fn refilter(&mut self) {
        let keep = self.current().map(|e| e.row.id);
        let words: Vec<String> = self.query.to_lowercase().split_whitespace().map(str::to_string).collect();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let since_ns = self.window.seconds().map(|s| (now - s).saturating_mul(1_000_000_000));
        let entries = self.entries();
        let shown: Vec<usize> = (0..entries.len())
            .filter(|&i| {
                let e = &entries[i];
                matches(&e.lower, &words)
                    && (!self.failed_only || e.failed())
                    && self.below.as_ref().is_none_or(|d| prov_model::config::is_within(&e.row.cwd, d))
                    && self.session.as_ref().is_none_or(|s| &e.row.session == s)
                    && since_ns.is_none_or(|t| e.row.start_ns >= t)
            })
            .collect();
        self.selected = keep.and_then(|id| shown.iter().position(|&i| entries[i].row.id == id)).unwrap_or(0);
        self.shown = shown;
    }

    pub fn move_selection(&mut self, by: isize) {
        match self.focus {
            Focus::Commands => {
                let last = self.shown.len().saturating_sub(1);
                self.selected = self.selected.saturating_add_signed(by).min(last);
            }
            Focus::Files => {
                let n = self.files.as_ref().map_or(0, |f| f.1.len());
                self.file_selected = self.file_selected.saturating_add_signed(by).min(n.saturating_sub(1));
            }
        }
    }

    pub fn toggle_failed(&mut self) {
        self.failed_only = !self.failed_only;
        self.refilter();
    }

    pub fn toggle_below(&mut self) {
        self.below = match self.below {
            Some(_) => None,
            None => Some(self.here.clone()),
        };
        self.refilter();
    }

    pub fn toggle_session(&mut self) {
        self.session = match (&self.session, self.current()) {
            (Some(_), _) => None,
            (None, Some(e)) => Some(e.row.session.clone()),
            (None, None) => None,
        };
        self.refilter();
    }

    pub fn next_window(&mut self) {
        self.window = self.window.next();
        self.refilter();
    }

    /// The path of the file selected in the files pane.
    pub fn current_file(&self) -> Option<&FileRow> {
        self.files.as_ref().and_then(|f| f.1.get(self.file_selected))
    }

    /// Shows `commands` (readers or writers of a file) instead of the journal.
    pub fn show_related(&mut self, source: Source, commands: Vec<CommandRow>) {
        self.related = commands.into_iter().map(Entry::new).collect();
        // Every reader (writer) is shown, whatever found the file.
        if self.source == Source::Journal {
            self.journal_query = Some(std::mem::take(&mut self.query));
        } else {
            self.query.clear();
        }
        self.source = source;
        // The indices were into the other list.
        self.shown.clear();
        self.focus = Focus::Commands;
        self.selected = 0;
        self.refilter();
    }

    /// Back from a popup, a related view or the files pane; false when
    /// there is nothing to go back from (the browser then quits).
    pub fn back(&mut self) -> bool {
        if self.popup.take().is_some() {
            return true;
        }
        if self.focus == Focus::Files {
            self.focus = Focus::Commands;
            return true;
        }
        if self.source != Source::Journal {
            self.source = Source::Journal;
            self.related.clear();
            self.shown.clear();
            self.query = self.journal_query.take().unwrap_or_default();
            self.selected = 0;
            self.refilter();
            return true;
        }
        false
    }
}

/// Every word of the query is in the text (in any order): "sort csv"
/// finds `sort -t, data.csv`.
fn matches(lower_text: &str, words: &[String]) -> bool {
    words.iter().all(|w| lower_text.contains(w.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: i64, text: &str, cwd: &str, session: &str, status: i32) -> Entry {
        Entry::new(CommandRow {
            text: text.as_bytes().to_vec(),
            cwd: cwd.as_bytes().to_vec(),
            session: session.into(),
            exit_status: Some(status),
            start_ns: 1_000_000_000 * (id + 1_700_000_000),
            ..CommandRow::fixture(id)
        })
    }

    fn texts(app: &App) -> Vec<String> {
        app.shown.iter().map(|&i| String::from_utf8_lossy(&app.entries()[i].row.text).into_owned()).collect()
    }

    fn app() -> App {
        App::new(
            vec![
                entry(4, "make all", "/home/u/proj", "s2", 2),
                entry(3, "Sort -t, data.CSV > sorted.csv", "/home/u/proj/sub", "s1", 0),
                entry(2, "python plot.py", "/home/u/other", "s1", 0),
                entry(1, "grep x y", "/home/u/proj", "s1", 1),
            ],
            b"/home/u/proj".to_vec(),
            String::new(),
        )
    }

    #[test]
    fn typing_narrows_case_insensitively_by_every_word() {
        let mut a = app();
        assert_eq!(a.shown.len(), 4);
        a.query = "csv sort".into();
        a.refilter();
        assert_eq!(texts(&a), ["Sort -t, data.CSV > sorted.csv"]);
        a.query = "nothing".into();
        a.refilter();
        assert!(a.current().is_none());
    }

    #[test]
    fn narrowing_by_failed_directory_session_and_time() {
        let mut a = app();
        a.toggle_failed();
        assert_eq!(texts(&a), ["make all", "grep x y"]);
        a.toggle_failed();
        a.toggle_below();
        assert_eq!(texts(&a), ["make all", "Sort -t, data.CSV > sorted.csv", "grep x y"]);
        a.toggle_below();
        a.move_selection(2);
        a.toggle_session();
        assert_eq!(a.session.as_deref(), Some("s1"));
        assert_eq!(texts(&a), ["Sort -t, data.CSV > sorted.csv", "python plot.py", "grep x y"]);
        assert_eq!(a.current().unwrap().row.id, 2, "the selection stays on its command");
        a.toggle_session();
        a.next_window();
        assert!(a.shown.is_empty(), "all of them are from 2023");
    }

    #[test]
    fn escape_goes_back_before_it_quits() {
        let mut a = app();
        a.query = "sort".into();
        a.refilter();
        a.show_related(Source::Readers(b"/x".to_vec()), vec![CommandRow::fixture(9)]);
        assert_eq!(a.shown.len(), 1, "the search does not hide readers");
        a.focus = Focus::Files;
        assert!(a.back());
        assert!(a.back());
        assert_eq!((a.source.clone(), a.shown.len()), (Source::Journal, 1));
        assert_eq!(a.query, "sort", "the journal's search is back");
        assert!(!a.back());
    }
}
