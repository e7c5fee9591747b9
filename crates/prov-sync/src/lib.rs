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
//! - [`tls`]: TLS as libpq's sslmode and sslrootcert ask.
#![deny(unsafe_code)]

mod addresses;
pub mod conninfo;
mod error;
pub mod pull;
pub mod push;
pub mod server;
pub mod tls;
mod watchdog;

pub use error::{Result, SyncError};

/// A connection to the central store.
pub struct Central {
    pub client: postgres::Client,
    /// `user@host:port/db`, for messages.
    pub server: String,
    /// Bounds each wait for the server (see [`watchdog`]).
    watchdog: watchdog::Watchdog,
}

impl Central {
    /// Connects (within the connect timeout, with TLS as the settings
    /// say) and checks the server's schema. `migrate`: bring an older
    /// schema up to date (needs the schema's owner's rights); otherwise an
    /// older schema is an error saying so.
    pub fn connect(settings: &conninfo::Settings, migrate: bool) -> Result<Central> {
        let server = conninfo::describe(settings);
        let watchdog = watchdog::Watchdog::start(watchdog::ANSWER_WAIT);
        let connected = Central::connect_watched(settings, migrate, server.clone(), watchdog.clone());
        watchdog.disarm();
        connected.map_err(|e| no_answer(e, &watchdog))
    }

    fn connect_watched(
        settings: &conninfo::Settings,
        migrate: bool,
        server: String,
        watchdog: watchdog::Watchdog,
    ) -> Result<Central> {
        let client = settings.tls.connect(&settings.config).map_err(|e| match e {
            tls::ConnectError::Settings(why) => SyncError::Tls { server: server.clone(), why },
            tls::ConnectError::Unresolved(why) => SyncError::Unreachable { server: server.clone(), why },
            tls::ConnectError::Postgres(e) => match settings.tls.explain(&e) {
                Some(why) => SyncError::Tls { server: server.clone(), why },
                None => error::classify(&server, "the connection", e),
            },
        })?;
        let mut central = Central { client, server, watchdog };
        server::ensure_schema(&mut central, migrate)?;
        Ok(central)
    }

    /// Runs `work` (which talks to the server) with each of its waits
    /// bounded: `work` calls `progress` after each answer it got.
    pub(crate) fn watched<T>(&mut self, work: impl FnOnce(&mut Central, &dyn Fn()) -> Result<T>) -> Result<T> {
        let watchdog = self.watchdog.clone();
        let progress = || watchdog.arm(watchdog::ANSWER_WAIT);
        progress();
        let result = work(self, &progress);
        watchdog.disarm();
        result.map_err(|e| no_answer(e, &watchdog))
    }

    /// Whether this connection is encrypted (what the server says).
    pub fn encrypted(&mut self) -> Result<bool> {
        self.watched(|central, _| {
            let row = central
                .client
                .query_one("SELECT coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)", &[])
                .map_err(error::on(&central.server, "a question"))?;
            Ok(row.get(0))
        })
    }
}

/// A connection the watchdog cut is one whose server did not answer: said
/// so, rather than "connection closed".
fn no_answer(e: SyncError, watchdog: &watchdog::Watchdog) -> SyncError {
    match e {
        SyncError::Unreachable { server, .. } | SyncError::Refused { server, .. } | SyncError::Tls { server, .. }
            if watchdog.fired() =>
        {
            let why = format!("no answer within {} s", watchdog::ANSWER_WAIT.as_secs());
            SyncError::Unreachable { server, why }
        }
        other => other,
    }
}
