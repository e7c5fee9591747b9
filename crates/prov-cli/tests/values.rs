//! The filter values users type (`--size`, `--since`, `--exit`, `--hash`,
//! `--session`), parsed as the documents say: docs/guide.md, "Filters".

use chrono::{DateTime, Local, TimeZone};
use prov_cli::values::{non_empty, parse_hash, parse_int_cmp, parse_size, parse_size_cmp, parse_time_cmp, when_at};
use prov_store::CmpOp;

const SECOND: i64 = 1_000_000_000;

fn now() -> DateTime<Local> {
    Local.with_ymd_and_hms(2026, 11, 21, 15, 30, 0).unwrap()
}

fn ns(d: DateTime<Local>) -> i64 {
    d.timestamp_nanos_opt().unwrap()
}

#[test]
fn binary_units_are_powers_of_1024_in_either_spelling() {
    assert_eq!(parse_size("1K").unwrap(), 1024);
    assert_eq!(parse_size("1KiB").unwrap(), 1024);
    assert_eq!(parse_size("1M").unwrap(), 1 << 20);
    assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
    assert_eq!(parse_size("1G").unwrap(), 1 << 30);
    assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
    assert_eq!(parse_size("1T").unwrap(), 1 << 40);
    assert_eq!(parse_size("2TiB").unwrap(), 2 << 40);
}

#[test]
fn decimal_units_are_powers_of_1000() {
    assert_eq!(parse_size("1KB").unwrap(), 1_000);
    assert_eq!(parse_size("1MB").unwrap(), 1_000_000);
    assert_eq!(parse_size("3GB").unwrap(), 3_000_000_000);
    assert_eq!(parse_size("1TB").unwrap(), 1_000_000_000_000);
}

#[test]
fn units_ignore_case_and_space_and_bytes_may_be_spelt_out() {
    assert_eq!(parse_size("10kib").unwrap(), 10 * 1024);
    assert_eq!(parse_size("10 KiB").unwrap(), 10 * 1024);
    assert_eq!(parse_size("10mb").unwrap(), 10_000_000);
    assert_eq!(parse_size("7B").unwrap(), 7);
    assert_eq!(parse_size("0").unwrap(), 0);
}

#[test]
fn fractional_sizes_round_to_the_nearest_byte() {
    assert_eq!(parse_size("0.5K").unwrap(), 512);
    assert_eq!(parse_size("1.5KB").unwrap(), 1_500);
    assert_eq!(parse_size("0.3").unwrap(), 0);
    assert_eq!(parse_size("0.6").unwrap(), 1);
}

#[test]
fn sizes_that_are_not_sizes_are_named_in_the_error() {
    for bad in ["", "K", "-1K", "1.2.3", "12 parsecs", "1KiBB", "0x10"] {
        let e = parse_size(bad).unwrap_err();
        assert!(e.starts_with(&format!("{bad:?} is not a size")), "{bad:?}: {e}");
    }
}

#[test]
fn a_size_beyond_64_bits_is_an_error_not_a_wrap() {
    assert!(parse_size("20000000T").is_err());
    assert_eq!(parse_size("16777215T").unwrap(), 16_777_215u64 << 40);
}

#[test]
fn every_comparison_operator_is_read() {
    let op = |s: &str| parse_size_cmp(s).unwrap();
    assert_eq!(op(">1K"), [(CmpOp::Gt, 1024)]);
    assert_eq!(op(">=1K"), [(CmpOp::Ge, 1024)]);
    assert_eq!(op("<1K"), [(CmpOp::Lt, 1024)]);
    assert_eq!(op("<=1K"), [(CmpOp::Le, 1024)]);
    assert_eq!(op("=1K"), [(CmpOp::Eq, 1024)]);
    assert_eq!(op("==1K"), [(CmpOp::Eq, 1024)]);
    assert_eq!(op("!=1K"), [(CmpOp::Ne, 1024)]);
    assert_eq!(op("1K"), [(CmpOp::Eq, 1024)]);
}

#[test]
fn comparisons_allow_space_around_the_operator_and_the_range() {
    assert_eq!(parse_size_cmp(" >= 10KiB ").unwrap(), [(CmpOp::Ge, 10 * 1024)]);
    assert_eq!(parse_size_cmp("1K .. 1M").unwrap(), [(CmpOp::Ge, 1024), (CmpOp::Le, 1 << 20)]);
}

#[test]
fn a_range_is_inclusive_at_both_ends_and_each_end_must_parse() {
    assert_eq!(parse_size_cmp("0..0").unwrap(), [(CmpOp::Ge, 0), (CmpOp::Le, 0)]);
    assert!(parse_size_cmp("1K..").unwrap_err().contains("\"\" is not a size"));
    assert!(parse_size_cmp("..1K").is_err());
    assert!(parse_size_cmp("1K..big").unwrap_err().contains("\"big\""));
}

#[test]
fn exit_statuses_take_a_number_or_a_comparison() {
    assert_eq!(parse_int_cmp("0").unwrap(), (CmpOp::Eq, 0));
    assert_eq!(parse_int_cmp(">0").unwrap(), (CmpOp::Gt, 0));
    assert_eq!(parse_int_cmp(" != 130 ").unwrap(), (CmpOp::Ne, 130));
    assert_eq!(parse_int_cmp("<=-1").unwrap(), (CmpOp::Le, -1));
    let e = parse_int_cmp("failed").unwrap_err();
    assert!(e.starts_with("\"failed\" is not an exit status"), "{e}");
    assert!(parse_int_cmp(">").is_err());
}

#[test]
fn hashes_are_up_to_16_hex_digits_in_either_case_with_an_optional_0x() {
    assert_eq!(parse_hash("9dbc9cab24d9544e").unwrap(), 0x9dbc_9cab_24d9_544e);
    assert_eq!(parse_hash("9DBC9CAB24D9544E").unwrap(), 0x9dbc_9cab_24d9_544e);
    assert_eq!(parse_hash("0xff").unwrap(), 255);
    assert_eq!(parse_hash(" ffffffffffffffff ").unwrap(), u64::MAX);
    for bad in ["", "0x", "g0", "12345678901234567"] {
        let e = parse_hash(bad).unwrap_err();
        assert!(e.contains("is not a hash (16 hex digits"), "{bad:?}: {e}");
    }
}

#[test]
fn an_empty_session_is_refused_and_any_other_kept_as_typed() {
    assert!(non_empty("").unwrap_err().contains("give a value"));
    assert_eq!(non_empty("3f2a9c1d").unwrap(), "3f2a9c1d");
    assert_eq!(non_empty(" x ").unwrap(), " x ");
}

#[test]
fn every_age_unit_counts_back_from_now() {
    let age = |s: &str| ns(now()) - when_at(s, now()).unwrap();
    assert_eq!(age("30s"), 30 * SECOND);
    assert_eq!(age("30sec"), 30 * SECOND);
    assert_eq!(age("30m"), 30 * 60 * SECOND);
    assert_eq!(age("30min"), 30 * 60 * SECOND);
    assert_eq!(age("12h"), 12 * 3600 * SECOND);
    assert_eq!(age("2d"), 2 * 86_400 * SECOND);
    assert_eq!(age("3w"), 21 * 86_400 * SECOND);
    assert_eq!(age("6mo"), 180 * 86_400 * SECOND, "a month is 30 days");
    assert_eq!(age("1y"), 365 * 86_400 * SECOND, "a year is 365 days");
    assert_eq!(age("0d"), 0);
    assert_eq!(age("now"), 0);
}

#[test]
fn ages_with_a_sign_or_an_unknown_unit_are_errors() {
    for bad in ["-2d", "+2d", "2 d", "2days", "2D", "d", "2x"] {
        let e = when_at(bad, now()).unwrap_err();
        assert!(e.starts_with(&format!("{bad:?} is not a time")), "{bad:?}: {e}");
    }
}

#[test]
fn dates_and_times_are_local_and_every_documented_form_is_read() {
    let local = |y, mo, d, h, mi, s| ns(Local.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap());
    let at = |s: &str| when_at(s, now()).unwrap();
    assert_eq!(at("2026-11-01"), local(2026, 11, 1, 0, 0, 0));
    assert_eq!(at("2026-11-01 14:30"), local(2026, 11, 1, 14, 30, 0));
    assert_eq!(at("2026-11-01 14:30:15"), local(2026, 11, 1, 14, 30, 15));
    assert_eq!(at("2026-11-01T14:30"), local(2026, 11, 1, 14, 30, 0));
    assert_eq!(at("2026-11-01T14:30:15"), local(2026, 11, 1, 14, 30, 15));
    assert_eq!(at("  2026-11-01  "), local(2026, 11, 1, 0, 0, 0), "surrounding space is ignored");
}

#[test]
fn rfc3339_times_keep_their_own_offset() {
    let utc = when_at("2026-11-01T12:00:00Z", now()).unwrap();
    assert_eq!(when_at("2026-11-01T14:00:00+02:00", now()).unwrap(), utc);
    assert_eq!(when_at("2026-11-01T07:00:00-05:00", now()).unwrap(), utc);
    assert_eq!(when_at("2026-11-01T12:00:00.5Z", now()).unwrap(), utc + SECOND / 2);
}

#[test]
fn today_and_yesterday_are_local_midnights_whatever_the_hour() {
    let late = Local.with_ymd_and_hms(2026, 3, 1, 23, 59, 59).unwrap();
    assert_eq!(when_at("today", late).unwrap(), ns(Local.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap()));
    assert_eq!(
        when_at("yesterday", late).unwrap(),
        ns(Local.with_ymd_and_hms(2026, 2, 28, 0, 0, 0).unwrap()),
        "across the end of a month"
    );
}

#[test]
fn impossible_dates_are_errors() {
    for bad in ["2026-02-30", "2026-13-01", "2026-11-01 25:00", "01/11/2026", "tomorrow", ""] {
        assert!(when_at(bad, now()).is_err(), "{bad:?}");
    }
}

#[test]
fn mtime_comparisons_take_every_time_form() {
    let cmp = parse_time_cmp("<2026-01-01").unwrap();
    assert_eq!(cmp.len(), 1);
    assert_eq!(cmp[0].0, CmpOp::Lt);
    assert_eq!(cmp[0].1, ns(Local.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()));
    let range = parse_time_cmp("2026-01-01..2026-02-01").unwrap();
    assert_eq!(range.iter().map(|(op, _)| *op).collect::<Vec<_>>(), [CmpOp::Ge, CmpOp::Le]);
    assert!(range[0].1 < range[1].1);
    assert!(parse_time_cmp(">soon").unwrap_err().contains("\"soon\" is not a time"));
}
