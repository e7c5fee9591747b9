//! prov-writer: the process that stores what the collector observed. It owns
//! the user's database, spool and collector log, and never holds a fanotify
//! descriptor or an event's file: a bug in SQLite or in the spool parser,
//! reached through those user-writable files, finds nothing privileged here.
#![deny(unsafe_code)]

pub mod log;
pub mod writer;
