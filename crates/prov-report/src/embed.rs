//! JSON inside `<script type="application/json">`: the HTML parser ends the
//! element at the first `</script` and treats `<!--` specially, whatever the
//! JSON means. serde_json only ever emits `<`, `>` and `&` inside strings,
//! where `\u003c` and friends are the same characters to `JSON.parse`; so
//! escaping those three bytes everywhere keeps the data intact and the
//! element closed only where we close it.

use std::io::{self, Write};

use serde::Serialize;

/// Serialises `value` as JSON that is safe as the content of a script element.
pub(crate) fn write_script_json<T: Serialize>(value: &T, out: &mut dyn Write) -> io::Result<()> {
    let mut escaping = io::BufWriter::with_capacity(64 * 1024, ScriptSafe(out));
    serde_json::to_writer(&mut escaping, value).map_err(io::Error::from)?;
    escaping.flush()
}

/// Rewrites `<`, `>` and `&` as JSON unicode escapes. Byte-wise is sound:
/// in UTF-8 no byte of a multi-byte character is ASCII.
struct ScriptSafe<'a>(&'a mut dyn Write);

impl Write for ScriptSafe<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut plain = 0;
        for (i, &b) in buf.iter().enumerate() {
            let escaped: &[u8] = match b {
                b'<' => b"\\u003c",
                b'>' => b"\\u003e",
                b'&' => b"\\u0026",
                _ => continue,
            };
            self.0.write_all(&buf[plain..i])?;
            self.0.write_all(escaped)?;
            plain = i + 1;
        }
        self.0.write_all(&buf[plain..])?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}
