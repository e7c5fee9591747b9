//! `prov query lineage FILE`: where a file came from (or, `--downstream`,
//! what was made from it), as a tree, JSON, DOT or one of the exports.

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::LazyLock;

use anyhow::Result;
use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};
use prov_export::lineage::{self, Direction, Target, WalkOptions};
use prov_export::{ExportOptions, Format};
use prov_model::escape::escape;

use crate::export;
use crate::file_args::{absolute, output_stream};
use crate::journal::{self, Reach};
use crate::stat;
use crate::terminal::Pager;
use prov_export::glyphs::Glyphs;
use prov_export::tree::TreeOptions;

/// `--format` of `prov query lineage`: the lineage's own views, or an
/// export of its commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineageFormat {
    Tree,
    Json,
    /// The lineage's own digraph: it marks FILE, unlike the export's.
    Dot,
    Export(Format),
}

impl ValueEnum for LineageFormat {
    /// The views, then every export but the records' DOT (the lineage's
    /// own replaces it).
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: LazyLock<Vec<LineageFormat>> = LazyLock::new(|| {
            let exports = Format::ALL.into_iter().filter(|&f| f != Format::Dot).map(LineageFormat::Export);
            [LineageFormat::Tree, LineageFormat::Json, LineageFormat::Dot].into_iter().chain(exports).collect()
        });
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            LineageFormat::Tree => PossibleValue::new("tree").help("An indented tree for people"),
            LineageFormat::Json => {
                PossibleValue::new("json").help("One JSON document: commands, files and the links between them")
            }
            LineageFormat::Dot => PossibleValue::new("dot").help("A Graphviz digraph (`dot -Tsvg`)"),
            LineageFormat::Export(format) => export::possible_value(*format),
        })
    }
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
    /// How to show the lineage.
    #[arg(long, value_enum, default_value = "tree")]
    pub format: LineageFormat,
    /// In the tree, list every file; by default more than 3 files of a
    /// command that lead to the same commands are one line (a count and
    /// the first names).
    #[arg(long)]
    pub all_files: bool,
    /// In the tree, each file's state now: up to date, modified (and what
    /// differs) or missing; then whether FILE itself is as recorded.
    #[arg(long)]
    pub stat: bool,
    /// Write the tree straight to the terminal instead of through $PAGER
    /// (default `less -FRX`; a pager is used only on a terminal).
    #[arg(long)]
    pub no_pager: bool,
    /// Write to PATH (a new file; a directory for ro-crate) instead of
    /// standard output. An existing file is never overwritten.
    #[arg(short = 'o', long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Follow the lineage through processes (tree only, upstream): the
    /// process that wrote FILE (`python summarize.py …` inside `make all`),
    /// the files it read and the process that wrote each, in the same
    /// command or an earlier one.
    #[arg(long, conflicts_with = "downstream")]
    pub processes: bool,
    /// What one step of an export is: a command (default), or, with
    /// `processes`, each process a command ran (make's recipes, a script's
    /// tools) with its recorded arguments and directory, where known.
    #[arg(long, value_enum, value_name = "STEP", default_value = "commands")]
    pub steps: Steps,
    /// Also follow identical content at other paths: a copy, or a
    /// coincidence. Such links are labelled in the tree and dashed in DOT;
    /// exports include them only with this flag.
    #[arg(long)]
    pub by_content: bool,
    /// Also prov's own work (`prov query`, `prov report`, …): its reads are
    /// left out of lineage by default.
    #[arg(long)]
    pub include_prov: bool,
}

/// `--steps` of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Steps {
    Commands,
    Processes,
}

pub fn lineage(file: &OsStr, args: LineageArgs, reach: Reach) -> Result<ExitCode> {
    // Before the walk: a usage error needs no records.
    if let LineageFormat::Export(format) = args.format {
        export::require_output(format, args.output.as_deref())?;
    }
    let path = absolute(Path::new(file))?;
    let Some(store) = journal::open_for(reach)? else {
        eprintln!("prov: no records yet");
        return Ok(ExitCode::from(1));
    };
    let direction = if args.downstream { Direction::Downstream } else { Direction::Upstream };
    let target = Target::on_disk(&store, path.as_os_str().as_bytes())?;
    let depth = args.depth.map(|d| usize::try_from(d).unwrap_or(usize::MAX));
    let walk_options = WalkOptions { max_depth: depth, by_content: args.by_content, include_own: args.include_prov };
    if args.processes {
        if args.format != LineageFormat::Tree {
            anyhow::bail!("--processes shows the lineage as a tree only (--format tree)");
        }
        let walked = prov_export::process_lineage::walk_processes(&store, target, &walk_options)?;
        if walked.start.is_none() {
            eprintln!("prov: no recorded command wrote {}", escape(path.as_os_str().as_bytes()));
            return Ok(ExitCode::from(1));
        }
        let mut out: Box<dyn Write> = match args.output.as_deref() {
            Some(_) => output_stream(args.output.as_deref())?,
            None => Box::new(Pager::start(!args.no_pager)),
        };
        prov_export::process_lineage::write_tree(&walked, args.all_files, &Glyphs::for_locale(), &mut out)?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let walked = lineage::walk_with(&store, target, direction, &walk_options)?;
    if walked.start.is_empty() {
        let verb = if args.downstream { "read" } else { "wrote" };
        eprintln!("prov: no recorded command {verb} {}", escape(path.as_os_str().as_bytes()));
        return Ok(ExitCode::from(1));
    }
    // Changed since by something unrecorded: said first, and the exit
    // status is the one of "no recorded command wrote it".
    let status = if walked.changed_since() {
        let last = walked.start[0].0;
        eprintln!(
            "prov: no recorded command wrote {} as it is now; the lineage of its last recorded version (#{last}) follows",
            escape(path.as_os_str().as_bytes())
        );
        if let LineageFormat::Export(format @ (Format::Makefile | Format::Snakemake)) = args.format {
            anyhow::bail!(
                "{} was changed since #{last} wrote it: a {format} would replace it with that version; move it aside first",
                escape(path.as_os_str().as_bytes())
            );
        }
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    };

    let records = match args.steps {
        Steps::Commands => walked.records(),
        Steps::Processes => prov_export::steps::process_steps(&store, &walked.records())?,
    };
    let opts = ExportOptions {
        // The lineage's own links (moves and in-place edits included) for
        // the commands as recorded; process steps are tied by path.
        links: (args.steps == Steps::Commands).then(|| walked.plan_links()),
        // Upstream, process steps rebuild the file under the name it was
        // written as (the command lineage's links move it to its name now).
        targets: (!args.downstream)
            .then(|| walked.start.iter().filter_map(|&(c, f)| walked.file(c, f)).map(|f| f.path.clone()).collect()),
        title: Some(format!("prov: {} of {}", direction.as_str(), path.display())),
        read_files_dir: None,
        environments: Default::default(),
    };
    let view: fn(&lineage::Lineage, &mut dyn Write) -> prov_export::Result<()> = match args.format {
        LineageFormat::Tree => {
            // An intermediate file a later step rewrote is expected to differ.
            let rewritten =
                if args.stat && !args.downstream { stat::rewritten_later(&walked) } else { Default::default() };
            let state = |f: &prov_store::FileRow| match rewritten.get(&f.id) {
                Some(by) => format!("rewritten since by #{by}"),
                None => stat::file_now(f).label(),
            };
            let here = crate::output::current_dir();
            let opts = TreeOptions {
                all_files: args.all_files,
                state: args.stat.then_some(&state as _),
                glyphs: Glyphs::for_locale(),
                relative_to: here.as_deref(),
            };
            let mut out: Box<dyn Write> = match args.output.as_deref() {
                Some(_) => output_stream(args.output.as_deref())?,
                None => Box::new(Pager::start(!args.no_pager)),
            };
            prov_export::tree::write_tree_with(&walked, &opts, &mut out)?;
            // Upstream the file's writer, downstream its first reader, saw
            // the version FILE is compared with.
            if args.stat {
                if let Some(&(c, f)) = walked.start.first() {
                    if let Some(event) = walked.file(c, f) {
                        let verb = if args.downstream { "read" } else { "wrote" };
                        writeln!(out, "{}", stat::target_summary(&path, event, c, verb))?;
                    }
                }
                if !args.downstream && !walked.start.is_empty() {
                    writeln!(out, "{}", stat::staleness(&walked))?;
                }
            }
            out.flush()?;
            return Ok(status);
        }
        LineageFormat::Json => prov_export::json::write_lineage,
        LineageFormat::Dot if args.steps == Steps::Processes => {
            let mut out = output_stream(args.output.as_deref())?;
            prov_export::dot::write_steps_dot(&walked, &records, &mut out)?;
            out.flush()?;
            return Ok(status);
        }
        LineageFormat::Dot => prov_export::dot::write_dot,
        LineageFormat::Export(format) => {
            for why in export::write(&store, format, &records, &opts, args.output.as_deref())? {
                eprintln!(
                    "prov: warning: cannot rebuild faithfully: {}",
                    prov_model::escape::escape_text(why.as_bytes())
                );
            }
            return Ok(status);
        }
    };
    let mut out = output_stream(args.output.as_deref())?;
    view(&walked, &mut out)?;
    out.flush()?;
    Ok(status)
}

/// The upstream lineage of one recorded version of a file (what a command
/// read or wrote), drawn as `prov query lineage` draws it; None when no
/// recorded command wrote it. Walked from that version, not from the file
/// as it is now: a later command that wrote the same content there is not
/// where this version came from. `prov browse` and `prov report` show it.
pub fn tree_of_version(
    store: &prov_store::Reader,
    file: &prov_store::FileRow,
    glyphs: Glyphs,
) -> Result<Option<String>> {
    let target = Target { path: file.path.clone(), now: Some(lineage::Version::of_event(file)) };
    let walked = lineage::walk_with(store, target, Direction::Upstream, &WalkOptions::default())?;
    if walked.start.is_empty() {
        return Ok(None);
    }
    let mut tree = Vec::new();
    prov_export::tree::write_tree_with(&walked, &TreeOptions { glyphs, ..Default::default() }, &mut tree)?;
    Ok(Some(String::from_utf8_lossy(&tree).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_export_but_dot_is_a_format_value_of_lineage() {
        // `lineage --format dot` is the lineage's own digraph, not the export.
        assert_eq!(LineageFormat::from_str("dot", false), Ok(LineageFormat::Dot));
        assert_eq!(LineageFormat::from_str("ro-crate", false), Ok(LineageFormat::Export(Format::RoCrate)));
        assert_eq!(LineageFormat::value_variants().len(), 3 + Format::ALL.len() - 1);
    }
}
