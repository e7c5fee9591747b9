//! `prov doctor`: whether a person can reach this installation by name:
//! `prov` on PATH, `man prov`, and completion in their shell. A `--prefix`
//! outside the usual places installs all three where nothing looks.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::finding::Finding;

/// What the checks look at, read from the environment by [`Reach::read`].
pub struct Reach {
    /// This installation's prefix (DIR/bin/prov).
    pub prefix: PathBuf,
    /// The `prov` users run.
    pub prov: PathBuf,
    /// "bash" or "zsh".
    pub shell: &'static str,
    /// The user's rc file and its text.
    pub rc: PathBuf,
    pub rc_text: String,
}

/// The findings, in the order a person needs them.
pub fn assess(reach: &Reach) -> Vec<Finding> {
    let mut found = vec![on_path(reach)];
    found.extend(man_page(reach));
    found.extend(completion(reach));
    found
}

fn shown(path: &Path) -> String {
    prov_model::escape::escape(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()))
}

/// The first `prov` a shell with this PATH runs.
fn first_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join("prov")).find(|p| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

fn on_path(reach: &Reach) -> Finding {
    let bin = reach.prefix.join("bin");
    let add = format!("add  export PATH=\"{}:$PATH\"  to {} before the prov line", shown(&bin), shown(&reach.rc));
    match first_on_path() {
        Some(found) if same_file(&found, &reach.prov) => Finding::ok(format!("prov is on PATH ({})", shown(&found))),
        Some(other) => Finding::warn(
            format!("`prov` on PATH is {}, not this installation's {}", shown(&other), shown(&reach.prov)),
            add,
        ),
        None => Finding::warn(format!("{} is not on PATH: typing `prov` finds nothing", shown(&bin)), add),
    }
}

/// What `man -w prov` finds, as man itself searches (MANPATH, or the man
/// directories beside PATH's); None without man.
fn man_finds() -> Option<Option<PathBuf>> {
    let out = Command::new("man").args(["-w", "prov"]).stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    let first = String::from_utf8_lossy(&out.stdout).lines().next().map(|l| PathBuf::from(l.trim()));
    Some(first.filter(|_| out.status.success()))
}

fn man_page(reach: &Reach) -> Option<Finding> {
    let page = reach.prefix.join("share/man/man1/prov.1");
    if !page.is_file() {
        return None;
    }
    let found = man_finds()?;
    let dir = reach.prefix.join("share/man");
    let add = format!("add  export MANPATH=\"{}:$MANPATH\"  to {}", shown(&dir), shown(&reach.rc));
    Some(match found {
        Some(p) if same_file(&p, &page) => Finding::ok(format!("man prov shows {}", shown(&page))),
        Some(p) => {
            Finding::warn(format!("man prov shows {}, not this installation's {}", shown(&p), shown(&page)), add)
        }
        None => Finding::warn(format!("man prov finds no page: {} is not on the man path", shown(&dir)), add),
    })
}

/// Where bash-completion looks (its XDG_DATA_DIRS places), or a line of
/// the rc file that loads the script itself.
fn completion(reach: &Reach) -> Option<Finding> {
    let (script, looked_up, remedy) = match reach.shell {
        "zsh" => {
            let dir = reach.prefix.join("share/zsh/site-functions");
            let in_fpath = zsh_default_fpath().iter().any(|d| same_file(d, &dir));
            let remedy = format!("add  fpath=({} $fpath)  to {} before compinit", shown(&dir), shown(&reach.rc));
            (dir.join("_prov"), in_fpath, remedy)
        }
        _ => {
            let script = reach.prefix.join("share/bash-completion/completions/prov");
            let share = reach.prefix.join("share");
            let dirs = std::env::var("XDG_DATA_DIRS")
                .ok()
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| "/usr/local/share:/usr/share".into());
            let loader = Path::new("/usr/share/bash-completion/bash_completion").is_file();
            let in_dirs = loader && std::env::split_paths(&dirs).any(|d| same_file(&d, &share));
            let remedy = format!("add  . {}  to {}", shown(&script), shown(&reach.rc));
            (script, in_dirs, remedy)
        }
    };
    if !script.is_file() {
        return None;
    }
    let named = |p: &Path| reach.rc_text.lines().any(|l| !l.trim_start().starts_with('#') && l.contains(&*shown(p)));
    let loaded = looked_up || named(&script) || script.parent().is_some_and(named);
    Some(if loaded {
        Finding::ok(format!("{} completes prov ({})", reach.shell, shown(&script)))
    } else {
        Finding::warn(format!("{} does not find prov's completion {}", reach.shell, shown(&script)), remedy)
    })
}

/// zsh's fpath before any rc file.
fn zsh_default_fpath() -> Vec<PathBuf> {
    let Ok(out) = Command::new("zsh").args(["-fc", "print -rl -- $fpath"]).stdin(Stdio::null()).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout).lines().map(PathBuf::from).collect()
}
