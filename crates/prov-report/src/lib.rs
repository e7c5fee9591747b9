//! `prov report`: one self-contained HTML file (CSS, JavaScript and data
//! embedded, no network request) with a zoomable timeline of the commands
//! (one lane per session), their details on click, a searchable command list
//! and charts of the busiest commands, sessions and directories; a file's
//! path leads to the command that wrote it and to its lineage.
//!
//! The page is fixed text plus one JSON document (see [`model`]); every
//! recorded string reaches the page only through that JSON, escaped by
//! [`embed`], and the script shows it with `textContent`, never as markup.
#![deny(unsafe_code)]

mod embed;
pub mod model;
mod stats;

use std::collections::BTreeMap;
use std::io::{self, Write};

use prov_store::{CommandRow, FileRow};

/// A script the archive kept for a command (a file it read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivedScript {
    pub path: Vec<u8>,
    pub text: String,
}

/// What a report shows.
#[derive(Debug, Clone, Default)]
pub struct ReportInput {
    /// Shown as the page's heading and title.
    pub title: String,
    /// One line under the heading: what was selected, from where.
    pub description: String,
    /// When the report was made (nanoseconds since the epoch).
    pub generated_ns: i64,
    /// The commands, oldest first, each with all of its file events.
    pub records: Vec<(CommandRow, Vec<FileRow>)>,
    /// Archived scripts by command id (may be empty).
    pub archived: BTreeMap<i64, Vec<ArchivedScript>>,
    /// Files written (and read) listed per command; None: the default
    /// [`model::FILES_PER_ACCESS`].
    pub files_per_access: Option<usize>,
    /// Each command's process tree, by command id (may be empty): one line
    /// per process, in tree order, with its depth.
    pub processes: BTreeMap<i64, Vec<ProcessLine>>,
    /// Count prov's own work (`CommandRow::is_prov_own_work`) in the
    /// charts; it is listed either way.
    pub include_prov: bool,
    /// The command that wrote what a file event read, by read event id
    /// (may be empty): the report links the path to it.
    pub writers: BTreeMap<i64, i64>,
    /// The lineage of the version a file event read or wrote, as
    /// `prov query lineage` draws it, by event id (may be empty).
    pub lineages: BTreeMap<i64, String>,
    /// Each command's environment and the programs it ran, by command id
    /// (may be empty).
    pub environments: BTreeMap<i64, CommandEnvironment>,
}

pub use prov_store::CommandEnvironment;

/// A process of a command's tree as the report lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessLine {
    /// 0 for the command's first processes.
    pub depth: usize,
    /// Its arguments, or its executable and why they are unknown.
    pub label: String,
    pub pid: u32,
    /// How many files it wrote.
    pub writes: usize,
}

/// An environment as the report's lines: `NAME=VALUE`, then the git state.
fn environment_lines(env: &prov_model::env::Environment) -> Vec<String> {
    let mut lines: Vec<String> =
        env.pairs().iter().map(|(name, value)| model::lossy(&[name, &b"="[..], value].concat())).collect();
    if let Some(git) = &env.git {
        lines.push(format!("git: {}", git.summary()));
    }
    lines
}

/// A program as the report lists it: executable, size, partial hash.
fn executable_line(e: &prov_store::Executable) -> String {
    let path = if e.path.is_empty() { "(not shown)".to_string() } else { model::lossy(&e.path) };
    match &e.file {
        Some(f) => {
            let hash = f.hash.map_or("unreadable".to_string(), |h| format!("{h:016x}"));
            format!("{path}  {} bytes  hash {hash}", f.size)
        }
        None => path,
    }
}

const CSS: &str = include_str!("../assets/report.css");
const BODY: &str = include_str!("../assets/body.html");
const JS: &str = include_str!("../assets/report.js");

/// The page may load nothing: a report opened from a mail or an archive
/// must not phone home, and the policy makes the browser enforce that.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:";

/// Writes the report page.
pub fn write_report(input: &ReportInput, out: &mut dyn Write) -> io::Result<()> {
    let data = model::build(input);
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
         <meta name=\"generator\" content=\"prov {}\">\n\
         <title>prov report</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n{BODY}",
        env!("CARGO_PKG_VERSION")
    )?;
    out.write_all(b"<script type=\"application/json\" id=\"prov-data\">")?;
    embed::write_script_json(&data, out)?;
    write!(out, "</script>\n<script>\n{JS}</script>\n</body>\n</html>\n")
}

#[cfg(test)]
mod tests;
