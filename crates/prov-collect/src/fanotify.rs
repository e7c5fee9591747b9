//! A small fanotify event reader (nix's ignores info records and lacks the
//! 6.x constants, see KERNEL-FACTS.md). Every event fd becomes an `OwnedFd`
//! the moment it is parsed, so none can leak.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

pub const FAN_CLOSE_WRITE: u64 = 0x8;
pub const FAN_CLOSE_NOWRITE: u64 = 0x10;
/// A file opened to be executed (execve and the interpreters it loads).
pub const FAN_OPEN_EXEC: u64 = 0x1000;
pub const FAN_Q_OVERFLOW: u64 = 0x4000;
const FANOTIFY_METADATA_VERSION: u8 = 3;
/// event_len(4) vers(1) reserved(1) metadata_len(2) mask(8) fd(4) pid(4)
const METADATA_LEN: usize = 24;

/// What the kernel could give us of the file.
#[derive(Debug)]
pub enum EventFile {
    Open(OwnedFd),
    /// FAN_NOFD (overflow events).
    None,
    /// FAN_REPORT_FD_ERROR: the kernel failed to open the file (-errno).
    Error(i32),
}

#[derive(Debug)]
pub struct RawEvent {
    pub mask: u64,
    pub file: EventFile,
    pub pid: i32,
    /// CLOCK_BOOTTIME when the event was read from the queue: it happened
    /// before (see processes.rs).
    pub read_at_ns: u64,
}

/// Reads failing this often are a broken group, not files that could not be opened.
const MAX_FAILED_READS: u64 = 1 << 20;

pub struct Reader {
    /// Parsed byte by byte: no alignment needed.
    buf: Vec<u8>,
    lost_reads: u64,
}

impl Reader {
    /// A reader whose one read() brings at most `max_fds` event descriptors:
    /// every event costs at least one metadata record of 24 bytes. At most
    /// 256 KiB (~10 000 events) per read() syscall.
    pub fn with_fd_budget(max_fds: usize) -> Reader {
        let bytes = (max_fds * METADATA_LEN).clamp(METADATA_LEN * 16, 256 * 1024);
        Reader { buf: vec![0u8; bytes], lost_reads: 0 }
    }

    /// Reads one batch of at most `max_events` events into `out`. Returns
    /// false when the queue is empty (the group is non-blocking).
    pub fn read(&mut self, group: BorrowedFd<'_>, out: &mut Vec<RawEvent>, max_events: usize) -> io::Result<bool> {
        // Every event takes at least METADATA_LEN bytes (and the kernel
        // copies whole events only).
        let len = self.buf.len().min(max_events.max(1).saturating_mul(METADATA_LEN));
        let n = match nix::unistd::read(group, &mut self.buf[..len]) {
            Ok(n) => n,
            Err(errno) => {
                let err = io::Error::from(errno);
                return match err.kind() {
                    io::ErrorKind::WouldBlock => Ok(false),
                    io::ErrorKind::Interrupted => Ok(true),
                    // Without FAN_REPORT_FD_ERROR (kernels before 6.13) a file the
                    // kernel cannot open for us fails the read() instead, and that
                    // event is gone: counted like a reported open error.
                    _ if self.lost_reads < MAX_FAILED_READS => {
                        self.lost_reads += 1;
                        out.push(RawEvent { mask: 0, file: EventFile::Error(errno as i32), pid: 0, read_at_ns: 0 });
                        Ok(true)
                    }
                    _ => Err(err),
                };
            }
        };
        parse(&self.buf[..n], boot_time_ns(), out)?;
        Ok(n > 0)
    }
}

/// Parses a buffer of events just read from the group: each event's
/// descriptor becomes ours (so only bytes of that read may come here). A
/// malformed event (a metadata version this reader does not know) is an
/// error the collector cannot go on from: the descriptors after it, whose
/// positions are unknown, stay open until it exits.
pub(crate) fn parse(mut bytes: &[u8], read_at_ns: u64, out: &mut Vec<RawEvent>) -> io::Result<()> {
    while bytes.len() >= METADATA_LEN {
        let event_len = u32::from_ne_bytes(bytes[0..4].try_into().unwrap()) as usize;
        let version = bytes[4];
        let mask = u64::from_ne_bytes(bytes[8..16].try_into().unwrap());
        let fd = i32::from_ne_bytes(bytes[16..20].try_into().unwrap());
        let pid = i32::from_ne_bytes(bytes[20..24].try_into().unwrap());
        if version != FANOTIFY_METADATA_VERSION || event_len < METADATA_LEN || event_len > bytes.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unsupported fanotify event (version {version}, length {event_len})"),
            ));
        }
        let file = match fd {
            -1 => EventFile::None,
            fd if fd < 0 => EventFile::Error(-fd),
            // Installed for us by the kernel in this read.
            fd => EventFile::Open(prov_protocol::fds::own_new_fd(fd)),
        };
        // Info records (metadata_len..event_len) are not requested; skipped.
        out.push(RawEvent { mask, file, pid, read_at_ns });
        bytes = &bytes[event_len..];
    }
    Ok(())
}

/// Now, on the clock /proc/PID/stat's start times count from.
pub fn boot_time_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map_or(0, |t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn event(mask: u64, fd: i32, pid: i32, extra: usize) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&((METADATA_LEN + extra) as u32).to_ne_bytes());
        v.push(FANOTIFY_METADATA_VERSION);
        v.push(0);
        v.extend_from_slice(&(METADATA_LEN as u16).to_ne_bytes());
        v.extend_from_slice(&mask.to_ne_bytes());
        v.extend_from_slice(&fd.to_ne_bytes());
        v.extend_from_slice(&pid.to_ne_bytes());
        v.extend(std::iter::repeat_n(0u8, extra));
        v
    }

    #[test]
    fn parses_nofd_errors_and_info_records() {
        let mut buf = event(FAN_Q_OVERFLOW, -1, 0, 0);
        buf.extend(event(FAN_CLOSE_WRITE, -13, 42, 16));
        buf.extend(event(FAN_CLOSE_NOWRITE, -2, 7, 0));
        let mut out = Vec::new();
        parse(&buf, 0, &mut out).unwrap();
        assert_eq!(out.len(), 3);
        assert!(matches!(out[0].file, EventFile::None));
        assert!(matches!(out[1].file, EventFile::Error(13)));
        assert_eq!(out[1].pid, 42);
        assert_eq!(out[2].mask, FAN_CLOSE_NOWRITE);
    }

    #[test]
    fn a_failed_read_is_one_lost_event() {
        // read() on a directory fails (EISDIR) as a fanotify read does when
        // the kernel cannot open an event's file for us.
        let dir = std::fs::File::open("/").unwrap();
        let mut reader = Reader::with_fd_budget(16);
        let mut out = Vec::new();
        assert!(reader.read(dir.as_fd(), &mut out, 16).unwrap());
        assert!(reader.read(dir.as_fd(), &mut out, 16).unwrap());
        assert_eq!(out.len(), 2);
        assert!(matches!(out[0].file, EventFile::Error(libc::EISDIR)));
        // One that never stops failing is an error, not endless lost events.
        reader.lost_reads = MAX_FAILED_READS;
        assert!(reader.read(dir.as_fd(), &mut out, 16).is_err());
    }

    #[test]
    fn rejects_unknown_versions() {
        let mut buf = event(FAN_CLOSE_WRITE, -1, 0, 0);
        buf[4] = 2;
        assert!(parse(&buf, 0, &mut Vec::new()).is_err());
    }
}
