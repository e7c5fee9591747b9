//! The filters every selecting subcommand shares (`prov query …`,
//! `prov delete`, `prov report`). Their values are parsed by clap with the
//! parsers of `values.rs`, so a bad one is reported with the flag that
//! carries it.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

use clap::Args;
pub use prov_cli::values::parse_when;
use prov_cli::values::{non_empty, parse_hash, parse_int_cmp, parse_size_cmp, parse_time_cmp};
use prov_model::Access;
use prov_store::{CmpOp, CommandFilter, FileFilter, NamePattern, Selection};

use crate::file_args::absolute;

#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Filters (all given ones must hold)")]
pub struct FilterArgs {
    /// Command text contains TEXT (bytes, case-sensitive; repeat to require several).
    #[arg(long, value_name = "TEXT")]
    pub text: Vec<OsString>,
    /// Whole command text matches GLOB (`*`, `?`, `[…]`), e.g. 'make *'.
    #[arg(long, value_name = "GLOB")]
    pub text_glob: Option<String>,
    /// Run in exactly this directory.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<OsString>,
    /// Run in this directory or anywhere below it.
    #[arg(long, value_name = "DIR")]
    pub below: Option<OsString>,
    /// Started at or after WHEN: a date (2026-11-01, '2026-11-01 14:30'), RFC 3339,
    /// today, yesterday, or an age like 30m, 12h, 2d, 3w, 6mo, 1y.
    #[arg(long, value_name = "WHEN", value_parser = parse_when)]
    pub since: Option<i64>,
    /// Started before WHEN (same forms as --since).
    #[arg(long, value_name = "WHEN", value_parser = parse_when)]
    pub until: Option<i64>,
    /// In this session: its short form (the 8 characters listings show),
    /// its id, or a prefix of the id.
    #[arg(long, value_name = "ID", value_parser = non_empty)]
    pub session: Option<String>,
    /// On this host.
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// By this user.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Exit status: N, or a comparison like '>0', '!=130' (repeatable).
    #[arg(long = "exit", value_name = "STATUS", value_parser = parse_int_cmp)]
    pub exit_status: Vec<(CmpOp, i64)>,
    /// Exit status known and not 0.
    #[arg(long)]
    pub failed: bool,
    /// Only records that say they are incomplete.
    #[arg(long)]
    pub incomplete: bool,
    /// The command with this id (repeatable).
    #[arg(long = "id", value_name = "ID")]
    pub ids: Vec<i64>,
    /// One of the command's processes ran PROGRAM: its executable's path or
    /// file name (`cc`, `/usr/bin/python3.11`), or the name it was started
    /// as (argv[0]).
    #[arg(long, value_name = "PROGRAM")]
    pub ran: Option<OsString>,
    /// One of the command's processes had an argument containing TEXT.
    #[arg(long, value_name = "TEXT")]
    pub ran_arg: Option<OsString>,
    /// Its recorded environment had variable KEY set to VALUE exactly,
    /// e.g. SLURM_JOB_ID=4242 (repeatable; see `prov query env`).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_env_var)]
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
    /// File filters apply to reads or writes only (default: both).
    #[arg(
        long,
        value_enum,
        value_name = "KIND",
        help_heading = "File filters (a command matches when one of its files passes all)"
    )]
    pub access: Option<AccessArg>,
    /// A file named NAME, or matching a glob ('*.csv').
    #[arg(
        long,
        value_name = "NAME",
        help_heading = "File filters (a command matches when one of its files passes all)"
    )]
    pub name: Option<OsString>,
    /// A file in DIR or below it.
    #[arg(
        long,
        value_name = "DIR",
        help_heading = "File filters (a command matches when one of its files passes all)"
    )]
    pub dir: Option<OsString>,
    /// File size: '>10KiB', '<=1M', '=0', '1K..1M' (units B, K/KiB, M/MiB, G/GiB, T/TiB;
    /// KB/MB/GB/TB are powers of 1000; repeatable).
    #[arg(long, value_name = "SIZE", value_parser = parse_size_cmp, help_heading = "File filters (a command matches when one of its files passes all)")]
    pub size: Vec<Vec<(CmpOp, u64)>>,
    /// File mtime compared with a time (forms of --since): '>2d' is newer than
    /// two days ago, '<2026-01-01' older (repeatable).
    #[arg(long, value_name = "WHEN", value_parser = parse_time_cmp, help_heading = "File filters (a command matches when one of its files passes all)")]
    pub mtime: Vec<Vec<(CmpOp, i64)>>,
    /// A file with this partial hash (16 hex digits, as printed).
    #[arg(long = "hash", value_name = "HEX", value_parser = parse_hash, help_heading = "File filters (a command matches when one of its files passes all)")]
    pub hash: Option<u64>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessArg {
    Read,
    Write,
}

impl FilterArgs {
    /// Whether any filter was given (`prov delete` refuses to run without one).
    pub fn is_empty(&self) -> bool {
        let s = self.selection(None);
        let c = &s.command;
        c.ids.is_none()
            && c.text_contains.is_empty()
            && c.text_glob.is_none()
            && c.cwd.is_none()
            && c.cwd_below.is_none()
            && c.since_ns.is_none()
            && c.until_ns.is_none()
            && c.session.is_none()
            && c.host.is_none()
            && c.user.is_none()
            && c.exit_status.is_empty()
            && !c.failed
            && !c.incomplete
            && c.ran.is_none()
            && c.ran_arg.is_none()
            && c.env.is_empty()
            && s.file.is_empty()
    }

    /// The store's selection of these filters. Directories are made
    /// absolute like the recorder saw them (symlinks resolved).
    pub fn selection(&self, limit: Option<usize>) -> Selection {
        let dir = |d: &Option<OsString>| d.as_ref().map(dir_bytes);
        let command = CommandFilter {
            ids: (!self.ids.is_empty()).then(|| self.ids.clone()),
            text_contains: self.text.iter().map(|t| t.as_bytes().to_vec()).collect(),
            text_glob: self.text_glob.clone(),
            cwd: dir(&self.cwd),
            cwd_below: dir(&self.below),
            since_ns: self.since,
            until_ns: self.until,
            session: self.session.clone(),
            host: self.host.clone(),
            user: self.user.clone(),
            exit_status: self.exit_status.clone(),
            failed: self.failed,
            incomplete: self.incomplete,
            ran: self.ran.as_ref().map(|r| r.as_bytes().to_vec()),
            ran_arg: self.ran_arg.as_ref().map(|r| r.as_bytes().to_vec()),
            env: self.env.clone(),
        };
        let file = FileFilter {
            access: self.access.map(|a| match a {
                AccessArg::Read => Access::Read,
                AccessArg::Write => Access::Write,
            }),
            name: self.name.as_ref().map(|n| name_pattern(n.as_bytes())),
            dir: dir(&self.dir),
            size: self.size.iter().flatten().copied().collect(),
            mtime_ns: self.mtime.iter().flatten().copied().collect(),
            hash: self.hash,
        };
        Selection { command, file, limit, events_per_command: None }
    }
}

/// `KEY=VALUE` of `--env`: the name up to the first `=`, not empty.
fn parse_env_var(s: &str) -> Result<(Vec<u8>, Vec<u8>), String> {
    let bytes = s.as_bytes();
    match bytes.iter().position(|&b| b == b'=') {
        Some(eq) if eq > 0 => Ok((bytes[..eq].to_vec(), bytes[eq + 1..].to_vec())),
        _ => Err("expected KEY=VALUE, e.g. SLURM_JOB_ID=4242".into()),
    }
}

fn dir_bytes(d: &OsString) -> Vec<u8> {
    match absolute(std::path::Path::new(d)) {
        Ok(p) => p.as_os_str().as_bytes().to_vec(),
        Err(_) => d.as_bytes().to_vec(),
    }
}

fn name_pattern(n: &[u8]) -> NamePattern {
    match std::str::from_utf8(n) {
        Ok(s) if s.contains(['*', '?', '[']) => NamePattern::Glob(s.to_owned()),
        _ => NamePattern::Exact(n.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(name_pattern(b"*.csv"), NamePattern::Glob("*.csv".into()));
        assert_eq!(name_pattern(b"a.csv"), NamePattern::Exact(b"a.csv".to_vec()));
        assert_eq!(name_pattern(b"\xff*"), NamePattern::Exact(b"\xff*".to_vec()));
    }

    #[derive(clap::Parser, Debug)]
    struct Line {
        #[command(flatten)]
        filters: FilterArgs,
    }

    fn parse(args: &[&str]) -> Result<FilterArgs, String> {
        use clap::Parser;
        Line::try_parse_from(std::iter::once("prov").chain(args.iter().copied()))
            .map(|l| l.filters)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn no_filter_is_empty_and_any_one_is_not() {
        assert!(parse(&[]).unwrap().is_empty());
        for given in [
            &["--failed"][..],
            &["--incomplete"],
            &["--text", "make"],
            &["--text-glob", "make *"],
            &["--since", "2d"],
            &["--session", "9c1d5e6f"],
            &["--host", "node17"],
            &["--exit", "0"],
            &["--id", "12"],
            &["--ran", "cc1"],
            &["--ran-arg", "b.c"],
            &["--name", "*.csv"],
            &["--size", ">1K"],
            &["--mtime", "<1y"],
            &["--hash", "ff"],
            &["--access", "read"],
        ] {
            assert!(!parse(given).unwrap().is_empty(), "{given:?} is a filter (prov delete relies on it)");
        }
    }

    #[test]
    fn repeated_size_and_mtime_filters_all_hold() {
        let f = parse(&["--size", "1K..1M", "--size", "!=4K", "--mtime", ">2026-01-01"]).unwrap();
        let s = f.selection(Some(20));
        assert_eq!(s.file.size, [(CmpOp::Ge, 1024), (CmpOp::Le, 1 << 20), (CmpOp::Ne, 4096)]);
        assert_eq!(s.file.mtime_ns.len(), 1);
        assert_eq!(s.file.mtime_ns[0].0, CmpOp::Gt);
        assert_eq!(s.limit, Some(20));
    }

    #[test]
    fn command_filters_reach_the_store_as_given() {
        let f =
            parse(&["--text", "sort", "--text", "csv", "--exit", ">0", "--exit", "!=130", "--id", "3", "--id", "5"])
                .unwrap();
        let c = f.selection(None).command;
        assert_eq!(c.text_contains, [b"sort".to_vec(), b"csv".to_vec()]);
        assert_eq!(c.exit_status, [(CmpOp::Gt, 0), (CmpOp::Ne, 130)]);
        assert_eq!(c.ids, Some(vec![3, 5]));
        assert!(parse(&[]).unwrap().selection(None).command.ids.is_none(), "no --id selects every id");
    }

    #[test]
    fn the_access_kind_limits_file_filters() {
        let access = |kind: &str| parse(&["--access", kind, "--name", "x"]).unwrap().selection(None).file.access;
        assert_eq!(access("read"), Some(Access::Read));
        assert_eq!(access("write"), Some(Access::Write));
        assert!(parse(&["--access", "exec"]).is_err());
    }

    #[test]
    fn a_bad_value_names_its_flag_and_the_value() {
        for (flag, value, says) in [
            ("--size", "big", "\"big\" is not a size"),
            ("--since", "soon", "\"soon\" is not a time"),
            ("--mtime", ">soon", "\"soon\" is not a time"),
            ("--exit", "bad", "\"bad\" is not an exit status"),
            ("--hash", "xyz", "\"xyz\" is not a hash"),
            ("--session", "", "give a value"),
        ] {
            let e = parse(&[flag, value]).unwrap_err();
            assert!(e.contains(flag) && e.contains(says), "{flag} {value:?}: {e}");
        }
    }

    #[test]
    fn a_name_with_glob_characters_is_a_glob_else_exact() {
        assert_eq!(name_pattern(b"data?.csv"), NamePattern::Glob("data?.csv".into()));
        assert_eq!(name_pattern(b"[ab].txt"), NamePattern::Glob("[ab].txt".into()));
        assert_eq!(name_pattern(b"Makefile"), NamePattern::Exact(b"Makefile".to_vec()));
    }
}
