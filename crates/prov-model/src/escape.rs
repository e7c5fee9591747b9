//! Recorded bytes shown to people. Paths, command texts, host and user names
//! come from the recording (another user may have named a file), so human
//! output must never hand a terminal a control sequence: one that clears the
//! screen, sets the window title or reorders the text around it.
//!
//! Shown C-like, as `ls` quotes names: `\e` `\a` `\b` `\t` `\n` `\r` for
//! those controls, `\xNN` for the other C0 controls, DEL and bytes that are
//! not UTF-8, `\u{NN}` for the C1 controls (U+0080 to U+009F) and the
//! bidirectional overrides and isolates (U+202A to U+202E, U+2066 to U+2069,
//! "Trojan Source"). In names (paths, hosts, users, sessions) a backslash is
//! shown as `\\`, so every shown name stands for exactly one byte string.
//! Command texts keep their backslashes and line breaks as typed: they are
//! shell code full of `\n` and `'\''`, which a reader copies back. JSON and
//! the exports are not escaped: they have their own quoting and give the
//! exact bytes.

/// A name (path, host, user, session) on one line, everything a terminal
/// would act on escaped, a backslash doubled.
pub fn escape(bytes: &[u8]) -> String {
    escape_with(bytes, Keep { line_breaks: false, backslashes: false })
}

/// A command text: what a terminal would act on escaped, but line breaks
/// and backslashes as typed (a command typed on several lines is shown on
/// several lines).
pub fn escape_text(bytes: &[u8]) -> String {
    escape_with(bytes, Keep { line_breaks: true, backslashes: true })
}

/// For a message made of prov's own words and parts already [`escape`]d
/// (an error on its way to the terminal): the controls are escaped, the
/// backslashes are left as they are, since they are the parts' escapes.
pub fn escape_controls(text: &str) -> String {
    escape_with(text.as_bytes(), Keep { line_breaks: false, backslashes: true })
}

/// What is shown as it is, besides the characters that are always safe.
#[derive(Clone, Copy)]
struct Keep {
    line_breaks: bool,
    backslashes: bool,
}

fn escape_with(bytes: &[u8], keep: Keep) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for ch in chunk.valid().chars() {
            push_char(&mut out, ch, keep);
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

fn push_char(out: &mut String, ch: char, keep: Keep) {
    match ch {
        '\n' if keep.line_breaks => out.push('\n'),
        '\\' if keep.backslashes => out.push('\\'),
        '\\' => out.push_str("\\\\"),
        '\x1b' => out.push_str("\\e"),
        '\x07' => out.push_str("\\a"),
        '\x08' => out.push_str("\\b"),
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\0'..='\x1f' | '\x7f' => out.push_str(&format!("\\x{:02x}", ch as u32)),
        '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
            out.push_str(&format!("\\u{{{:x}}}", ch as u32))
        }
        c => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_are_shown_escaped() {
        let hostile = b"data\x1b[2J\x1b[1;1Hprov: all clean\x1b]0;pwned\x07.csv";
        assert_eq!(escape(hostile), r"data\e[2J\e[1;1Hprov: all clean\e]0;pwned\a.csv");
        assert_eq!(escape(b"a\tb\nc\rd\x08\x00\x7f"), r"a\tb\nc\rd\b\x00\x7f");
    }

    #[test]
    fn c1_controls_bidi_overrides_and_invalid_bytes_are_escaped() {
        assert_eq!(escape("x\u{9b}31m\u{85}".as_bytes()), r"x\u{9b}31m\u{85}");
        assert_eq!(escape("ab\u{202e}cd\u{2066}\u{2069}".as_bytes()), r"ab\u{202e}cd\u{2066}\u{2069}");
        assert_eq!(escape(b"r\xffn\x9b.sh"), r"r\xffn\x9b.sh");
    }

    #[test]
    fn ordinary_text_is_unchanged_and_backslashes_are_doubled() {
        assert_eq!(escape("/home/u/café — 数据.csv".as_bytes()), "/home/u/café — 数据.csv");
        assert_eq!(escape(br"C:\x1b"), r"C:\\x1b", "a literal backslash cannot pass for an escape");
    }

    #[test]
    fn command_texts_keep_their_lines_and_backslashes() {
        assert_eq!(escape_text(b"for f in *\ndo \x1b[2Jecho\ndone"), "for f in *\ndo \\e[2Jecho\ndone");
        assert_eq!(escape_text(br"printf 'a\n' | sed 's/\./x/'"), r"printf 'a\n' | sed 's/\./x/'");
        assert_eq!(escape_text(b"x\r\xff\xe2\x80\xae"), r"x\r\xff\u{202e}");
        assert_eq!(escape_controls("prov: cannot open /a\\\\b\n\x1b"), "prov: cannot open /a\\\\b\\n\\e");
    }

    #[test]
    fn nothing_below_space_survives() {
        let all: Vec<u8> = (0..=255).collect();
        let shown = escape(&all);
        assert!(shown.bytes().all(|b| b >= 0x20 && b != 0x7f), "{shown}");
        assert!(!shown.chars().any(|c| ('\u{80}'..='\u{9f}').contains(&c)));
    }
}
