//! The writer process and the pipe to it. prov-writer (installed next to the
//! collector) owns the user's database, spool and collector log; this
//! process keeps the fanotify group and every event's file, so crafted
//! content in those user-writable files can never reach them.
//!
//! A sender thread encodes the messages and writes the frames: the reader
//! thread hands them over without waiting (an unbounded channel, as before
//! the split), so it never blocks on SQLite; only `sync` waits, for the
//! writer's reply. A writer that dies (the user may kill it: it is theirs)
//! costs the rest of the record, never a hang: every later message is
//! dropped and every `sync` answers why.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;

use prov_model::ArchivedRead;
use prov_protocol::writer_pipe::{
    decode_reply, read_frame, write_frame, FrameError, SyncReport, ToWriter, MAX_ARCHIVED_FILE, MAX_FRAME, MAX_REPLY,
};

/// The writer's file name, next to the collector's.
const WRITER: &str = "prov-writer";
/// The pipe's buffer (the most an unprivileged process may ask for by
/// default): a batch of events goes through in one or two writes.
const PIPE_BYTES: i32 = 1 << 20;

#[derive(Debug, Clone, thiserror::Error)]
pub enum WriterError {
    #[error("cannot start {WRITER}: {0}")]
    Start(String),
    #[error("the database writer stopped ({0})")]
    Stopped(String),
}

// Frames are nearly all of the channel's traffic and a Sync is rare:
// boxing the frame would add an allocation to every message to save
// space in the rare one.
#[allow(clippy::large_enum_variant)]
enum Outgoing {
    Frame(ToWriter),
    Sync(mpsc::Sender<Result<SyncReport, WriterError>>),
}

pub struct WriterLink {
    tx: Option<mpsc::Sender<Outgoing>>,
    sender: Option<JoinHandle<()>>,
    /// Our copy of the writer's reply pipe: it hangs up when the writer
    /// exits (see [`WriterLink::exit_watch`]).
    exit_watch: Option<OwnedFd>,
}

impl WriterLink {
    /// Starts prov-writer. When it cannot start, the link still works: what
    /// is sent is dropped and `sync` says why.
    pub fn start() -> WriterLink {
        WriterLink::start_program(writer_path())
    }

    fn start_program(program: io::Result<Command>) -> WriterLink {
        let pipe = program.and_then(spawn).map_err(|e| WriterError::Start(e.to_string()));
        if let Err(e) = &pipe {
            eprintln!("prov-collector: {e}; this record is lost");
        }
        let exit_watch = pipe.as_ref().ok().and_then(|(_, _, stdout)| stdout.as_fd().try_clone_to_owned().ok());
        let (tx, rx) = mpsc::channel();
        // Where no thread can be started (RLIMIT_NPROC), the record is lost
        // as when the writer cannot start: said once, and no abort.
        match std::thread::Builder::new().name("writer-link".into()).spawn(move || pump(rx, pipe)) {
            Ok(sender) => WriterLink { tx: Some(tx), sender: Some(sender), exit_watch },
            Err(e) => {
                eprintln!("prov-collector: cannot start the thread that feeds prov-writer: {e}; this record is lost");
                WriterLink { tx: None, sender: None, exit_watch }
            }
        }
    }

    /// Lets the writer store what it got and exit, without waiting for it
    /// (a stopped writer must not stop the collector): the sender thread
    /// finishes on its own and reaps it.
    pub fn let_go(mut self) {
        drop(self.tx.take());
        drop(self.sender.take());
    }

    /// A stand-in writer for unit tests: a shell script.
    #[cfg(test)]
    pub(crate) fn start_script(text: &str) -> WriterLink {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", text]);
        WriterLink::start_program(Ok(cmd))
    }

    /// A descriptor that polls as hung up (POLLHUP, with no events asked
    /// for) once the writer has exited; None if it never started.
    pub fn exit_watch(&self) -> Option<BorrowedFd<'_>> {
        self.exit_watch.as_ref().map(|fd| fd.as_fd())
    }

    pub fn send(&self, msg: ToWriter) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Outgoing::Frame(msg));
        }
    }

    /// Archived files, in frames of bounded size (the resolver archives no
    /// file larger than one frame holds).
    pub fn send_archived(&self, files: Vec<ArchivedRead>) {
        let mut frame = Vec::new();
        let mut bytes = 0u64;
        for file in files {
            // Generously above the encoded size of the path and fields.
            let size = (file.content.len() + file.path.len() + 64) as u64;
            if !frame.is_empty() && bytes + size > MAX_ARCHIVED_FILE {
                self.send(ToWriter::Archive(std::mem::take(&mut frame)));
                bytes = 0;
            }
            bytes += size;
            frame.push(file);
        }
        if !frame.is_empty() {
            self.send(ToWriter::Archive(frame));
        }
    }

    /// One line for the collector log (on stderr when the writer is gone).
    pub fn log(&self, line: String) {
        self.send(ToWriter::Log(line));
    }

    /// Waits until everything sent before is stored or spooled.
    pub fn sync(&self) -> Result<SyncReport, WriterError> {
        let gone = || WriterError::Stopped("its thread is gone".into());
        let (reply_tx, reply_rx) = mpsc::channel();
        self.tx.as_ref().ok_or_else(gone)?.send(Outgoing::Sync(reply_tx)).map_err(|_| gone())?;
        reply_rx.recv().map_err(|_| gone())?
    }
}

impl Drop for WriterLink {
    /// Lets the writer finish what it got and waits for it to exit.
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(sender) = self.sender.take() {
            let _ = sender.join();
        }
    }
}

/// prov-writer next to our own executable (a root-owned directory the
/// helper checked).
fn writer_path() -> io::Result<Command> {
    let exe = std::fs::read_link("/proc/self/exe")?;
    Ok(Command::new(exe.parent().map_or_else(|| PathBuf::from(WRITER), |dir| dir.join(WRITER))))
}

/// Starts the writer with nothing of ours but the two pipes and stderr: no
/// environment, `/` as working directory, every other descriptor closed.
fn spawn(mut cmd: Command) -> io::Result<(Child, ChildStdin, ChildStdout)> {
    cmd.env_clear().current_dir("/").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    crate::sys::only_stdio_across_exec(&mut cmd);
    let mut child = cmd.spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(io::Error::other("no pipes to the writer"));
    };
    let _ = nix::fcntl::fcntl(&stdin, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_BYTES));
    Ok((child, stdin, stdout))
}

/// The sender thread: frames out, replies in, until the link is dropped.
fn pump(rx: mpsc::Receiver<Outgoing>, started: Result<(Child, ChildStdin, ChildStdout), WriterError>) {
    let (mut child, mut pipe) = match started {
        Ok((child, stdin, stdout)) => (Some(child), Ok((stdin, stdout))),
        Err(e) => (None, Err(e)),
    };
    let mut buf = Vec::new();
    for msg in rx {
        let (stdin, stdout) = match &mut pipe {
            Ok((stdin, stdout)) => (stdin, stdout),
            Err(gone) => {
                answer_without_writer(msg, gone);
                continue;
            }
        };
        let (result, reply) = match msg {
            Outgoing::Frame(frame) => (write_frame(stdin, &frame, MAX_FRAME, &mut buf).map(|()| None), None),
            Outgoing::Sync(reply) => {
                let report = write_frame(stdin, &ToWriter::Sync, MAX_FRAME, &mut buf)
                    .and_then(|()| read_reply(stdout, &mut buf));
                (report.map(Some), Some(reply))
            }
        };
        match (result, reply) {
            (Ok(Some(report)), Some(reply)) => {
                let _ = reply.send(Ok(report));
            }
            (Ok(_), _) => {}
            (Err(e), reply) => {
                let gone = WriterError::Stopped(e.to_string());
                eprintln!("prov-collector: {gone}; the rest of this record is lost");
                // A writer that broke the protocol is not trusted to go on either.
                if let Some(child) = &mut child {
                    let _ = child.kill();
                }
                if let Some(reply) = reply {
                    let _ = reply.send(Err(gone.clone()));
                }
                pipe = Err(gone);
            }
        }
    }
    drop(pipe);
    if let Some(mut child) = child {
        let _ = child.wait();
    }
}

/// What becomes of a message once the writer is gone.
fn answer_without_writer(msg: Outgoing, gone: &WriterError) {
    match msg {
        Outgoing::Frame(ToWriter::Log(line)) => eprintln!("prov-collector: {line}"),
        Outgoing::Frame(_) => {}
        Outgoing::Sync(reply) => {
            let _ = reply.send(Err(gone.clone()));
        }
    }
}

/// The writer's answer: at most MAX_REPLY bytes, decoded as hostile input
/// (the writer is the user's process; anything they run may tamper with it).
fn read_reply(stdout: &mut ChildStdout, buf: &mut Vec<u8>) -> Result<SyncReport, FrameError> {
    if !read_frame(stdout, MAX_REPLY, buf)? {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "it exited").into());
    }
    decode_reply(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sync_error(link: &WriterLink) -> String {
        let err = link.sync().expect_err("no report from a broken writer");
        err.to_string()
    }

    #[test]
    fn a_writer_that_is_gone_or_lies_costs_the_record_not_the_collector() {
        // Exits at once: the frames meet a closed pipe.
        let link = WriterLink::start_script("exit 0");
        link.send(ToWriter::Log("a line".into()));
        assert!(sync_error(&link).contains("writer stopped"));
        // Asked again, it answers the same at once.
        assert!(sync_error(&link).contains("writer stopped"));
        drop(link);
        // A reply claiming 4 GiB is refused before anything is read for it.
        let link = WriterLink::start_script(r"printf '\377\377\377\377'; exec cat >/dev/null");
        assert!(sync_error(&link).contains("larger than the limit"), "{}", sync_error(&link));
        drop(link);
        // A reply of the right size that is not a report.
        let link = WriterLink::start_script(
            r"head -c 5 >/dev/null; printf '\003\000\000\000\377\377\377'; exec cat >/dev/null",
        );
        assert!(sync_error(&link).contains("malformed"));
        drop(link);
        // Cannot start at all.
        let link = WriterLink::start_program(Ok(Command::new("/nonexistent/prov-writer")));
        assert!(sync_error(&link).contains("cannot start"));
    }

    #[test]
    fn the_writer_gets_nothing_but_its_pipes_and_stderr() {
        let dir = std::env::temp_dir().join(format!("prov-writer-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A descriptor of ours that someone forgot to mark close-on-exec.
        let marker = dir.join("not-for-the-writer");
        std::fs::write(&marker, "").unwrap();
        let leaked = nix::fcntl::open(&marker, nix::fcntl::OFlag::O_RDONLY, nix::sys::stat::Mode::empty()).unwrap();
        let d = dir.display();
        let link = WriterLink::start_script(&format!(
            "ls -l /proc/$$/fd > {d}/fds; env > {d}/env; pwd > {d}/cwd; exec cat >/dev/null"
        ));
        link.send(ToWriter::Log("line".into()));
        // Closes the pipe and waits for the stand-in to exit.
        drop(link);
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
        let fds = read("fds");
        assert!(!fds.contains("not-for-the-writer"), "{fds}");
        assert!(fds.contains(" 0 -> pipe:"), "{fds}");
        // `sh` sets PWD (and may set SHLVL, _) itself; nothing comes from us.
        let env: Vec<String> = read("env")
            .lines()
            .filter(|l| !l.starts_with("PWD=") && !l.starts_with("SHLVL=") && !l.starts_with("_="))
            .map(str::to_string)
            .collect();
        assert!(env.is_empty(), "{env:?}");
        assert_eq!(read("cwd"), "/\n");
        drop(leaked);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
