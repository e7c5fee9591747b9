//! The parsing of filter values (`prov query …`, `prov delete`, `prov
//! report`): times (`2026-11-01`, `2d`), sizes (`10KiB`) and comparisons
//! (`>=10KiB`, `1K..1M`). Pure functions of the user's text; errors are one
//! line that quotes the value.

use chrono::{DateTime, Local, NaiveDate, NaiveDateTime, TimeZone, Utc};
use prov_store::CmpOp;

pub fn non_empty(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("an empty value selects nothing in particular; give a value".into());
    }
    Ok(s.to_owned())
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

pub fn parse_int_cmp(s: &str) -> Result<(CmpOp, i64), String> {
    let (op, rest) = split_op(s.trim());
    let n = rest.parse().map_err(|_| format!("{s:?} is not an exit status (N, or a comparison like '>0')"))?;
    Ok((op, n))
}

pub fn parse_size_cmp(s: &str) -> Result<Vec<(CmpOp, u64)>, String> {
    parse_cmp(s, parse_size)
}

pub fn parse_time_cmp(s: &str) -> Result<Vec<(CmpOp, i64)>, String> {
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

pub fn parse_hash(s: &str) -> Result<u64, String> {
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

pub fn when_at(s: &str, now: DateTime<Local>) -> Result<i64, String> {
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
        // An age reaching before chrono's calendar is as bad as one that
        // overflows (`now - age` would panic).
        let then = age.and_then(|age| now.checked_sub_signed(age)).ok_or_else(bad)?;
        return ns(then);
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
    fn ages_before_the_calendar_are_errors_not_panics() {
        // Found by fuzz/ (filter_values): `--since 9999999999999s` panicked.
        let now = Local.with_ymd_and_hms(2026, 11, 21, 15, 30, 0).unwrap();
        assert!(when_at("9999999999999s", now).unwrap_err().contains("\"9999999999999s\" is not a time"));
        assert!(when_at("300000y", now).is_err());
        assert!(parse_time_cmp("<9999999999999s").is_err());
    }

    #[test]
    fn hashes() {
        assert_eq!(parse_hash("00000000000000ff").unwrap(), 255);
        assert!(parse_hash("xyz").is_err());
        assert!(parse_hash("0123456789abcdef0").is_err());
    }
}
