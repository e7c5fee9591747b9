//! The filters every selecting subcommand shares (`prov query …`,
//! `prov delete`, `prov report`), and the parsing of their values: times
//! (`2026-11-01`, `2d`), sizes (`10KiB`) and comparisons (`>=10KiB`,
//! `1K..1M`). Values are parsed by clap, so a bad one is reported with the
//! flag that carries it.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

use anyhow::Result;
use chrono::{DateTime, Local, NaiveDate, NaiveDateTime, TimeZone, Utc};
use clap::Args;
use prov_model::Access;
use prov_store::{CmpOp, CommandFilter, FileFilter, NamePattern, Selection};

use crate::query::absolute;

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
    /// In the shell session with this id (or id prefix).
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
            && s.file.is_empty()
    }

    /// The store's selection of these filters. Directories are made
    /// absolute like the recorder saw them (symlinks resolved).
    pub fn selection(&self, limit: Option<usize>) -> Selection {
        let dir = |d: &Option<OsString>| d.as_ref().map(|d| dir_bytes(d));
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

fn dir_bytes(d: &OsString) -> Vec<u8> {
    match absolute(std::path::Path::new(d)) {
        Ok(p) => p.as_os_str().as_bytes().to_vec(),
        Err(_) => d.as_bytes().to_vec(),
    }
}

fn non_empty(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("an empty value selects nothing in particular; give a value".into());
    }
    Ok(s.to_owned())
}

fn name_pattern(n: &[u8]) -> NamePattern {
    match std::str::from_utf8(n) {
        Ok(s) if s.contains(['*', '?', '[']) => NamePattern::Glob(s.to_owned()),
        _ => NamePattern::Exact(n.to_vec()),
    }
}

/// A comparison operator at the start of `s`, and the rest.
fn split_op(s: &str) -> (CmpOp, &str) {
    for (prefix, op) in [
        (">=", CmpOp::Ge),
        ("<=", CmpOp::Le),
        ("!=", CmpOp::Ne),
        ("==", CmpOp::Eq),
        (">", CmpOp::Gt),
        ("<", CmpOp::Lt),
        ("=", CmpOp::Eq),
    ] {
        if let Some(rest) = s.strip_prefix(prefix) {
            return (op, rest.trim_start());
        }
    }
    (CmpOp::Eq, s)
}

/// `OP VALUE` or `LOW..HIGH` (both inclusive).
fn parse_cmp<T: Copy>(s: &str, value: impl Fn(&str) -> Result<T, String>) -> Result<Vec<(CmpOp, T)>, String> {
    let s = s.trim();
    if let Some((low, high)) = s.split_once("..") {
        return Ok(vec![(CmpOp::Ge, value(low.trim())?), (CmpOp::Le, value(high.trim())?)]);
    }
    let (op, rest) = split_op(s);
    Ok(vec![(op, value(rest)?)])
}

fn parse_int_cmp(s: &str) -> Result<(CmpOp, i64), String> {
    let (op, rest) = split_op(s.trim());
    let n = rest.parse().map_err(|_| format!("{s:?} is not an exit status (N, or a comparison like '>0')"))?;
    Ok((op, n))
}

fn parse_size_cmp(s: &str) -> Result<Vec<(CmpOp, u64)>, String> {
    parse_cmp(s, parse_size)
}

fn parse_time_cmp(s: &str) -> Result<Vec<(CmpOp, i64)>, String> {
    parse_cmp(s, parse_when)
}

/// `10`, `10B`, `1.5K`, `10KiB`, `3MB` (decimal), … → bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("{s:?} is not a size (e.g. 512, 10KiB, 1.5M, 2GB)");
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad())?;
    let factor: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024f64.powi(2),
        "g" | "gib" => 1024f64.powi(3),
        "t" | "tib" => 1024f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return Err(bad()),
    };
    let bytes = number * factor;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes.round() as u64)
}

fn parse_hash(s: &str) -> Result<u64, String> {
    let hex = s.trim().trim_start_matches("0x");
    if hex.is_empty() || hex.len() > 16 {
        return Err(format!("{s:?} is not a hash (16 hex digits, as prov prints them)"));
    }
    u64::from_str_radix(hex, 16).map_err(|_| format!("{s:?} is not a hash (16 hex digits, as prov prints them)"))
}

/// A point in time, ns since the epoch: see `--since`.
pub fn parse_when(s: &str) -> Result<i64, String> {
    when_at(s, Local::now())
}

fn when_at(s: &str, now: DateTime<Local>) -> Result<i64, String> {
    let t = s.trim();
    let bad = || {
        format!("{s:?} is not a time: use a date (2026-11-01, '2026-11-01 14:30'), RFC 3339, today, yesterday, or an age like 30m, 12h, 2d, 3w, 6mo, 1y")
    };
    let ns = |d: DateTime<Local>| d.timestamp_nanos_opt().ok_or_else(bad);
    let midnight = |date: NaiveDate| ns(local_time(date.and_hms_opt(0, 0, 0).unwrap()).ok_or_else(bad)?);
    match t {
        "now" => return ns(now),
        "today" => return midnight(now.date_naive()),
        "yesterday" => return midnight(now.date_naive().pred_opt().ok_or_else(bad)?),
        _ => {}
    }
    if let Some(age) = parse_age(t) {
        let age = age.ok_or_else(bad)?;
        return ns(now - age);
    }
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return d.with_timezone(&Utc).timestamp_nanos_opt().ok_or_else(bad);
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return midnight(d);
    }
    for fmt in ["%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"] {
        if let Ok(d) = NaiveDateTime::parse_from_str(t, fmt) {
            return ns(local_time(d).ok_or_else(bad)?);
        }
    }
    Err(bad())
}

/// A wall-clock time in the local zone. A time that a DST change skips
/// (02:30 on the spring-forward night) is moved forward by the gap, as
/// date(1) does: 03:30.
fn local_time(t: NaiveDateTime) -> Option<DateTime<Local>> {
    (0..=2).find_map(|h| Local.from_local_datetime(&(t + chrono::Duration::hours(h))).earliest())
}

/// `30s`, `30m`, `12h`, `2d`, `3w`, `6mo`, `1y` (365 days): Some(None) when
/// it has the shape of an age but overflows.
fn parse_age(t: &str) -> Option<Option<chrono::Duration>> {
    let split = t.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = t.split_at(split);
    let n: i64 = n.parse().ok()?;
    let seconds: i64 = match unit {
        "s" | "sec" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        "mo" => 30 * 86_400,
        "y" => 365 * 86_400,
        _ => return None,
    };
    Some(n.checked_mul(seconds).and_then(chrono::Duration::try_seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(parse_size("10KiB").unwrap(), 10240);
        assert_eq!(parse_size("1.5M").unwrap(), 1_572_864);
        assert_eq!(parse_size("2GB").unwrap(), 2_000_000_000);
        assert!(parse_size("ten").unwrap_err().contains("\"ten\" is not a size"));
        assert!(parse_size("5 parsecs").is_err());
        assert_eq!(parse_size_cmp(">=10K").unwrap(), vec![(CmpOp::Ge, 10240)]);
        assert_eq!(parse_size_cmp("1K..2K").unwrap(), vec![(CmpOp::Ge, 1024), (CmpOp::Le, 2048)]);
        assert_eq!(parse_size_cmp("0").unwrap(), vec![(CmpOp::Eq, 0)]);
        assert_eq!(parse_int_cmp("!=130").unwrap(), (CmpOp::Ne, 130));
    }

    #[test]
    fn times() {
        let now = Local.with_ymd_and_hms(2026, 11, 21, 15, 30, 0).unwrap();
        let at = |s: &str| when_at(s, now).unwrap();
        let ns = |d: DateTime<Local>| d.timestamp_nanos_opt().unwrap();
        assert_eq!(at("2d"), ns(now) - 2 * 86_400 * 1_000_000_000);
        assert_eq!(at("90m"), ns(now) - 90 * 60 * 1_000_000_000);
        assert_eq!(at("1y"), ns(now) - 365 * 86_400 * 1_000_000_000);
        assert_eq!(at("2026-11-01"), ns(Local.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()));
        assert_eq!(at("2026-11-01 14:30"), ns(Local.with_ymd_and_hms(2026, 11, 1, 14, 30, 0).unwrap()));
        assert_eq!(at("today"), ns(Local.with_ymd_and_hms(2026, 11, 21, 0, 0, 0).unwrap()));
        assert_eq!(at("yesterday"), ns(Local.with_ymd_and_hms(2026, 11, 20, 0, 0, 0).unwrap()));
        assert_eq!(at("2026-11-01T00:00:00Z"), 1_793_491_200_000_000_000);
        assert!(when_at("last tuesday", now).unwrap_err().contains("\"last tuesday\" is not a time"));
        assert!(when_at("99999999999999y", now).is_err());
        assert_eq!(parse_time_cmp(">2d").unwrap()[0].0, CmpOp::Gt);
    }

    #[test]
    fn hashes_and_names() {
        assert_eq!(parse_hash("00000000000000ff").unwrap(), 255);
        assert!(parse_hash("xyz").is_err());
        assert!(parse_hash("0123456789abcdef0").is_err());
        assert_eq!(name_pattern(b"*.csv"), NamePattern::Glob("*.csv".into()));
        assert_eq!(name_pattern(b"a.csv"), NamePattern::Exact(b"a.csv".to_vec()));
        assert_eq!(name_pattern(b"\xff*"), NamePattern::Exact(b"\xff*".to_vec()));
    }
}
