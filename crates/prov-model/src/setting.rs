//! Numbers prov takes from its environment. Each has a range: a value out
//! of it, or no number at all, is named in one line and the default is
//! used, so that a typo in a variable never stops the user's command.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

/// Longest part of a bad value a message shows: a megabyte of it would
/// bury the message.
const SHOWN_CHARS: usize = 40;

/// Seconds (a decimal number, `0.5` allowed) from environment variable
/// `name`: `default` when unset, Err with the warning to show when the value
/// is no number of seconds from 0 to `max` (the default is used then).
pub fn seconds_from_env(name: &str, default: Duration, max: Duration) -> Result<Duration, String> {
    let Some(raw) = std::env::var_os(name) else { return Ok(default) };
    seconds(&raw, max).ok_or_else(|| {
        format!(
            "{name}={} is not a number of seconds from 0 to {}; using {}",
            shown_value(raw.as_bytes()),
            max.as_secs(),
            seconds_text(default)
        )
    })
}

fn seconds(raw: &OsStr, max: Duration) -> Option<Duration> {
    let secs = raw.to_str()?.trim().parse::<f64>().ok()?;
    // NaN and the infinities fail the range check too.
    (0.0..=max.as_secs_f64()).contains(&secs).then(|| Duration::from_secs_f64(secs))
}

fn seconds_text(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// A value as a message quotes it: escaped for the terminal (see
/// [`crate::escape`]) and cut after [`SHOWN_CHARS`] characters.
pub fn shown_value(bytes: &[u8]) -> String {
    let escaped = crate::escape::escape(bytes);
    match escaped.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}… ({} bytes)", &escaped[..cut], bytes.len()),
        None => escaped,
    }
}

/// `text` cut after `chars` characters, with `…` where it was cut.
pub fn shown_text(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Duration = Duration::from_secs(86_400);

    #[test]
    fn seconds_in_range_are_taken() {
        assert_eq!(seconds(OsStr::new("0"), MAX), Some(Duration::ZERO));
        assert_eq!(seconds(OsStr::new(" 1.5 "), MAX), Some(Duration::from_millis(1500)));
        assert_eq!(seconds(OsStr::new("86400"), MAX), Some(MAX));
    }

    #[test]
    fn values_out_of_range_or_no_number_are_refused() {
        for bad in ["1e300", "86401", "-1", "NaN", "inf", "-inf", "", "ten", "1e-400x"] {
            assert_eq!(seconds(OsStr::new(bad), MAX), None, "{bad}");
        }
    }

    #[test]
    fn a_long_value_is_cut_and_a_control_escaped() {
        let long = vec![b'9'; 1 << 20];
        let shown = shown_value(&long);
        assert_eq!(shown, format!("{}… (1048576 bytes)", "9".repeat(SHOWN_CHARS)));
        assert_eq!(shown_value(b"a\x1b[2Jb"), "a\\e[2Jb");
    }
}
