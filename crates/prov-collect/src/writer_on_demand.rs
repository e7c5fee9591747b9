//! The writer as an observation needs it: running while records are made,
//! let go once the observation has waited for its next record for
//! `WRITER_IDLE`, and started again by the next message. An idle traced
//! shell holds an observation ready for its next line; without its writer
//! it keeps three processes instead of four, and three threads fewer (the
//! writer's two and the collector's sender to it), which is what `ulimit
//! -u` counts.

use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use prov_model::ArchivedRead;
use prov_protocol::writer_pipe::{SyncReport, ToWriter};

use crate::writer_link::{WriterError, WriterLink};

/// How long an observation waiting for its next record keeps its writer.
/// Lines typed within it find the writer running; after it, the writer
/// starts again with the next record's setup, while its command runs (a
/// process start and the database's open: a few milliseconds of CPU, which
/// no command waits for).
pub const WRITER_IDLE: Duration = Duration::from_secs(30);

pub struct OnDemandWriter {
    link: Option<WriterLink>,
    start: fn() -> WriterLink,
    last_used: Instant,
    /// CPU time of the writers let go, as they last reported it: the
    /// observation's CPU figures count every writer it had.
    retired_cpu_ns: u64,
    /// The running writer's CPU time at its last report.
    running_cpu_ns: u64,
    /// The record's `Setup` while one is in effect (sent, and no `Close`
    /// since): an observation given its next record's settings at once (the
    /// shell's) waits with them, and a writer started again gets them first.
    setup: Option<ToWriter>,
}

impl OnDemandWriter {
    /// Starts the writer now, so that the first command does not wait for it.
    pub fn start() -> OnDemandWriter {
        OnDemandWriter::start_with(WriterLink::start)
    }

    fn start_with(start: fn() -> WriterLink) -> OnDemandWriter {
        OnDemandWriter {
            link: Some(start()),
            start,
            last_used: Instant::now(),
            retired_cpu_ns: 0,
            running_cpu_ns: 0,
            setup: None,
        }
    }

    fn link(&mut self) -> &WriterLink {
        self.last_used = Instant::now();
        let (start, setup) = (self.start, &self.setup);
        self.link.get_or_insert_with(|| {
            let link = start();
            if let Some(setup) = setup {
                link.send(setup.clone());
            }
            link
        })
    }

    pub fn send(&mut self, msg: ToWriter) {
        match &msg {
            ToWriter::Setup { .. } => self.setup = Some(msg.clone()),
            ToWriter::Close => {
                self.setup = None;
                // A writer let go has nothing open to close.
                if self.link.is_none() {
                    return;
                }
            }
            _ => {}
        }
        self.link().send(msg);
    }

    pub fn send_archived(&mut self, files: Vec<ArchivedRead>) {
        self.link().send_archived(files);
    }

    pub fn log(&mut self, line: String) {
        self.link().log(line);
    }

    /// Waits until everything sent before is stored or spooled. The CPU time
    /// reported counts the writers let go before this one.
    pub fn sync(&mut self) -> Result<SyncReport, WriterError> {
        let mut report = self.link().sync()?;
        self.running_cpu_ns = report.cpu_ns;
        report.cpu_ns += self.retired_cpu_ns;
        Ok(report)
    }

    /// See [`WriterLink::exit_watch`]; None while no writer runs.
    pub fn exit_watch(&self) -> Option<BorrowedFd<'_>> {
        self.link.as_ref().and_then(WriterLink::exit_watch)
    }

    /// How long until the writer is let go, when the observation waits for
    /// its next record to begin (`waiting`); None when it is kept or not
    /// running.
    pub fn idle_left(&self, waiting: bool) -> Option<Duration> {
        (waiting && self.link.is_some()).then(|| WRITER_IDLE.saturating_sub(self.last_used.elapsed()))
    }

    /// Lets the writer go if it has been idle for `WRITER_IDLE` while the
    /// observation waits for its next record: it stores what it got (the
    /// last record was synced before) and exits, and is not waited for.
    pub fn retire_if_idle(&mut self, waiting: bool) {
        if self.idle_left(waiting).is_some_and(|left| left.is_zero()) {
            if let Some(link) = self.link.take() {
                link.let_go();
            }
            self.retired_cpu_ns += std::mem::take(&mut self.running_cpu_ns);
        }
    }

    #[cfg(test)]
    fn is_running(&self) -> bool {
        self.link.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat_writer() -> WriterLink {
        WriterLink::start_script("exec cat >/dev/null")
    }

    #[test]
    fn a_writer_is_let_go_only_when_idle_and_waiting_and_comes_back_on_use() {
        let mut w = OnDemandWriter::start_with(cat_writer);
        assert!(w.is_running());
        // Not idle long enough: kept.
        w.retire_if_idle(true);
        assert!(w.is_running());
        // Idle long enough, but a record is being made: kept.
        w.last_used -= WRITER_IDLE;
        w.retire_if_idle(false);
        assert!(w.is_running());
        assert_eq!(w.idle_left(false), None);
        assert_eq!(w.idle_left(true), Some(Duration::ZERO));
        w.retire_if_idle(true);
        assert!(!w.is_running());
        assert!(w.exit_watch().is_none());
        assert_eq!(w.idle_left(true), None, "nothing to let go");
        // The next message starts one again.
        w.log("a line".into());
        assert!(w.is_running());
        assert!(w.idle_left(true).is_some_and(|left| left > WRITER_IDLE / 2));
    }

    /// A writer started again gets the settings of the record waiting to
    /// begin before anything else; none after the record was closed.
    #[test]
    fn a_writer_started_again_gets_the_waiting_records_setup_first() {
        let dir = std::env::temp_dir().join(format!("prov-on-demand-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let setup = ToWriter::Setup { database: dir.join("prov.db"), spool_dir: dir.join("spool"), busy_timeout_ms: 7 };
        let retire = |w: &mut OnDemandWriter| {
            w.last_used -= WRITER_IDLE;
            w.retire_if_idle(true);
            assert!(!w.is_running());
        };
        // Each stand-in writes what it gets to a file of its own: let go,
        // they finish in any order.
        fn recording() -> WriterLink {
            let dir = std::env::temp_dir().join(format!("prov-on-demand-{}", std::process::id()));
            WriterLink::start_script(&format!("cat > {}/frames.$$", dir.display()))
        }
        let mut w = OnDemandWriter::start_with(recording);
        w.send(setup.clone());
        retire(&mut w);
        w.log("after a restart".into());
        retire(&mut w);
        w.send(ToWriter::Close);
        retire(&mut w);
        w.log("closed".into());
        drop(w);
        // Frames are postcard: the path's bytes are there as they are.
        let streams = || -> Vec<String> {
            let mut found: Vec<String> = std::fs::read_dir(&dir)
                .map(|d| {
                    d.flatten()
                        .map(|e| String::from_utf8_lossy(&std::fs::read(e.path()).unwrap_or_default()).into_owned())
                        .collect()
                })
                .unwrap_or_default();
            found.sort_by_key(|t| (t.contains("closed"), t.contains("after a restart")));
            found
        };
        // The first writer got the setup; the second the setup again, then
        // the line; none was started for the close; the third, after the
        // record was closed, got no setup.
        let expected = |s: &[String]| {
            s.len() == 3
                && s[0].matches("prov.db").count() == 1
                && s[1].find("prov.db").is_some_and(|at| s[1].find("after a restart").is_some_and(|line| at < line))
                && s[2].contains("closed")
                && !s[2].contains("prov.db")
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !expected(&streams()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(expected(&streams()), "{:?}", streams());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
