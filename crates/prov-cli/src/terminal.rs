//! Output meant for a person at a terminal: colour (`--color`, `NO_COLOR`)
//! and a pager (`$PAGER`, else `less -FRX`), both only when standard output
//! is a terminal, as git does. Into a pipe or file prov writes plain text.

use std::io::{self, IsTerminal, Write};
use std::process::{Child, Command, Stdio};

/// `--color`: when to colour the output.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ColorChoice {
    /// On a terminal, unless NO_COLOR is set or TERM is dumb.
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// Whether to colour standard output. The flag wins over NO_COLOR
    /// (no-color.org: an explicit option overrides it).
    pub fn enabled(self) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
                let dumb = std::env::var_os("TERM").is_none_or(|t| t == "dumb");
                !no_color && !dumb && io::stdout().is_terminal()
            }
        }
    }
}

/// What a piece of text means, and so its colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    Good,
    Bad,
    /// Not known or not finished: neither good nor bad.
    Unsure,
    Id,
    Read,
    Write,
    Faint,
}

/// Paints text when colour is on, and draws with the signs the locale can
/// show.
#[derive(Clone, Copy, Debug, Default)]
pub struct Paint {
    pub on: bool,
    pub glyphs: prov_export::glyphs::Glyphs,
}

impl Paint {
    pub fn paint(self, tone: Tone, text: &str) -> String {
        if !self.on {
            return text.to_owned();
        }
        let code = match tone {
            Tone::Good => "32",
            Tone::Bad => "1;31",
            Tone::Unsure => "33",
            Tone::Id => "33",
            Tone::Read => "36",
            Tone::Write => "35",
            Tone::Faint => "2",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }
}

/// Standard output, through the pager when it is a terminal.
pub struct Pager {
    child: Option<Child>,
    out: Box<dyn Write>,
}

impl Pager {
    /// Starts `$PROV_PAGER`, else `$PAGER`, else `less -FRX` (through `sh
    /// -c`, as git runs it) when `wanted` and standard output is a
    /// terminal that is not dumb. An empty value or `cat` means no pager; a pager that
    /// cannot start means plain standard output.
    pub fn start(wanted: bool) -> Pager {
        let plain = || Pager { child: None, out: Box::new(io::BufWriter::new(io::stdout())) };
        // A dumb terminal (TERM=dumb or unset: an editor's shell buffer, a
        // pty driven by a program) cannot run a full-screen pager.
        let dumb = std::env::var_os("TERM").is_none_or(|t| t == "dumb");
        if !wanted || dumb || !io::stdout().is_terminal() {
            return plain();
        }
        let command = match ["PROV_PAGER", "PAGER"].into_iter().find_map(|k| std::env::var(k).ok()) {
            Some(command) => command,
            // Without less (a minimal container) the text goes straight
            // out rather than into a shell saying "less: not found".
            None if on_path("less") => "less -FRX".to_owned(),
            None => return plain(),
        };
        if command.trim().is_empty() || command.trim() == "cat" {
            return plain();
        }
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(&command).stdin(Stdio::piped());
        // What git sets: quit on one screen, keep colours, no screen clearing.
        if std::env::var_os("LESS").is_none() {
            cmd.env("LESS", "FRX");
        }
        match cmd.spawn() {
            Ok(mut child) => {
                let stdin = child.stdin.take().expect("piped stdin");
                Pager { child: Some(child), out: Box::new(io::BufWriter::new(stdin)) }
            }
            Err(_) => plain(),
        }
    }

    /// Flushes, and waits until the person has left the pager.
    pub fn finish(mut self) -> io::Result<()> {
        let flushed = self.out.flush();
        // Closing its input tells the pager the text is complete.
        self.out = Box::new(io::sink());
        if let Some(mut child) = self.child.take() {
            child.wait()?;
            // Quitting the pager early is no error of ours.
            if let Err(e) = &flushed {
                if e.kind() == io::ErrorKind::BrokenPipe {
                    return Ok(());
                }
            }
        }
        flushed
    }
}

/// Whether `program` is an executable file in a directory of $PATH.
fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program)).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

impl Write for Pager {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl Drop for Pager {
    /// On an early return (an error), the pager still gets its end of input
    /// and is waited for, so the terminal is left as it was.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = self.out.flush();
            self.out = Box::new(io::sink());
            let _ = child.wait();
        }
    }
}
