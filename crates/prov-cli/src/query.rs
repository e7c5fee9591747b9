//! `prov query …`.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use prov_export::glyphs::Glyphs;
use prov_export::lineage::{Direction, Lookup, MatchKind, Matched, Target, WalkOptions};
use prov_model::config::QueryConfig;
use prov_model::escape::escape;
use prov_model::Access;
use prov_store::{FileRow, Reader, Selected};

use crate::file_args::absolute;
use crate::filters::FilterArgs;
use crate::journal::{self, Reach};
use crate::output;
use crate::setup::UserSetup;
use crate::stat::{self, FileNow};
use crate::terminal::{ColorChoice, Pager, Paint};

/// Commands with more files than this list only a part of them (and the
/// count) unless --all-files is given.
const FILE_LIST_LIMIT: u64 = 1000;

/// The journal `reach` names, and the configured defaults of queries.
fn open_store_and_config(reach: Reach) -> Result<(Option<Reader>, QueryConfig)> {
    let setup = UserSetup::load_for_reading()?;
    Ok((journal::open(&setup, reach)?, setup.config.query))
}

/// How results are shown.
#[derive(Clone, Debug, Default)]
pub struct Show {
    pub json: bool,
    /// List each command's files (wrote/read and file filters always do).
    pub files: bool,
    pub all_files: bool,
    /// Check each listed file against the file system now.
    pub stat: bool,
    /// Files listed per command in human output.
    pub files_shown: usize,
    /// Export the result in this format, to this file or directory (None:
    /// standard output).
    pub export: Option<(prov_export::Format, Option<PathBuf>)>,
    pub color: ColorChoice,
    /// Page long output on a terminal.
    pub pager: bool,
    /// File queries: also prov's own work.
    pub include_prov: bool,
}

/// What a query that found nothing says (on standard error), with exit
/// status 1, as grep does: scripts can tell an empty answer from an error.
pub(crate) fn no_match() -> ExitCode {
    eprintln!("prov: no command matched");
    ExitCode::from(1)
}

/// Commands that wrote (read) FILE, each with how it matched (see
/// [`MatchKind`]): the file's own writer (readers) first, then earlier
/// versions of its path, then identical content elsewhere, each group
/// newest first and under its own heading. Exit status 1 when no recorded
/// command wrote (read) the file itself.
pub fn by_file(
    access: Access,
    file: &OsStr,
    filters: &FilterArgs,
    limit: Option<usize>,
    show: &Show,
    reach: Reach,
) -> Result<ExitCode> {
    let path = absolute(Path::new(file))?;
    let (store, config) = open_store_and_config(reach)?;
    let show = &Show { files_shown: config.files_shown.0 as usize, ..show.clone() };
    let Some(store) = store else {
        eprintln!("prov: no records yet");
        return Ok(ExitCode::from(1));
    };
    let target = Target::on_disk(&store, path.as_os_str().as_bytes())?;
    let mut lookup =
        Lookup::with_options(&store, &WalkOptions { include_own: show.include_prov, ..Default::default() });
    let mut found = match access {
        Access::Write => lookup.writers_of_file(target.now.as_ref(), &target.path)?,
        Access::Read => lookup.classify_readers(target.now.as_ref(), &target.path)?,
    };
    if !filters.is_empty() {
        let mut selection = filters.selection(None);
        selection.command.ids = Some(found.iter().map(|(c, _)| c.id).collect());
        selection.events_per_command = Some(1);
        let keep: HashSet<i64> = store.select(&selection)?.into_iter().map(|(c, _)| c.id).collect();
        found.retain(|(c, _)| keep.contains(&c.id));
    }
    if let Some(n) = limit {
        found.truncate(n);
    }
    let kind_of = |(_, events): &Matched| events[0].1;
    let answered = found.first().is_some_and(|m| kind_of(m).is_same_file());
    let verb = if access == Access::Write { "wrote" } else { "read" };
    if !answered {
        // Said first, before any content twins are listed.
        eprintln!("prov: no recorded command {verb} {}", escape(path.as_os_str().as_bytes()));
    }
    // Exports carry the file's own writers (readers) only.
    if show.export.is_some() {
        found.retain(|m| kind_of(m).is_same_file());
    }
    // With --stat, a last line on the file asked about, from its writer
    // (first reader) and its event of that file.
    let summary = match found.first() {
        Some((command, matched)) if answered && show.stat && !show.json => {
            let mut lines = stat::target_summary(&path, &matched[0].0, command.id, verb);
            // A file written: whether what it was made from changed since.
            if access == Access::Write {
                let opts = WalkOptions { include_own: show.include_prov, ..Default::default() };
                let walked = prov_export::lineage::walk_with(&store, target.clone(), Direction::Upstream, &opts)?;
                lines = format!("{lines}\n{}", stat::staleness(&walked));
            }
            Some(lines)
        }
        // Changed since its last recorded write: say so, from that write.
        Some((command, matched)) if show.stat && !show.json && matched[0].1 == MatchKind::Earlier => {
            Some(stat::target_summary(&path, &matched[0].0, command.id, verb))
        }
        _ => None,
    };
    let selected: Vec<Selected> =
        found.iter().map(|(c, events)| (c.clone(), events.iter().map(|(f, _)| f.clone()).collect())).collect();
    let how: Vec<Vec<(i64, MatchKind)>> =
        found.iter().map(|(_, events)| events.iter().map(|(f, k)| (f.id, *k)).collect()).collect();
    let matches = Matches { access, path: path.as_os_str().as_bytes(), how: &how, gone: target.now.is_none() };
    print_with(&store, &selected, &Show { files: true, ..show.clone() }, summary.as_deref(), Some(&matches))?;
    Ok(if answered { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// How the commands of a file query matched the file asked about: for
/// each command listed, its matched events and their kinds, strongest first.
struct Matches<'a> {
    access: Access,
    path: &'a [u8],
    how: &'a [Vec<(i64, MatchKind)>],
    /// The file is not on disk now: its last recorded write is its writer.
    gone: bool,
}

impl Matches<'_> {
    /// One line on how the `i`th command matched: "wrote this file", "wrote
    /// it as OLD (moved since)", ….
    fn line(&self, i: usize, files: &[FileRow], here: Option<&[u8]>) -> String {
        let (event, kind) = self.how[i][0];
        let other =
            files.iter().find(|f| f.id == event).map_or(String::from("?"), |f| output::shown_path(&f.path, here));
        let verb = if self.access == Access::Write { "wrote" } else { "read" };
        match kind {
            MatchKind::Path if self.gone && self.access == Access::Write => {
                "wrote this file last (it is gone now: its content is not compared)".to_string()
            }
            MatchKind::Path if self.gone => {
                "read this path (the file is gone now: its content is not compared)".to_string()
            }
            MatchKind::Path => format!("{verb} this file"),
            MatchKind::Moved => format!("{verb} it as {other} (moved since)"),
            MatchKind::Earlier => format!("{verb} an earlier version of this path"),
            MatchKind::Content if self.access == Access::Write => format!("wrote identical content to {other}"),
            MatchKind::Content => format!("read identical content as {other}"),
        }
    }

    /// The heading before the first command of a weaker kind.
    fn heading(&self, i: usize, here: Option<&[u8]>) -> Option<String> {
        let kind = self.how[i][0].1;
        let previous = i.checked_sub(1).map(|p| self.how[p][0].1);
        if previous == Some(kind) || kind.is_same_file() {
            return None;
        }
        let path = output::shown_path(self.path, here);
        Some(match kind {
            MatchKind::Earlier => format!("Earlier versions of {path}:"),
            _ => "Identical content elsewhere (a copy or a coincidence, not this file's history):".to_string(),
        })
    }
}

/// The most recent commands passing the filters, newest first.
pub fn history(filters: &FilterArgs, limit: Option<usize>, show: &Show, reach: Reach) -> Result<ExitCode> {
    let (store, config) = open_store_and_config(reach)?;
    let show = &Show { files_shown: config.files_shown.0 as usize, ..show.clone() };
    let Some(store) = store else {
        eprintln!("prov: no records yet");
        return Ok(ExitCode::from(1));
    };
    let mut selection = filters.selection(Some(limit.unwrap_or(config.limit.0 as usize)));
    selection.events_per_command = (!show.all_files).then_some(FILE_LIST_LIMIT as usize);
    let found = store.select(&selection)?;
    if found.is_empty() {
        return Ok(no_match());
    }
    let show = Show { files: show.files || !selection.file.is_empty(), ..show.clone() };
    print(&store, &found, &show)?;
    Ok(ExitCode::SUCCESS)
}

/// Without an id: the sessions, newest first. With one (or a unique
/// prefix): its commands in the order they ran.
pub fn session(
    id: Option<&str>,
    filters: &FilterArgs,
    limit: Option<usize>,
    show: &Show,
    reach: Reach,
) -> Result<ExitCode> {
    let (store, config) = open_store_and_config(reach)?;
    let show = &Show { files_shown: config.files_shown.0 as usize, ..show.clone() };
    let Some(store) = store else {
        eprintln!("prov: no records yet");
        return Ok(ExitCode::from(1));
    };
    let selection = filters.selection(None);
    let Some(id) = id else {
        let sessions = store.sessions(&selection.command, Some(limit.unwrap_or(config.limit.0 as usize)))?;
        if sessions.is_empty() {
            return Ok(no_match());
        }
        let mut out = Pager::start(show.pager && !show.json);
        for s in &sessions {
            if show.json {
                output::write_json(&mut out, &output::session_json(s))?;
            } else {
                output::write_session(&mut out, s)?;
            }
        }
        out.finish()?;
        return Ok(ExitCode::SUCCESS);
    };
    let prefix = prov_store::CommandFilter { session: Some(id.to_owned()), ..Default::default() };
    let matching = store.sessions(&prefix, None)?;
    let session = match matching.as_slice() {
        [] => {
            eprintln!("prov: no session \"{}\" recorded", escape(id.as_bytes()));
            return Ok(ExitCode::from(1));
        }
        [one] => one.session.clone(),
        many => anyhow::bail!(
            "session \"{}\" is ambiguous: it could be {}",
            escape(id.as_bytes()),
            many.iter().map(|s| escape(s.session.as_bytes())).collect::<Vec<_>>().join(", ")
        ),
    };
    let mut selection = selection;
    selection.command.session = Some(session);
    selection.events_per_command = (!show.all_files).then_some(FILE_LIST_LIMIT as usize);
    let mut found = store.select(&selection)?;
    found.reverse();
    if let Some(n) = limit {
        found.truncate(n);
    }
    if found.is_empty() {
        return Ok(no_match());
    }
    let show = Show { files: show.files || !selection.file.is_empty(), ..show.clone() };
    print(&store, &found, &show)?;
    Ok(ExitCode::SUCCESS)
}

/// Prints commands as `show` says, each with its files when asked for:
/// the matched ones marked, and for commands with very many files only the
/// matched ones and some others unless `all_files`.
fn print(store: &Reader, found: &[Selected], show: &Show) -> Result<()> {
    print_then(store, found, show, None)
}

/// `print`, and a last line after the commands (human output only).
fn print_then(store: &Reader, found: &[Selected], show: &Show, last: Option<&str>) -> Result<()> {
    print_with(store, found, show, last, None)
}

/// `print_then`, with how each command matched a file asked about.
fn print_with(
    store: &Reader,
    found: &[Selected],
    show: &Show,
    last: Option<&str>,
    matches: Option<&Matches<'_>>,
) -> Result<()> {
    if let Some((format, output)) = &show.export {
        return export(store, found, *format, output.as_deref());
    }
    let mut out = Pager::start(show.pager && !show.json);
    let paint = Paint { on: !show.json && show.color.enabled(), glyphs: Glyphs::for_locale() };
    let home = output::home();
    let here = output::current_dir();
    for (i, (command, matched)) in found.iter().enumerate() {
        let listed =
            if show.files || show.stat { Some(files_shown(store, command.id, matched, show.all_files)?) } else { None };
        let now: Vec<FileNow> = match (&listed, show.stat) {
            (Some((files, _)), true) => files.iter().map(stat::file_now).collect(),
            _ => Vec::new(),
        };
        let matched_ids: Vec<i64> = matched.iter().map(|f| f.id).collect();
        // Read files whose content the archive kept (`prov restore ID`).
        let archived: HashSet<output::FileVersion> = match &listed {
            Some(_) => store.archived_of(command.id)?.into_iter().map(|a| (a.path, a.size, a.mtime_ns)).collect(),
            None => HashSet::new(),
        };
        let how = matches.map_or(&[][..], |m| &m.how[i][..]);
        let listing = listed.as_ref().map(|(files, total)| output::Listing {
            files,
            matched: &matched_ids,
            how,
            total: *total,
            now: &now,
            archived: &archived,
        });
        if show.json {
            let mut json = output::command_json(command, listing);
            if let (Some(&(_, kind)), Some(o)) = (how.first(), json.as_object_mut()) {
                o.insert("match".into(), kind.as_str().into());
            }
            output::write_json(&mut out, &json)?;
        } else {
            if let Some(heading) = matches.and_then(|m| m.heading(i, here.as_deref())) {
                writeln!(out, "{heading}")?;
            }
            let how = matches.map(|m| m.line(i, matched, here.as_deref()));
            output::write_command(
                &mut out,
                command,
                how.as_deref(),
                listing,
                show.files_shown,
                paint,
                home.as_deref(),
                here.as_deref(),
            )?;
        }
    }
    if let Some(line) = last {
        writeln!(out, "{line}")?;
    }
    out.finish()?;
    Ok(())
}

/// Exports the commands found, oldest first, each with all its files.
fn export(store: &Reader, found: &[Selected], format: prov_export::Format, output: Option<&Path>) -> Result<()> {
    let mut records = Vec::with_capacity(found.len());
    for (command, _) in found.iter().rev() {
        records.push((command.clone(), store.files_of(command.id)?));
    }
    // The file names what it cannot rebuild faithfully (its comments).
    crate::export::write(store, format, &records, &prov_export::ExportOptions::default(), output)?;
    Ok(())
}

/// A command's files to list, and how many it has in all.
fn files_shown(store: &Reader, id: i64, matched: &[FileRow], all: bool) -> Result<(Vec<FileRow>, u64)> {
    let total = store.file_count(id)?;
    if all || total <= FILE_LIST_LIMIT {
        return Ok((store.files_of(id)?, total));
    }
    // A tree copy has 100 000 files: the answer shows the matched ones
    // first, some of the others, and the count.
    let matched_ids: HashSet<i64> = matched.iter().map(|f| f.id).collect();
    let mut files = matched.to_vec();
    files.extend(
        store.files_of_limited(id, FILE_LIST_LIMIT as usize)?.into_iter().filter(|f| !matched_ids.contains(&f.id)),
    );
    files.truncate(FILE_LIST_LIMIT as usize);
    Ok((files, total))
}
