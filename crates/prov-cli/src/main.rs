//! `prov`: the user-facing command. Every flag is defined once, here, with
//! its documentation; `prov help` is generated from these definitions.
#![deny(unsafe_code)]

mod admin;
mod config;
mod doctor;
mod export;
mod filters;
mod lineage;
mod observe;
mod output;
mod query;
mod report;
mod restore;
mod run;
mod setup;
mod shell;
#[allow(unsafe_code)]
mod spawn;
mod stat;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use filters::FilterArgs;

#[derive(Parser)]
#[command(name = "prov", version, about = "A shell journal: which command made this file, from which inputs?")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one command tree under observation and store its record.
    ///
    /// Standard input and output are untouched; prov exits with the command's
    /// status (128+N when it was killed by signal N) after the record is
    /// stored. If tracing cannot start, the command runs untraced and prov
    /// says why in one line.
    Run {
        /// The command and its arguments (use `--` before it).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Ask the journal.
    Query {
        #[command(subcommand)]
        query: QueryCommand,
    },
    /// Give back the scripts a command read, from the script archive.
    ///
    /// Each archived file is written to DIR followed by its recorded
    /// absolute path (./home/u/proj/run.sh), with its recorded permission
    /// bits. An existing different file is replaced only with --force or
    /// after a yes on a terminal; otherwise prov says so and exits 1.
    Restore(restore::RestoreArgs),
    /// Delete the commands the filters select, with their file events.
    ///
    /// At least one filter (or --older-than) is required. Asks before
    /// deleting on a terminal; elsewhere --yes is required.
    Delete {
        /// Commands that started longer ago than AGE (30d, 1y, or a date):
        /// retention.
        #[arg(long, value_name = "AGE", value_parser = filters::parse_when)]
        older_than: Option<i64>,
        /// Only say what would be deleted.
        #[arg(long)]
        dry_run: bool,
        /// Do not ask.
        #[arg(long, short = 'y')]
        yes: bool,
        #[command(flatten)]
        filters: FilterArgs,
    },
    /// Database size and counts: commands, events, sessions, hosts,
    /// incomplete records.
    Stats {
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Write the journal as one self-contained HTML page: a zoomable
    /// timeline (a lane per session), each command's details on click,
    /// a searchable command list and charts. Nothing is loaded from the
    /// network when viewing it.
    Report {
        /// The HTML file to write ("-": standard output). An existing file
        /// is replaced only once the new report is complete.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: std::path::PathBuf,
        /// Only the last N commands (default: all).
        #[arg(short = 'n', long = "limit", value_name = "N")]
        limit: Option<usize>,
        #[command(flatten)]
        filters: FilterArgs,
    },
    /// Explain whether tracing works here, and why not.
    Doctor,
    /// Say which configuration file applies and whether it is valid.
    Config {
        /// Print every key with its default value and what it does (the
        /// documented default configuration).
        #[arg(long)]
        default: bool,
    },
    /// Print the shell integration; add `eval "$(prov init bash)"` (or zsh)
    /// as the last line of ~/.bashrc (~/.zshrc).
    Init {
        #[arg(value_enum)]
        shell: shell::Shell,
    },
    /// Start a traced interactive shell (your rc file, then the integration)
    /// without changing any rc file. Default: $SHELL.
    Shell {
        #[arg(value_enum)]
        shell: Option<shell::Shell>,
    },
    /// Internal: prepare the next observation for the shell integration.
    #[command(name = "__prepare", hide = true)]
    Prepare { session: String, shell: String },
}

#[derive(Subcommand)]
enum QueryCommand {
    /// Commands that wrote FILE: found by content (hash and size, so renamed
    /// and moved copies are found too) and by path. Newest first.
    Wrote {
        file: OsString,
        #[command(flatten)]
        opts: QueryOpts,
    },
    /// Commands that read FILE, found like `wrote` finds writers.
    Read {
        file: OsString,
        #[command(flatten)]
        opts: QueryOpts,
    },
    /// The most recent commands passing the filters, newest first
    /// (20 unless -n is given).
    History {
        #[command(flatten)]
        opts: QueryOpts,
    },
    /// Without ID: the shell sessions, most recent first. With a session
    /// id (or a unique prefix of one): its commands in the order they ran.
    Session {
        id: Option<String>,
        #[command(flatten)]
        opts: QueryOpts,
    },
    /// Where FILE came from: the command that wrote it, the files that
    /// command read, their writers, and so on back to files nobody recorded
    /// writing (`--downstream`: what was made from FILE). As a tree, JSON,
    /// DOT, or an export (PROV-JSON, RO-Crate, Makefile, Snakemake,
    /// shournal JSON).
    Lineage {
        file: OsString,
        #[command(flatten)]
        args: lineage::LineageArgs,
    },
}

#[derive(Args, Clone)]
pub struct QueryOpts {
    /// Show at most N commands.
    #[arg(short = 'n', long = "limit", value_name = "N")]
    pub limit: Option<usize>,
    /// JSON Lines: one object per command (fields documented in README.md).
    #[arg(long)]
    pub json: bool,
    /// List each command's files (file queries and file filters always do).
    #[arg(long)]
    pub files: bool,
    /// List every file of each command found, even of commands with more
    /// than 1000 files (by default those show the matched files and a count).
    #[arg(long)]
    pub all_files: bool,
    /// For each file listed: is it up to date, modified (size, mtime or
    /// partial hash differ) or missing now?
    #[arg(long)]
    pub stat: bool,
    /// Export the commands found (with all their files) instead of listing
    /// them.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<export::ExportFormat>,
    /// Write the export to PATH (a new file; for ro-crate a directory)
    /// instead of standard output.
    #[arg(short = 'o', long, value_name = "PATH", requires = "format")]
    pub output: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub filters: FilterArgs,
}

impl QueryOpts {
    fn show(&self) -> query::Show {
        query::Show {
            json: self.json,
            files: self.files,
            all_files: self.all_files,
            stat: self.stat,
            export: self.format.map(|format| (format.0, self.output.clone())),
            // From the configuration, once it is read.
            files_shown: 0,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { command } => return run::run(command),
        Command::Query { query } => match query {
            QueryCommand::Wrote { file, opts } => {
                query::by_file(prov_model::Access::Write, &file, &opts.filters, opts.limit, &opts.show())
            }
            QueryCommand::Read { file, opts } => {
                query::by_file(prov_model::Access::Read, &file, &opts.filters, opts.limit, &opts.show())
            }
            QueryCommand::History { opts } => query::history(&opts.filters, opts.limit, &opts.show()),
            QueryCommand::Session { id, opts } => {
                query::session(id.as_deref(), &opts.filters, opts.limit, &opts.show())
            }
            QueryCommand::Lineage { file, args } => lineage::lineage(&file, args),
        },
        Command::Restore(args) => restore::restore(args),
        Command::Delete { older_than, dry_run, yes, filters } => admin::delete(filters, older_than, dry_run, yes),
        Command::Stats { json } => admin::stats(json),
        Command::Report { output, limit, filters } => report::report(&output, limit, &filters),
        Command::Doctor => doctor::doctor(),
        Command::Config { default } => config::config(default),
        Command::Init { shell } => shell::init(shell),
        Command::Shell { shell } => shell::shell(shell),
        Command::Prepare { session, shell } => shell::prepare(session, shell),
    };
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // Errors quote paths and database messages: nothing in them may
            // drive the terminal.
            eprintln!("prov: {}", prov_model::escape::escape_controls(&format!("{e:#}")));
            ExitCode::from(1)
        }
    }
}

/// `prov query … | head` is a success, not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}
