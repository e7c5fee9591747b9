//! The collector's log: `$XDG_STATE_HOME/prov/collector.log`, one line per
//! problem (a record spooled or lost, a collector that stopped early). The
//! collector is detached from any terminal, so this is where `prov doctor`
//! and the user find out why a record is late or missing. The writer keeps
//! it: the collector opens nothing in the user's directories and sends its
//! lines here.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::Mutex;

/// Lines longer than this are cut: the log must stay readable and small.
const MAX_LINE: usize = 600;
/// Past this size the log starts over (it is for the latest problems).
const MAX_BYTES: u64 = 1 << 20;

/// Set by each record's `Setup`: an observation that serves several
/// records follows an edited configuration.
static LOG: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Where lines go, once the settings are known (at `Setup`).
pub fn set_path(path: PathBuf) {
    *LOG.lock().unwrap_or_else(|e| e.into_inner()) = Some(path);
}

/// Appends one line (to stderr before the log's place is known); failures
/// are ignored (logging must never cost a record).
pub fn line(what: &str) {
    let Some(path) = LOG.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
        eprintln!("prov-writer: {what}");
        return;
    };
    let mut text: String = what.chars().filter(|c| *c != '\n').collect();
    if text.len() > MAX_LINE {
        let mut end = MAX_LINE;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    // The first problem may come before anything else made the state
    // directory (the spool is created after the line saying why).
    if let Some(dir) = path.parent() {
        let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
    }
    let fresh = std::fs::metadata(&path).is_ok_and(|m| m.len() > MAX_BYTES);
    let file =
        std::fs::OpenOptions::new().create(true).append(!fresh).write(true).truncate(fresh).mode(0o600).open(&path);
    if let Ok(mut f) = file {
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let _ = writeln!(f, "{now} pid {} {text}", std::process::id());
    }
}

/// Held by the tests that set the log's place (one per process).
#[cfg(test)]
pub(crate) static PLACE_IN_USE: Mutex<()> = Mutex::new(());

#[cfg(test)]
mod tests {
    #[test]
    fn lines_are_appended_one_per_problem() {
        let _place = super::PLACE_IN_USE.lock().unwrap_or_else(|e| e.into_inner());
        let dir = std::env::temp_dir().join(format!("prov-collector-log-{}", std::process::id()));
        // The state directory need not exist yet.
        let path = dir.join("state/collector.log");
        super::set_path(path.clone());
        super::line("first\nproblem");
        super::line("second");
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].ends_with("firstproblem") && lines[1].ends_with("second"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
