//! `prov browse`: the journal as a full-screen browser. Type to search
//! command texts, narrow by directory, session, failure and time, see the
//! selected command's files, go from a file to its readers, writers or
//! lineage. Enter prints the chosen command on standard output (the shell
//! binding puts it on the prompt line, not run).
//!
//! The screen is drawn on standard error and keys are read from the
//! terminal, so `$(prov browse)` works: only the chosen text reaches stdout.

mod model;
mod view;

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use prov_export::glyphs::Glyphs;
use prov_export::lineage::{Lookup, MatchKind, Version};
use prov_model::Access;
use prov_store::Store;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{execute, terminal};
use ratatui::Terminal;

use model::{App, Entry, Focus, Source};

/// Commands shown on the first screen before the rest is loaded: the first
/// screen must come fast on a journal of a million events.
const FIRST_SCREEN: usize = 500;
/// Files listed per command in the files pane.
const FILES_SHOWN: usize = 500;

#[derive(clap::Args)]
pub struct BrowseArgs {
    /// Start with this search text (the shell binding passes the prompt line).
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub query: String,
    /// Print the first screen (160x40) as text and exit: what benches/
    /// times (process start to first screen) and a look without a terminal.
    #[arg(long, hide = true)]
    pub first_screen: bool,
}

pub fn browse(args: BrowseArgs, reach: crate::journal::Reach) -> Result<ExitCode> {
    let Some(store) = crate::journal::open_for(reach)? else {
        bail!("no records yet: nothing to browse");
    };
    let first = store.history(Some(FIRST_SCREEN)).context("cannot read the journal")?;
    let complete = first.len() < FIRST_SCREEN;
    let here = std::env::current_dir().map(|d| d.as_os_str().as_bytes().to_vec()).unwrap_or_default();
    let mut app = App::new(first.into_iter().map(Entry::new).collect(), here, args.query);
    app.complete = complete;
    if args.first_screen {
        return print_first_screen(&mut app, &store);
    }
    // The rest arrives from a second connection while the first screen shows.
    let (tx, rest) = mpsc::channel();
    if !complete {
        let path = store.path().to_owned();
        std::thread::spawn(move || {
            let all = Store::open_read_only(&path).and_then(|s| s.history(None));
            let _ = tx.send(all.map(|rows| rows.into_iter().map(Entry::new).collect::<Vec<_>>()));
        });
    }
    let chosen = with_terminal(|term| run(term, &mut app, &store, &rest))?;
    match chosen {
        Some(text) => {
            let mut out = std::io::stdout().lock();
            out.write_all(&text)?;
            out.write_all(b"\n")?;
            Ok(ExitCode::SUCCESS)
        }
        // Nothing chosen: the binding leaves the prompt line as it was.
        None => Ok(ExitCode::from(1)),
    }
}

fn print_first_screen(app: &mut App, store: &Store) -> Result<ExitCode> {
    let mut term = Terminal::new(ratatui::backend::TestBackend::new(160, 40))?;
    load_files(app, store);
    term.draw(|f| view::draw(f, app))?;
    let buffer = term.backend().buffer();
    let mut out = std::io::stdout().lock();
    for y in 0..buffer.area.height {
        let line: String = (0..buffer.area.width).map(|x| buffer[(x, y)].symbol()).collect();
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(ExitCode::SUCCESS)
}

type Term = Terminal<CrosstermBackend<std::io::Stderr>>;

/// Runs `f` on the alternate screen in raw mode, and puts the terminal back
/// however `f` ends (a panic included: the user's shell must stay usable).
fn with_terminal<T>(f: impl FnOnce(&mut Term) -> Result<T>) -> Result<T> {
    terminal::enable_raw_mode().context("cannot use the terminal (prov browse needs one)")?;
    let restore = || {
        let _ = terminal::disable_raw_mode();
        let _ = execute!(std::io::stderr(), terminal::LeaveAlternateScreen, ratatui::crossterm::cursor::Show);
    };
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = terminal::disable_raw_mode();
        let _ = execute!(std::io::stderr(), terminal::LeaveAlternateScreen, ratatui::crossterm::cursor::Show);
        hook(info);
    }));
    let result = execute!(std::io::stderr(), terminal::EnterAlternateScreen)
        .map_err(anyhow::Error::from)
        .and_then(|_| Terminal::new(CrosstermBackend::new(std::io::stderr())).map_err(anyhow::Error::from))
        .and_then(|mut term| f(&mut term));
    restore();
    result
}

/// The event loop; the chosen command's text, or None when the user quit.
fn run(
    term: &mut Term,
    app: &mut App,
    store: &Store,
    rest: &mpsc::Receiver<prov_store::Result<Vec<Entry>>>,
) -> Result<Option<Vec<u8>>> {
    loop {
        load_files(app, store);
        term.draw(|f| view::draw(f, app))?;
        if !app.complete {
            if let Ok(all) = rest.try_recv() {
                app.journal = all?;
                app.complete = true;
                app.refilter();
                continue;
            }
        }
        let wait = if app.complete { Duration::from_secs(3600) } else { Duration::from_millis(50) };
        if !event::poll(wait)? {
            continue;
        }
        match event::read()? {
            Event::Key(key) if key.kind != KeyEventKind::Release => {
                if let Some(done) = on_key(app, store, key)? {
                    return Ok(done);
                }
            }
            _ => {}
        }
    }
}

/// The selected command's files, read when the selection changed.
fn load_files(app: &mut App, store: &Store) {
    let Some(id) = app.current().map(|e| e.row.id) else { return };
    if app.files.as_ref().is_some_and(|f| f.0 == id) {
        return;
    }
    let mut files = store.files_of_limited(id, FILES_SHOWN).unwrap_or_default();
    // Reads first, then writes, each by path.
    files.sort_by(|a, b| ((a.access == Access::Write), &a.path).cmp(&((b.access == Access::Write), &b.path)));
    let total = store.file_count(id).unwrap_or(files.len() as u64);
    app.files = Some((id, files, total));
    app.file_selected = 0;
}

/// One key; Some(result) ends the browser.
fn on_key(app: &mut App, store: &Store, key: KeyEvent) -> Result<Option<Option<Vec<u8>>>> {
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    if app.popup.is_some() {
        match key.code {
            KeyCode::Down | KeyCode::PageDown => app.popup_scroll = app.popup_scroll.saturating_add(10),
            KeyCode::Up | KeyCode::PageUp => app.popup_scroll = app.popup_scroll.saturating_sub(10),
            _ => {
                app.back();
            }
        }
        return Ok(None);
    }
    match key.code {
        KeyCode::Char('c') if ctrl => return Ok(Some(None)),
        KeyCode::Esc if !app.back() => return Ok(Some(None)),
        KeyCode::Enter if app.focus == Focus::Commands => {
            return Ok(app.current().map(|e| Some(e.row.text.clone())));
        }
        KeyCode::Tab | KeyCode::BackTab => {
            app.focus = match app.focus {
                Focus::Commands if app.files.as_ref().is_some_and(|f| !f.1.is_empty()) => Focus::Files,
                _ => Focus::Commands,
            };
        }
        KeyCode::Up => app.move_selection(-1),
        KeyCode::Down => app.move_selection(1),
        KeyCode::PageUp => app.move_selection(-20),
        KeyCode::PageDown => app.move_selection(20),
        KeyCode::Char('f') if ctrl => app.toggle_failed(),
        KeyCode::Char('d') if ctrl => app.toggle_below(),
        KeyCode::Char('s') if ctrl => app.toggle_session(),
        KeyCode::Char('t') if ctrl => app.next_window(),
        KeyCode::Char('u') if ctrl => {
            app.query.clear();
            app.refilter();
        }
        KeyCode::Char(c) if app.focus == Focus::Files && !ctrl => file_key(app, store, c)?,
        KeyCode::Char(c) if !ctrl => {
            app.query.push(c);
            app.refilter();
        }
        KeyCode::Backspace => {
            app.query.pop();
            app.refilter();
        }
        _ => {}
    }
    Ok(None)
}

/// r: the commands that read the selected file version (at its path or
/// moved); w: those that wrote its path (this version, under an old name,
/// or an earlier version), never commands that only wrote the same content
/// elsewhere; l: the lineage of that version, as `prov query lineage` draws it.
fn file_key(app: &mut App, store: &Store, c: char) -> Result<()> {
    let Some(file) = app.current_file().cloned() else { return Ok(()) };
    let path = file.path.to_vec();
    match c {
        'r' | 'w' => {
            let version = Version::of_event(&file);
            let mut lookup = Lookup::new(store);
            let found = if c == 'r' {
                lookup.classify_readers(Some(&version), &path)?
            } else {
                lookup.writers_of_file(Some(&version), &path)?
            };
            let commands =
                found.into_iter().filter(|(_, events)| events[0].1 != MatchKind::Content).map(|(c, _)| c).collect();
            let source = if c == 'r' { Source::Readers(path) } else { Source::Writers(path) };
            app.show_related(source, commands);
        }
        'l' => {
            let text = crate::lineage::tree_of_version(store, &file, Glyphs::for_locale())?.unwrap_or_else(|| {
                format!("prov: no recorded command wrote {}\n", prov_model::escape::escape_text(&path))
            });
            app.popup = Some((format!("lineage of {}", prov_model::escape::escape_text(&path)), text));
            app.popup_scroll = 0;
        }
        _ => {}
    }
    Ok(())
}
