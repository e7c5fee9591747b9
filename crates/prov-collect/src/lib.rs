//! The collector side of prov: the fanotify event reader, the resolution of
//! events into file records, and the link to the writer process that
//! stores them. The messages it speaks are prov-protocol's. Nothing
//! here opens the user's database, spool or log, or links SQLite: that is
//! prov-writer's job, in a process that holds no fanotify descriptor.
#![deny(unsafe_code)]

pub mod collector;
pub mod error;
pub mod fanotify;
pub mod follow_namespaces;
pub mod git_state;
pub mod members;
pub mod nested_namespaces;
pub mod new_mounts;
pub mod new_pids;
pub mod processes;
pub mod provignore;
pub mod resolve;
#[allow(unsafe_code)]
pub mod sys;
pub mod writer_link;
pub mod writer_on_demand;
