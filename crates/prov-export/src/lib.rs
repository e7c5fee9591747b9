//! prov's lineage walk and its exports.
//!
//! [`lineage::walk`] follows a file's history through the store;
//! [`export`] writes any list of records (a query result or a lineage's
//! [`lineage::Lineage::records`]) in one of the exchange formats. The
//! lineage-only views (tree, lineage JSON, DOT) take a
//! [`lineage::Lineage`] directly.
#![deny(unsafe_code)]

pub mod dot;
pub mod json;
pub mod lineage;
pub mod makefile;
mod plan;
pub mod prov_json;
pub mod ro_crate;
pub mod shournal;
pub mod snakemake;
pub mod text;
pub mod tree;

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Result};
use prov_store::{CommandRow, FileRow};

/// The exchange formats of a list of records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The predecessor's (shournal's) JSON lines, for its converters.
    ShournalJson,
    /// W3C PROV-JSON.
    ProvJson,
    /// An RO-Crate (Process Run Crate profile) directory; needs --output DIR.
    RoCrate,
    /// A GNU Makefile that re-runs the commands to rebuild their files.
    Makefile,
    /// A Snakefile that re-runs the commands to rebuild their files.
    Snakemake,
    /// A Graphviz digraph of the commands and their files.
    Dot,
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
}

/// Writes `records` (commands with all their files, oldest first) as
/// `format` to `out`: every format but [`Format::RoCrate`] to a
/// [`Output::Stream`], RO-Crate to an [`Output::Directory`] (created if
/// missing; an existing crate there is an error, nothing is overwritten).
pub fn export(
    format: Format,
    records: &[(CommandRow, Vec<FileRow>)],
    opts: &ExportOptions,
    out: Output<'_>,
) -> Result<()> {
    let targets = opts.targets.as_deref();
    match (format, out) {
        (Format::RoCrate, Output::Directory(dir)) => {
            let title = opts.title.clone().unwrap_or_else(|| "prov: recorded commands".into());
            ro_crate::write_ro_crate(records, &title, dir)
        }
        (Format::RoCrate, Output::Stream(_)) => bail!("--format ro-crate writes a directory: give --output DIR"),
        (_, Output::Directory(dir)) => bail!("{} is a directory; this format writes a file", dir.display()),
        (Format::ShournalJson, Output::Stream(w)) => {
            shournal::write_shournal(records, opts.read_files_dir.as_deref(), w)
        }
        (Format::ProvJson, Output::Stream(w)) => prov_json::write_prov_json(records, w),
        (Format::Makefile, Output::Stream(w)) => makefile::write_makefile(records, targets, w),
        (Format::Snakemake, Output::Stream(w)) => snakemake::write_snakemake(records, targets, w),
        (Format::Dot, Output::Stream(w)) => dot::write_records_dot(records, w),
    }
}
