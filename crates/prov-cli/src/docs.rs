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
