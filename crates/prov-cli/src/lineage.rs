//! `prov query lineage FILE`: where a file came from (or, `--downstream`,
//! what was made from it), as a tree, JSON, DOT or one of the exports.

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, ValueEnum};
use prov_export::lineage::{self, Direction, Target};
use prov_export::{ExportOptions, Format, Output};
use prov_model::escape::escape;
use prov_model::hash::hash_path;

use crate::query::{absolute, open_store, output_stream};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LineageFormat {
    /// An indented tree for people.
    Tree,
    /// One JSON document: commands, files and the links between them.
    Json,
    /// A Graphviz digraph (`dot -Tsvg`).
    Dot,
    /// W3C PROV-JSON.
    ProvJson,
    /// An RO-Crate directory (Process Run Crate profile); needs --output DIR.
    RoCrate,
    /// A GNU Makefile that rebuilds FILE by re-running its commands.
    Makefile,
    /// A Snakefile that rebuilds FILE by re-running its commands.
    Snakemake,
    /// The predecessor's (shournal's) JSON lines.
    ShournalJson,
}

#[derive(Args, Debug, Clone)]
pub struct LineageArgs {
    /// Follow the file forward instead: the commands that read it, the files
    /// they wrote, and so on.
    #[arg(long)]
    pub downstream: bool,
    /// Follow at most N commands deep (1: only the commands that touched FILE).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub depth: Option<u64>,
    #[arg(long, value_enum, default_value = "tree")]
    pub format: LineageFormat,
    /// Write to PATH (a new file; a directory for ro-crate) instead of
    /// standard output. An existing file is never overwritten.
    #[arg(short = 'o', long, value_name = "PATH")]
    pub output: Option<PathBuf>,
}

pub fn lineage(file: &OsStr, args: LineageArgs) -> Result<ExitCode> {
    if args.format == LineageFormat::RoCrate && args.output.is_none() {
        anyhow::bail!("--format ro-crate writes a directory: give --output DIR");
    }
    let path = absolute(Path::new(file))?;
    let Some(store) = open_store()? else {
        eprintln!("prov: no records yet");
        return Ok(ExitCode::from(1));
    };
    let mut content = Vec::new();
    if path.is_file() {
        for params in store.hash_params_in_use()? {
            if let Ok((hash, size)) = hash_path(&path, params) {
                content.push((hash, size, params));
            }
        }
    }
    let direction = if args.downstream { Direction::Downstream } else { Direction::Upstream };
    let target = Target { path: path.as_os_str().as_bytes().to_vec(), content };
    let depth = args.depth.map(|d| usize::try_from(d).unwrap_or(usize::MAX));
    let walked = lineage::walk(&store, target, direction, depth)?;
    if walked.start.is_empty() {
        let verb = if args.downstream { "read" } else { "wrote" };
        eprintln!("prov: no recorded command {verb} {}", escape(path.as_os_str().as_bytes()));
        return Ok(ExitCode::from(1));
    }

    let records = walked.records();
    let opts = ExportOptions {
        // Upstream, a rebuild is for the file, under the name it was
        // written as (it may have been renamed since); downstream, for
        // everything made from it.
        targets: (!args.downstream)
            .then(|| walked.start.iter().filter_map(|&(c, f)| walked.file(c, f)).map(|f| f.path.clone()).collect()),
        title: Some(format!("prov: {} of {}", direction.as_str(), path.display())),
        read_files_dir: None,
    };
    let export = |format: Format, out: Output<'_>| prov_export::export(format, &records, &opts, out);
    if args.format == LineageFormat::RoCrate {
        let dir = args.output.as_deref().unwrap_or(Path::new("."));
        export(Format::RoCrate, Output::Directory(dir))?;
        return Ok(ExitCode::SUCCESS);
    }

    let mut out = output_stream(args.output.as_deref())?;
    match args.format {
        LineageFormat::Tree => prov_export::tree::write_tree(&walked, &mut out)?,
        LineageFormat::Json => prov_export::json::write_lineage(&walked, &mut out)?,
        LineageFormat::Dot => prov_export::dot::write_dot(&walked, &mut out)?,
        LineageFormat::ProvJson => export(Format::ProvJson, Output::Stream(&mut out))?,
        LineageFormat::Makefile => export(Format::Makefile, Output::Stream(&mut out))?,
        LineageFormat::Snakemake => export(Format::Snakemake, Output::Stream(&mut out))?,
        LineageFormat::ShournalJson => export(Format::ShournalJson, Output::Stream(&mut out))?,
        LineageFormat::RoCrate => unreachable!("handled above"),
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
