//! prov's central store: every host's finished records in one PostgreSQL
//! database (docs/cluster-store.md).
//!
//! - [`server`]: the server's schema, its row-level security and the
//!   functions records are pushed through, migrated by the first client of
//!   a new version under an advisory lock.
//! - [`push`]: a journal's finished records to the server, each once (keyed
//!   by its uuid), resumable after an outage.
//! - [`pull`]: the records the user may read from the server into a local
//!   cache with the journal's schema, incrementally, where every query of
//!   prov runs unchanged.
//! - [`conninfo`]: libpq's conventions (service file, ~/.pgpass, PG*
//!   variables) for the connection.
#![deny(unsafe_code)]

pub mod conninfo;
mod error;
pub mod pull;
pub mod push;
pub mod server;

pub use error::{Result, SyncError};

/// A connection to the central store.
pub struct Central {
    pub client: postgres::Client,
    /// `user@host:port/db`, for messages.
    pub server: String,
}

impl Central {
    /// Connects (within the connect timeout) and checks the server's schema.
    /// `migrate`: bring an older schema up to date (needs the schema's
    /// owner's rights); otherwise an older schema is an error saying so.
    pub fn connect(config: &postgres::Config, migrate: bool) -> Result<Central> {
        let server = conninfo::describe(config);
        let client = config.connect(postgres::NoTls).map_err(|e| error::classify(&server, "the connection", e))?;
        let mut central = Central { client, server };
        server::ensure_schema(&mut central, migrate)?;
        Ok(central)
    }
}
