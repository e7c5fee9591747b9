//! The few non-ASCII signs prov's text output draws with, and the ASCII it
//! falls back to where the locale's character set is not UTF-8 (as `tree`
//! does): in a C or POSIX locale, `less` shows UTF-8 as `<E2><94><94>`.

/// The signs for one character set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Glyphs {
    /// A tree branch with more siblings below it.
    pub tee: &'static str,
    /// The last branch.
    pub elbow: &'static str,
    /// The line continuing past a branch to its later siblings.
    pub pipe: &'static str,
    /// Something left out.
    pub ellipsis: &'static str,
    /// A line break of a command typed on several lines, shown on one.
    pub line_break: &'static str,
}

pub const UNICODE: Glyphs =
    Glyphs { tee: "├── ", elbow: "└── ", pipe: "│   ", ellipsis: "…", line_break: "↵" };

pub const ASCII: Glyphs = Glyphs { tee: "|-- ", elbow: "`-- ", pipe: "|   ", ellipsis: "...", line_break: "^J" };

impl Default for Glyphs {
    fn default() -> Self {
        UNICODE
    }
}

impl Glyphs {
    /// The signs the current locale can show: its character set is that of
    /// the first of LC_ALL, LC_CTYPE and LANG that is set and not empty, as
    /// the C library decides it; none is the C locale, ASCII.
    pub fn for_locale() -> Glyphs {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        let locale = var("LC_ALL").or_else(|| var("LC_CTYPE")).or_else(|| var("LANG"));
        Self::for_locale_named(locale.as_deref().map(|l| l.to_string_lossy()).as_deref())
    }

    /// The signs for a locale name such as `en_GB.UTF-8`, `C.utf8` or `C`.
    pub fn for_locale_named(locale: Option<&str>) -> Glyphs {
        let charset = locale.and_then(|l| l.split_once('.')).map(|(_, rest)| rest.split('@').next().unwrap_or(rest));
        let utf8 = charset.is_some_and(|c| {
            let c = c.to_ascii_lowercase();
            c == "utf-8" || c == "utf8"
        });
        if utf8 {
            UNICODE
        } else {
            ASCII
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_utf8_locale_gets_unicode_and_any_other_ascii() {
        for utf8 in ["C.UTF-8", "en_GB.UTF-8", "de_DE.utf8", "sr_RS.UTF-8@latin"] {
            assert_eq!(Glyphs::for_locale_named(Some(utf8)), UNICODE, "{utf8}");
        }
        for other in ["C", "POSIX", "en_US.ISO-8859-1", "en_US", "utf8"] {
            assert_eq!(Glyphs::for_locale_named(Some(other)), ASCII, "{other}");
        }
        assert_eq!(Glyphs::for_locale_named(None), ASCII, "no locale is the C locale");
    }

    #[test]
    fn ascii_signs_are_ascii_and_as_wide_as_the_unicode_ones() {
        for (a, u) in [(ASCII.tee, UNICODE.tee), (ASCII.elbow, UNICODE.elbow), (ASCII.pipe, UNICODE.pipe)] {
            assert!(a.is_ascii(), "{a}");
            assert_eq!(a.chars().count(), u.chars().count(), "{a:?} for {u:?}");
        }
        assert!(ASCII.ellipsis.is_ascii() && ASCII.line_break.is_ascii());
    }
}
