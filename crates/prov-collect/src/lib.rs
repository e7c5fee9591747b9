//! The collector side of prov: the fanotify event reader, the resolution of
//! events into file records, the link to the writer process that stores
//! them, and the control protocol spoken with `prov` over a socket. Nothing
//! here opens the user's database, spool or log, or links SQLite: that is
//! prov-writer's job, in a process that holds no fanotify descriptor.
#![deny(unsafe_code)]

pub mod collector;
pub mod error;
pub mod fanotify;
pub mod git_state;
pub mod ipc;
pub mod long_text;
pub mod members;
pub mod nested_namespaces;
pub mod new_mounts;
pub mod new_pids;
pub mod processes;
pub mod protocol;
pub mod provignore;
pub mod resolve;
#[allow(unsafe_code)]
pub mod sys;
pub mod writer_link;
pub mod writer_on_demand;
