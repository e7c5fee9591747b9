//! `prov`: the user-facing command. Every flag is defined once, here, with
//! its documentation; `prov help` is generated from these definitions.
#![deny(unsafe_code)]
// The front build compiles every module but uses only `prov run`'s: the
// linker leaves the rest out.
#![cfg_attr(feature = "front", allow(dead_code, unused_imports))]

mod admin;
mod browse;
mod chain;
mod config;
mod diff;
mod docs;
mod doctor;
mod environment;
mod export;
mod file_args;
mod filters;
#[allow(unsafe_code)]
#[cfg_attr(not(target_env = "musl"), allow(dead_code))]
mod front_alloc;
mod full_build;
mod journal;
mod lineage;
mod observe;
mod output;
mod processes;
mod query;
mod query_env;
mod report;
mod rerun;
mod rerun_check;
mod rerun_env;
mod restore;
mod run;
#[allow(unsafe_code)]
mod sandbox;
mod setup;
mod shell;
#[allow(unsafe_code)]
mod spawn;
mod stat;
mod sync;
mod terminal;

/// `prov run`'s build allocates from an arena first (front_alloc).
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: front_alloc::ArenaFirst<{ front_alloc::ARENA_BYTES }> = front_alloc::ArenaFirst::new();

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use filters::FilterArgs;

#[derive(Parser)]
#[command(
    name = "prov",
    version,
    about = "A shell journal: which command made this file, from which inputs?",
    after_long_help = "Each subcommand has its own page: prov help query, prov query history --help, or \
                       man prov-query-history. The guide, installed as share/doc/prov/docs/guide.md under the \
                       installation prefix (/usr/local/share/doc/prov/docs/guide.md by default), says what is \
                       recorded and what is not, how to configure prov and how it is kept safe; reference.md \
                       beside it lists every setting, JSON field and exit status."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Read every host's records from the central store (PostgreSQL,
    /// [sync] url) instead of this host's journal: queries, report,
    /// lineage, browse. Default with [sync] everywhere = true.
    #[arg(long, global = true, conflicts_with = "local")]
    everywhere: bool,
    /// Read this host's journal only, whatever [sync] everywhere says.
    #[arg(long, global = true)]
    local: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Run one command tree under observation and store its record.
    ///
    /// Standard input and output are untouched; prov exits with the command's
    /// status (128+N when it was killed by signal N) once the record is
    /// stored, or after 5 s, saying the record follows in the background.
    /// SIGTERM and SIGHUP are passed on to the command. If tracing cannot
    /// start, the command runs untraced, prov says why in one line, and the
    /// record is kept marked untraced.
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
    /// By default prov only says what would be restored and where. With
    /// --to DIR each archived file is written to DIR followed by its
    /// recorded absolute path (DIR/home/u/proj/run.sh); with --in-place, to
    /// its recorded path. Files keep their recorded permission bits. An
    /// existing different file is replaced only with --force or after a yes
    /// on a terminal; otherwise prov says so and exits 1.
    Restore(restore::RestoreArgs),
    /// Run a recorded command again, in a sandbox, and compare.
    ///
    /// The command's text runs with its shell in its recorded directory,
    /// with its recorded variables over the current environment, traced
    /// like any command, inside an unprivileged user and mount
    /// namespace: an overlay over the directories it may write in (its
    /// directory, those of its outputs, HOME, /tmp) takes its writes in a
    /// scratch layer, and every other mount is read-only, so your files
    /// are never written (unless --in-place). --lineage FILE runs every
    /// command that made FILE, in order. --check compares each recorded
    /// output with what the re-run made, one line per difference, inputs
    /// changed since the recording first. Exit status: the command's
    /// (the last one run); with --check 0 when everything is identical,
    /// 3 when something differs.
    Rerun(rerun::RerunArgs),
    /// What differs between two commands, or the chains that made two files.
    ///
    /// Command texts, exit statuses, environments (recorded variables, git
    /// commit), programs run (executable hash, arguments), inputs and
    /// outputs (path, size, content), one line each. A path
    /// below a side's directory is compared relative to it. Exit status 0
    /// when nothing differs, 3 when something does.
    Diff(diff::DiffArgs),
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
    /// Database size and counts.
    ///
    /// Commands, events, sessions, hosts and incomplete records.
    Stats {
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Write the journal as one self-contained HTML page.
    ///
    /// A zoomable timeline (a lane per session), each command's details on
    /// click, a searchable command list and charts. Nothing is loaded from
    /// the network when viewing it.
    Report {
        /// The HTML file to write ("-": standard output; default
        /// prov-report.html in the current directory). An existing file is
        /// replaced only once the new report is complete.
        #[arg(short = 'o', long = "output", value_name = "FILE", default_value = report::DEFAULT_OUTPUT)]
        output: std::path::PathBuf,
        /// Only the last N commands (default: all).
        #[arg(short = 'n', long = "limit", value_name = "N")]
        limit: Option<usize>,
        /// Count prov's own work (`prov query`, `prov report`, …) in the
        /// charts too; it is listed either way.
        #[arg(long)]
        include_prov: bool,
        #[command(flatten)]
        filters: FilterArgs,
    },
    /// Push finished records to the central store; say what is pending.
    ///
    /// The central store is PostgreSQL, at [sync] url. Records are written to the local journal first and pushed after
    /// their command ended, in the background after commands or by this
    /// command; each record is stored once (by its uuid), and a push cut
    /// short by an outage resumes where it stopped. Exits 1 when the
    /// central store cannot be reached (the records stay pending).
    Sync(sync::SyncArgs),
    /// Explain whether tracing works here, and why not.
    Doctor {
        /// Move a damaged database aside and copy what can still be read
        /// of it into a new one.
        #[arg(long)]
        repair: bool,
    },
    /// Say which configuration file applies and whether it is valid.
    Config {
        /// Print every key with its default value and what it does (the
        /// documented default configuration).
        #[arg(long)]
        default: bool,
    },
    /// Print the shell integration for ~/.bashrc or ~/.zshrc.
    ///
    /// Add `eval "$(prov init bash)"` (or zsh) as the last line of
    /// ~/.bashrc (~/.zshrc).
    Init {
        /// The shell whose integration to print.
        #[arg(value_enum)]
        shell: shell::Shell,
        /// Also bind Ctrl-R to `prov browse`: the command chosen is put on
        /// the prompt line, not run (or set [browse] bind_ctrl_r = true).
        #[arg(long)]
        bind_ctrl_r: bool,
    },
    /// Browse the journal full-screen and pick a command.
    ///
    /// Type to search command texts, narrow by directory (Ctrl-D), session (Ctrl-S), failure (Ctrl-F) and time
    /// (Ctrl-T), Tab to the selected command's files and from a file to its
    /// readers (r), writers (w) or lineage (l). Enter prints the chosen
    /// command on standard output; Esc quits with status 1.
    Browse(browse::BrowseArgs),
    /// Start a traced interactive shell without changing any rc file.
    ///
    /// It reads your rc file, then the integration. Default: $SHELL.
    Shell {
        /// The shell to start (default: $SHELL).
        #[arg(value_enum)]
        shell: Option<shell::Shell>,
    },
    /// Internal (packaging): write the man pages and the bash, zsh and fish
    /// completions generated from these definitions under DIR, in the
    /// layout of a share/ directory.
    #[command(name = "__docs", hide = true)]
    Docs { dir: std::path::PathBuf },
    /// Internal: prepare the next observation for the shell integration.
    #[command(name = "__prepare", hide = true)]
    Prepare {
        session: String,
        shell: String,
        /// The shim's protocol version (prov-protocol's VERSION); none from
        /// the first version's shim, which passed none.
        version: Option<u32>,
    },
    /// Internal: the sandbox of `prov rerun` (run by it under `prov run`).
    #[command(name = "__sandbox", hide = true)]
    Sandbox { plan: std::path::PathBuf },
    /// Internal: keep an observation ready for `prov run` (started by it).
    #[command(name = "__run-preparer", hide = true)]
    RunPreparer,
}

#[derive(Subcommand)]
enum QueryCommand {
    /// Commands that wrote FILE, newest first.
    ///
    /// Found by content (hash and size, so renamed and moved copies are
    /// found too) and by path.
    Wrote {
        /// The file asked about: a path now (its content finds copies and
        /// renamed versions too), or the path of a file that is gone.
        #[arg(value_name = "FILE")]
        file: OsString,
        #[command(flatten)]
        opts: QueryOpts,
    },
    /// Commands that read FILE, found like `wrote` finds writers.
    Read {
        /// The file asked about, found like `wrote` finds it.
        #[arg(value_name = "FILE")]
        file: OsString,
        #[command(flatten)]
        opts: QueryOpts,
    },
    /// The most recent commands, newest first.
    ///
    /// Those passing the filters, 20 unless -n is given. One line per command: id, start time, status, directory, text; the
    /// files below it with --files, --stat or a file filter. Ids are given
    /// when a record is stored, which is when its command ends: order by
    /// the start time shown, not by id.
    History {
        #[command(flatten)]
        opts: QueryOpts,
    },
    /// The sessions, or the commands of one.
    ///
    /// Without SESSION: the sessions, most recent first, by their short
    /// form. With one: its commands in the order they ran.
    ///
    /// A shell traced by `prov init` is one session; `prov run` commands
    /// started from one terminal session (setsid(2)) are one session.
    Session {
        /// A session's short form (the 8 characters listings show), its
        /// full id, or a unique prefix of it.
        #[arg(value_name = "SESSION")]
        id: Option<String>,
        #[command(flatten)]
        opts: QueryOpts,
    },
    /// Where FILE came from, or what was made from it.
    ///
    /// The command that wrote it, the files that command read, their writers, and so on back to files nobody recorded
    /// writing (`--downstream`: what was made from FILE). As a tree, JSON,
    /// DOT, or an export (PROV-JSON, RO-Crate, Makefile, Snakemake,
    /// shournal JSON).
    Lineage {
        /// The file whose history (or, --downstream, whose uses) to follow:
        /// found by its content now and by its path.
        #[arg(value_name = "FILE")]
        file: OsString,
        #[command(flatten)]
        args: lineage::LineageArgs,
    },
    /// The process tree of command ID.
    ///
    /// Every process that ran in it, with its arguments (or why they are unknown), its working directory and
    /// the files it wrote (and read, with --files).
    Processes {
        /// The command's id (as `prov query history` shows it).
        #[arg(value_name = "ID")]
        id: i64,
        /// Only processes of this executable: a full path, a file name, or
        /// the name the process was started as (argv[0]).
        #[arg(long, value_name = "NAME")]
        exe: Option<String>,
        /// Only processes with an argument containing TEXT.
        #[arg(long, value_name = "TEXT")]
        arg: Option<String>,
        /// List the files each process read, not only how many.
        #[arg(long)]
        files: bool,
        /// JSON Lines: one object per process, "type": "process", id,
        /// command_id, pid, ppid, parent (id of the parent's process or
        /// null), depth, exe, args (null when unknown; args_hex when not
        /// UTF-8), args_unknown (why), cwd, start_ns/start, end_ns/end,
        /// writes, reads.
        #[arg(long)]
        json: bool,
    },
    /// The environment command ID ran in, and the programs it ran.
    ///
    /// The variables `[env]` records (PATH, the Python or Conda
    /// environment, loaded modules, the batch job, threads, locale; values
    /// redacted), the git commit, branch and dirty state of its directory,
    /// and each program's executable with its size, mtime and partial hash.
    /// `--env KEY=VALUE` on the listings finds every command with a value.
    Env {
        /// The command's id (as `prov query history` shows it).
        #[arg(value_name = "ID")]
        id: i64,
        /// One JSON object: "type": "environment", command_id,
        /// environment_id, variables, git (root, commit, branch, dirty) and
        /// executables (path, size, mtime_ns, mtime, hash).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Clone)]
pub struct QueryOpts {
    /// Show at most N commands.
    #[arg(short = 'n', long = "limit", value_name = "N")]
    pub limit: Option<usize>,
    /// JSON Lines: one object per command (its fields: see --help).
    ///
    /// A command object has "type": "command", id, uuid, session, seq,
    /// text, cwd, host, user, shell, start_ns, start (RFC 3339, UTC),
    /// end_ns/end (null while running), exit_status (null if unknown; 128+N
    /// for signal N), complete, incomplete (the non-zero counters of what
    /// the record lacks). With files (file queries, file filters, --files):
    /// files, objects with id, access ("read"/"write"), path, size,
    /// mtime_ns, mtime, hash (16 hex digits, null if unreadable),
    /// hash_chunk_size, hash_chunks, pid, matched (the file asked about),
    /// match (wrote/read: how the command and its matched files match the
    /// file asked about: path, moved, earlier or content; see README),
    /// archived (a read file the script archive kept), and with --stat now:
    /// {state: up-to-date|modified|missing|unreadable, differs: [size,
    /// mtime, hash, type], error}; plus file_count and files_truncated
    /// (more than 1000 files; --all-files lists all). Byte strings that are
    /// not UTF-8 (text, cwd, path) come as a lossy string plus <field>_hex
    /// with the exact bytes. A session object (prov query session) has
    /// "type": "session", session, short, host, user, shell, first_ns/first,
    /// last_ns/last, commands.
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
    /// Colour the status and the access of files: auto (on a terminal,
    /// unless NO_COLOR is set or TERM is dumb), always, never.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    pub color: terminal::ColorChoice,
    /// Write straight to the terminal instead of through $PAGER (default
    /// `less -FRX`; a pager is used only on a terminal).
    #[arg(long)]
    pub no_pager: bool,
    /// wrote/read: also prov's own work (`prov query`, `prov report`, …),
    /// left out of the answers by default.
    #[arg(long)]
    pub include_prov: bool,
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
            color: self.color,
            pager: !self.no_pager,
            include_prov: self.include_prov,
        }
    }
}

fn main() -> ExitCode {
    spawn::keep_children_status();
    if let Some(command) = plain_run(std::env::args_os().collect()) {
        return run_and_push(command);
    }
    every_other_subcommand()
}

/// The front build (`--features front`, bin/prov of a musl installation):
/// `prov run -- CMD` and nothing else, so that the code it runs is not
/// spread through all of prov's (fewer pages faulted in at its start and
/// unmapped at its exit, benches/README.md); everything else is the full
/// build's, whose absence is then one line, not a slower answer.
#[cfg(feature = "front")]
fn every_other_subcommand() -> ExitCode {
    let why = full_build::hand_over(setup::install_prefix);
    eprintln!("prov: {why}; this prov runs only `prov run -- CMD` itself: reinstall prov");
    ExitCode::from(1)
}

#[cfg(not(feature = "front"))]
fn every_other_subcommand() -> ExitCode {
    // Where the full build cannot start, this one answers, only slower.
    full_build::hand_over_or_answer(setup::install_prefix);
    let cli = Cli::parse();
    let reach = journal::Reach::from_flags(cli.everywhere, cli.local);
    let result = match cli.command {
        Command::Run { command } => return run_and_push(command),
        Command::Query { query } => match query {
            QueryCommand::Wrote { file, opts } => {
                query::by_file(prov_model::Access::Write, &file, &opts.filters, opts.limit, &opts.show(), reach)
            }
            QueryCommand::Read { file, opts } => {
                query::by_file(prov_model::Access::Read, &file, &opts.filters, opts.limit, &opts.show(), reach)
            }
            QueryCommand::History { opts } => query::history(&opts.filters, opts.limit, &opts.show(), reach),
            QueryCommand::Session { id, opts } => {
                query::session(id.as_deref(), &opts.filters, opts.limit, &opts.show(), reach)
            }
            QueryCommand::Lineage { file, args } => lineage::lineage(&file, args, reach),
            QueryCommand::Processes { id, exe, arg, files, json } => {
                processes::query(&processes::ProcessQuery { command_id: id, json, exe, arg, files }, reach)
            }
            QueryCommand::Env { id, json } => query_env::query(id, json, reach),
        },
        Command::Restore(args) => restore::restore(args, reach),
        Command::Rerun(args) => rerun::rerun(args, reach),
        Command::Diff(args) => diff::diff(args, reach),
        Command::Sandbox { plan } => sandbox::serve(&plan),
        Command::Delete { older_than, dry_run, yes, filters } => admin::delete(filters, older_than, dry_run, yes),
        Command::Stats { json } => admin::stats(json, reach),
        Command::Report { output, limit, include_prov, filters } => {
            report::report(&output, limit, include_prov, &filters, reach)
        }
        Command::Doctor { repair: false } => doctor::doctor(),
        Command::Doctor { repair: true } => doctor::db::repair(),
        Command::Config { default } => config::config(default),
        Command::Init { shell, bind_ctrl_r } => shell::init(shell, bind_ctrl_r),
        Command::Browse(args) => browse::browse(args, reach),
        Command::Shell { shell } => shell::shell(shell),
        Command::Docs { dir } => docs::write_all::<Cli>(&dir),
        Command::Prepare { session, shell, version } => {
            let answered = shell::prepare(session, shell, version);
            sync::push_in_background(None);
            answered
        }
        Command::RunPreparer => run::preparer::serve(),
        Command::Sync(args) => sync::sync(args),
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

fn run_and_push(command: Vec<OsString>) -> ExitCode {
    let (code, setup) = run::run(command);
    sync::push_in_background(setup.as_ref());
    code
}

/// `prov run CMD…` or `prov run -- CMD…`, the forms scripts repeat, read
/// without clap: building the whole command tree with its help texts cost
/// about 1 ms of a `prov run`, which aims at a few. Anything else (an
/// option, `--help`, a global flag, no command) is left to clap; the
/// `plain_run_reads_as_clap_does` test holds the two to the same result.
fn plain_run(args: Vec<OsString>) -> Option<Vec<OsString>> {
    let mut args = args.into_iter().skip(1);
    if args.next()? != "run" {
        return None;
    }
    let rest: Vec<OsString> = args.collect();
    let command = match rest.first()?.as_encoded_bytes() {
        b"--" => rest[1..].to_vec(),
        [b'-', ..] => return None,
        _ => rest,
    };
    (!command.is_empty()).then_some(command)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// `--help` of every subcommand and argument says what it is (the man
    /// pages are made from the same text).
    #[test]
    fn every_subcommand_and_argument_is_described() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            if cmd.is_hide_set() {
                return;
            }
            let path = format!("{path} {}", cmd.get_name());
            if cmd.get_about().is_none() && cmd.get_long_about().is_none() {
                missing.push(path.clone());
            }
            for arg in cmd.get_arguments() {
                let builtin = ["help", "version"].contains(&arg.get_id().as_str());
                if !builtin && !arg.is_hide_set() && arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &path, missing);
            }
        }
        let mut cmd = super::Cli::command();
        cmd.build();
        let mut missing = Vec::new();
        walk(&cmd, "", &mut missing);
        assert!(missing.is_empty(), "no description: {missing:?}");
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(args)
    }

    #[test]
    fn a_file_query_takes_its_options_and_filters() {
        let cli = parse(&[
            "prov", "query", "wrote", "out.csv", "--json", "-n", "3", "--stat", "--exit", ">0", "--exit", "!=130",
            "--id", "7", "--color", "never",
        ])
        .unwrap();
        let Command::Query { query: QueryCommand::Wrote { file, opts } } = cli.command else {
            panic!("not query wrote")
        };
        assert_eq!(file, "out.csv");
        assert!(opts.json && opts.stat && !opts.files && !opts.include_prov);
        assert_eq!(opts.limit, Some(3));
        assert_eq!(opts.color, terminal::ColorChoice::Never);
        assert_eq!(opts.filters.exit_status, [(prov_store::CmpOp::Gt, 0), (prov_store::CmpOp::Ne, 130)]);
        assert_eq!(opts.filters.ids, [7]);
        assert!(!cli.everywhere && !cli.local);
        // --output needs --format; a count must be a number.
        assert!(parse(&["prov", "query", "history", "-o", "x.json"]).is_err());
        assert!(parse(&["prov", "query", "history", "-n", "some"]).is_err());
    }

    #[test]
    fn local_and_everywhere_are_global_and_exclusive() {
        let cli = parse(&["prov", "query", "history", "--everywhere"]).unwrap();
        assert!(cli.everywhere && !cli.local);
        let cli = parse(&["prov", "--local", "report"]).unwrap();
        assert!(cli.local && !cli.everywhere);
        let err = parse(&["prov", "--everywhere", "--local", "query", "history"]).err().unwrap();
        assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
    }

    #[test]
    fn report_and_delete_defaults_and_ages() {
        let Command::Report { output, limit, include_prov, .. } = parse(&["prov", "report"]).unwrap().command else {
            panic!("not report")
        };
        assert_eq!(output, std::path::Path::new(report::DEFAULT_OUTPUT));
        assert_eq!((limit, include_prov), (None, false));
        let Command::Delete { older_than, dry_run, yes, .. } =
            parse(&["prov", "delete", "--older-than", "30d", "-y"]).unwrap().command
        else {
            panic!("not delete")
        };
        assert!(yes && !dry_run);
        let age_days = (run::outcome::now_ns() - older_than.unwrap()) / 86_400_000_000_000;
        assert!((29..=30).contains(&age_days), "30d ago is {age_days} days ago");
        assert!(parse(&["prov", "delete", "--older-than", "soon"]).is_err());
    }

    /// The shim passes its protocol version; the first shim passed none.
    #[test]
    fn the_shell_preparer_reads_the_shims_version() {
        let version = |args: &[&str]| match parse(args).map(|c| c.command) {
            Ok(Command::Prepare { session, shell, version }) => {
                assert_eq!((session.as_str(), shell.as_str()), ("9f2c41d7", "bash"));
                Ok(version)
            }
            Ok(_) => panic!("not __prepare"),
            Err(e) => Err(e.kind()),
        };
        assert_eq!(version(&["prov", "__prepare", "9f2c41d7", "bash", "1"]), Ok(Some(1)));
        assert_eq!(version(&["prov", "__prepare", "9f2c41d7", "bash"]), Ok(None));
        assert!(version(&["prov", "__prepare", "9f2c41d7", "bash", "one"]).is_err());
        assert_eq!(
            parse(&["prov", "init", "fish"]).err().map(|e| e.kind()),
            Some(clap::error::ErrorKind::InvalidValue)
        );
    }

    #[test]
    fn plain_run_reads_as_clap_does() {
        let cases: &[&[&str]] = &[
            &["prov", "run", "--", "/bin/true"],
            &["prov", "run", "make", "-j4", "all"],
            &["prov", "run", "--", "sh", "-c", "echo -- x"],
            &["prov", "run", "--", "--help"],
            &["prov", "run", "sort", "--", "-x"],
            &["prov", "run", "--", "prov", "run", "--", "true"],
            &["prov", "run", "echo", "--everywhere"],
            &["prov", "run", "--"],
            &["prov", "run"],
            &["prov", "run", "--help"],
            &["prov", "run", "-h"],
            &["prov", "--local", "run", "true"],
            &["prov", "query", "history"],
        ];
        for case in cases {
            let args: Vec<OsString> = case.iter().map(OsString::from).collect();
            let by_clap = match Cli::try_parse_from(&args) {
                Ok(Cli { command: Command::Run { command }, everywhere: false, local: false }) => Some(command),
                _ => None,
            };
            let fast = plain_run(args);
            // Read without clap only where clap reads the same command.
            assert!(fast.is_none() || fast == by_clap, "{case:?}: {fast:?} vs {by_clap:?}");
        }
        let read = |a: &[&str]| plain_run(a.iter().map(OsString::from).collect());
        assert!(read(&["prov", "run", "--", "/bin/true"]).is_some());
        assert!(read(&["prov", "run", "make", "-j4"]).is_some());
    }
}
