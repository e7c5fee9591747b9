//! `prov run -- CMD` and the long-lived run preparer that serves it. The
//! modules depend on each other in this order only (no circle):
//! `client` → `handover` → `outcome`, `client` → `preparer` → `handover`,
//! `client` → `env`,
//! and every one of them → `record_end`, `session`, `outcome`.

pub mod client;
pub mod env;
pub mod handover;
pub mod outcome;
pub mod preparer;
pub mod record_end;
pub mod session;

pub use client::run;
