//! Reading a small file that prov finds by a configurable or guessable path
//! (its configuration, `.provignore`, `pg_service.conf`): a FIFO there would
//! hang prov and a link to /dev/zero would fill its memory, so only a
//! regular file up to a size limit is read.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The limit for configuration files: far above any real one.
pub const CONFIG_LIMIT: u64 = 1024 * 1024;

/// The content of the regular file at `path`, if it has at most `limit`
/// bytes. A missing file is `NotFound` as from `std::fs::read`; anything
/// else that is not a regular file, or a larger file, is an error whose
/// message says which.
pub fn read(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    read_opened(&open_regular(path)?, limit)
}

/// The content of `file` (opened by [`open_regular`]), if it has at most
/// `limit` bytes.
pub fn read_opened(file: &File, limit: u64) -> io::Result<Vec<u8>> {
    let mut content = Vec::new();
    file.take(limit + 1).read_to_end(&mut content)?;
    if content.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(content)
}

/// [`read`] as UTF-8 text.
pub fn read_to_string(path: &Path, limit: u64) -> io::Result<String> {
    text(read(path, limit)?)
}

/// Bytes read as UTF-8 text.
pub fn text(bytes: Vec<u8>) -> io::Result<String> {
    String::from_utf8(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "it is not UTF-8 text"))
}

/// Opens `path` for reading without waiting for a writer (a FIFO opens at
/// once when non-blocking) and checks that it is a regular file.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC).open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_dir() {
            "a directory"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a file"
        };
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("it is {what}, not a regular file")));
    }
    Ok(file)
}

fn too_large(limit: u64) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("it is larger than {}", human_size(limit)))
}

/// `1 MiB`, `64 KiB`, `100 bytes`.
fn human_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("small-file-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn reads_a_regular_file_up_to_the_limit() {
        let dir = tmp("regular");
        let file = dir.join("f");
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(read(&file, 5).unwrap(), b"12345");
        let e = read(&file, 4).unwrap_err();
        assert_eq!(e.to_string(), "it is larger than 4 bytes");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn refuses_a_fifo_without_waiting_for_a_writer() {
        let dir = tmp("fifo");
        let fifo = dir.join("f");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let e = read(&fifo, CONFIG_LIMIT).unwrap_err();
        assert_eq!(e.to_string(), "it is a FIFO, not a regular file");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn refuses_a_link_to_a_device() {
        let dir = tmp("dev");
        let link = dir.join("f");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert_eq!(read(&link, CONFIG_LIMIT).unwrap_err().to_string(), "it is a device, not a regular file");
        assert_eq!(read(&dir, CONFIG_LIMIT).unwrap_err().to_string(), "it is a directory, not a regular file");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_missing_file_is_not_found() {
        let e = read(Path::new("/nonexistent/prov-small-file"), 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
