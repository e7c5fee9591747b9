//! `prov __docs DIR`: the man pages and shell completions, generated from
//! the clap definitions of main.rs so they never drift from `--help`.
//! packaging/install.sh runs it with DIR = PREFIX/share; a subcommand
//! rather than a build script, because the pages then come from the very
//! binary installed, and building prov writes nothing outside target/.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

/// Writes DIR/man/man1/prov*.1 (one page per subcommand) and the
/// completions where bash-completion, zsh and fish look for them under a
/// share/ directory.
pub fn write_all<C: CommandFactory>(dir: &Path) -> Result<ExitCode> {
    let man = dir.join("man/man1");
    std::fs::create_dir_all(&man).with_context(|| format!("cannot create {}", man.display()))?;
    clap_mangen::generate_to(C::command(), &man)
        .with_context(|| format!("cannot write man pages to {}", man.display()))?;
    complete_pages(&man)?;
    for (shell, place) in [
        (Shell::Bash, "bash-completion/completions/prov"),
        (Shell::Zsh, "zsh/site-functions/_prov"),
        (Shell::Fish, "fish/vendor_completions.d/prov.fish"),
    ] {
        let path = dir.join(place);
        let parent = path.parent().expect("a file below DIR");
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut C::command(), "prov", &mut script);
        std::fs::write(&path, script).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What every page ends with: where to read on.
const SEE_ALSO: &str = ".SH \"SEE ALSO\"\n\\fBprov\\fR(1), \\fBprov\\-query\\fR(1), \\fBprov\\-doctor\\fR(1), \
\\fBbash\\fR(1), \\fBzsh\\fR(1); the README and the guide, PREFIX/share/doc/prov/README.md and \
PREFIX/share/doc/prov/docs/guide.md\n";

/// The sections of prov(1) that clap has no place for.
const MAIN_PAGE_SECTIONS: &str = r#".SH "EXIT STATUS"
0 when prov did what was asked or found an answer; 1 when it found
nothing (no records yet, nothing matched, no recorded writer), saying why
in one line on standard error, or when a check failed; 2 for a usage error
(an unknown option or a bad value); 3 when \fBprov rerun \-\-check\fR or
\fBprov diff\fR found a difference. \fBprov run\fR exits with its
command's status.
.SH EXAMPLES
.TP
\fBeval "$(prov init bash)"\fR
last in ~/.bashrc (or \fBprov init zsh\fR in ~/.zshrc): record every command typed
.TP
\fBprov query history \-n 5\fR
the last five commands, with their status and directory
.TP
\fBprov query wrote results.csv\fR
the commands that wrote results.csv, newest first
.TP
\fBprov query lineage results.csv\fR
where results.csv came from, as a tree
.TP
\fBprov rerun \-\-lineage results.csv \-\-check\fR
rebuild results.csv in a sandbox and say whether every output is identical
.TP
\fBprov report \-o journal.html\fR
the journal as one HTML page
.TP
\fBprov doctor\fR
whether tracing works here, and why not
.SH FILES
.TP
\fI$XDG_CONFIG_HOME/prov/config.toml\fR (~/.config/prov/config.toml)
the configuration; \fBprov config \-\-default\fR prints every key
.TP
\fI$XDG_DATA_HOME/prov/prov.db\fR (~/.local/share/prov/prov.db)
the journal, an SQLite database
.TP
\fI$XDG_STATE_HOME/prov/\fR (~/.local/state/prov/)
the spool of records not yet in the journal, and collector.log
.TP
\fIPREFIX/libexec/prov/prov\-helper\fR
the setuid helper that starts each observation
.TP
\fIPREFIX/lib/prov/libprov_preload.so\fR
the shim the shell integration loads into the interactive shell
.SH ENVIRONMENT
.TP
\fBXDG_CONFIG_HOME\fR, \fBXDG_DATA_HOME\fR, \fBXDG_STATE_HOME\fR
where the files above are
.TP
\fBPAGER\fR
the pager for output on a terminal (default: less \-FRX)
.TP
\fBNO_COLOR\fR
no colour, unless \-\-color says otherwise
.TP
\fBLC_ALL\fR, \fBLC_CTYPE\fR, \fBLANG\fR
a character set other than UTF\-8 draws trees and marks in ASCII
.TP
\fBPROV_HELPER\fR
the helper to use instead of the installed one
"#;

/// Adds what the generated pages lack: the main page's exit status,
/// examples, files and environment, and on every page where to read on.
fn complete_pages(man: &Path) -> Result<()> {
    for entry in std::fs::read_dir(man).with_context(|| format!("cannot read {}", man.display()))? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "1") {
            continue;
        }
        let mut page = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        if path.file_name().is_some_and(|n| n == "prov.1") {
            page.push_str(MAIN_PAGE_SECTIONS);
        }
        page.push_str(SEE_ALSO);
        std::fs::write(&path, page).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
