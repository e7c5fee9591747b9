//! Every message between prov's processes, in one place:
//!
//! - [`control`]: `prov` (the CLI, `prov __prepare`) and the shell shim ↔
//!   the collector, JSON datagrams on the control socket, with the tags
//!   the helper and its join mode write there;
//! - [`writer_pipe`]: the collector ↔ prov-writer, length-prefixed postcard
//!   frames on a pipe;
//! - [`run_preparer`]: `prov run` ↔ its preparer, one-byte tags;
//! - [`shell_preparer`]: the shell shim ↔ `prov __prepare`;
//! - [`helper`]: the descriptors and arguments prov-helper hands the
//!   collector (the helper keeps its own copy: it links only libc).
//!
//! [`ipc`] and [`long_text`] carry the datagrams, [`fds`] the descriptors
//! attached to them. The shim, in C, writes and parses its messages by
//! hand; the `shim` test builds its message code and reads what it writes
//! with the types here.
#![deny(unsafe_code)]

mod begin_wire;
pub mod control;
#[allow(unsafe_code)]
pub mod fds;
pub mod helper;
pub mod ipc;
pub mod long_text;
pub mod run_preparer;
pub mod shell_preparer;
pub mod writer_pipe;

#[cfg(test)]
mod shim;

/// The version of these messages. Raised whenever a message changes in a
/// way an older peer would read wrongly; peers of different versions
/// refuse each other with one line instead of misreading: the run
/// preparer's socket name carries it, the collector checks the one in
/// `Prepare`, and `prov __prepare` the one the shell shim passes.
pub const VERSION: u32 = 1;
