//! prov's lineage walk and its exports.
//!
//! [`lineage::walk`] follows a file's history through the store;
//! [`export`] writes any list of records (a query result or a lineage's
//! [`lineage::Lineage::records`]) in one of the exchange formats. The
//! lineage-only views (tree, lineage JSON, DOT) take a
//! [`lineage::Lineage`] directly.
#![deny(unsafe_code)]

pub mod dot;
pub mod environment;
mod error;
pub mod glyphs;
pub mod json;
pub mod lineage;
pub mod makefile;
pub mod plan;
pub mod process_lineage;
pub mod process_tree;
pub mod prov_json;
pub mod ro_crate;
pub mod shournal;
pub mod snakemake;
pub mod steps;
pub mod text;
pub mod tree;

use std::io::Write;
use std::path::Path;

use std::str::FromStr;

pub use error::{ExportError, Result};
use prov_store::{CommandRow, FileRow};

/// The exchange formats of a list of records. Each one's name and
/// description are in [`Format::name`] and [`Format::description`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    ShournalJson,
    ProvJson,
    RoCrate,
    Makefile,
    Snakemake,
    Dot,
}

impl Format {
    /// Every format, in the order they are listed to users.
    pub const ALL: [Format; 6] =
        [Format::ShournalJson, Format::ProvJson, Format::RoCrate, Format::Makefile, Format::Snakemake, Format::Dot];

    /// The format's name, as users type it.
    pub const fn name(self) -> &'static str {
        match self {
            Format::ShournalJson => "shournal-json",
            Format::ProvJson => "prov-json",
            Format::RoCrate => "ro-crate",
            Format::Makefile => "makefile",
            Format::Snakemake => "snakemake",
            Format::Dot => "dot",
        }
    }

    /// One line for a list of formats.
    pub const fn description(self) -> &'static str {
        match self {
            Format::ShournalJson => "The predecessor's (shournal's) JSON lines, for its converters",
            Format::ProvJson => "W3C PROV-JSON",
            Format::RoCrate => "An RO-Crate (Process Run Crate profile) directory",
            Format::Makefile => "A GNU Makefile that re-runs the commands to rebuild their files",
            Format::Snakemake => "A Snakefile that re-runs the commands to rebuild their files",
            Format::Dot => "A Graphviz digraph of the commands and their files",
        }
    }

    /// Whether it describes each command's environment and programs
    /// ([`ExportOptions::environments`]).
    pub const fn shows_environments(self) -> bool {
        matches!(self, Format::RoCrate | Format::ProvJson)
    }

    /// Whether it writes a directory ([`Output::Directory`]) rather than a
    /// stream.
    pub const fn writes_directory(self) -> bool {
        matches!(self, Format::RoCrate)
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// No format has this name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown export format {0:?}")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(name: &str) -> std::result::Result<Self, Self::Err> {
        Format::ALL.into_iter().find(|f| f.name() == name).ok_or_else(|| UnknownFormat(name.to_string()))
    }
}

/// Where an export goes: a stream, or (RO-Crate) a directory.
pub enum Output<'a> {
    Stream(&'a mut dyn Write),
    Directory(&'a Path),
}

#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// The files a Makefile/Snakefile builds by default; `None`: the final
    /// products (files written and not read by a later command).
    pub targets: Option<Vec<Vec<u8>>>,
    /// The RO-Crate's name.
    pub title: Option<String>,
    /// Where archived scripts are kept (shournal-json's `pathToReadFiles`).
    pub read_files_dir: Option<String>,
    /// How the records are tied, when they come from a lineage
    /// ([`lineage::Lineage::plan_links`]): moves and in-place edits
    /// included. None: each read tied to the last earlier writer of its
    /// path, and `targets` to theirs.
    pub links: Option<Vec<plan::PlanLink>>,
    /// Each command's environment and programs, by command id (RO-Crate and
    /// PROV-JSON show them; may be empty).
    pub environments: std::collections::BTreeMap<i64, prov_store::CommandEnvironment>,
}

/// Writes `records` (commands with all their files, oldest first) as
/// `format` to `out`: every format but [`Format::RoCrate`] to a
/// [`Output::Stream`], RO-Crate to an [`Output::Directory`] (created if
/// missing; an existing crate there is an error, nothing is overwritten).
/// Returns why a Makefile or Snakefile cannot rebuild faithfully, one line
/// each ([`plan::Plan::refused`]; the file says it too); empty otherwise.
pub fn export(
    format: Format,
    records: &[(CommandRow, Vec<FileRow>)],
    opts: &ExportOptions,
    out: Output<'_>,
) -> Result<Vec<String>> {
    let links = || opts.links.clone().unwrap_or_else(|| plan::path_links(records, opts.targets.as_deref()));
    match (format, out) {
        (Format::RoCrate, Output::Directory(dir)) => {
            let title = opts.title.clone().unwrap_or_else(|| "prov: recorded commands".into());
            ro_crate::write_ro_crate(records, &links(), &opts.environments, &title, dir).map(|()| Vec::new())
        }
        (Format::RoCrate, Output::Stream(_)) => Err(ExportError::NeedsDirectory(format)),
        (_, Output::Directory(dir)) => Err(ExportError::NeedsStream(dir.to_path_buf())),
        (Format::ShournalJson, Output::Stream(w)) => {
            shournal::write_shournal(records, opts.read_files_dir.as_deref(), w).map(|()| Vec::new())
        }
        (Format::ProvJson, Output::Stream(w)) => {
            prov_json::write_prov_json(records, &links(), &opts.environments, w).map(|()| Vec::new())
        }
        (Format::Makefile, Output::Stream(w)) => makefile::write_makefile(records, &links(), w),
        (Format::Snakemake, Output::Stream(w)) => snakemake::write_snakemake(records, &links(), w),
        (Format::Dot, Output::Stream(w)) => dot::write_records_dot(records, w).map(|()| Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_parses_from_its_name() {
        for format in Format::ALL {
            assert_eq!(format.name().parse::<Format>(), Ok(format));
        }
        assert_eq!("tree".parse::<Format>(), Err(UnknownFormat("tree".into())));
    }
}
