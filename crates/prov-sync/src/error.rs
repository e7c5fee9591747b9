//! What can go wrong talking to the central store, each in one line.

use prov_store::StoreError;

pub type Result<T, E = SyncError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("bad [sync] url: {0}")]
    BadUrl(String),
    /// The server could not be reached or went away: an outage, retried later.
    #[error("cannot reach the central store {server}: {why}")]
    Unreachable { server: String, why: String },
    /// The server answered with an error.
    #[error("the central store {server} refused {what}: {why}")]
    Refused { server: String, what: &'static str, why: String },
    #[error(
        "the central store {server} has schema version {found}, newer than this prov knows ({known}): upgrade prov"
    )]
    NewerServer { server: String, found: i32, known: i32 },
    #[error("the central store {server} has schema version {found}, this prov needs {known}; its owner applies it with `prov sync --setup` ({why})")]
    OlderServer { server: String, found: i32, known: i32, why: String },
    /// TLS could not be set up, or the server's certificate is not trusted.
    #[error("no secure connection to the central store {server}: {why}")]
    Tls { server: String, why: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl SyncError {
    /// Whether trying again later may work (the network or the server was
    /// down), as opposed to a refusal that needs someone to act.
    pub fn is_outage(&self) -> bool {
        matches!(self, SyncError::Unreachable { .. })
    }
}

/// Turns a client error into Unreachable (connection gone or never made)
/// or Refused (the server said no), in one line.
pub(crate) fn classify(server: &str, what: &'static str, e: postgres::Error) -> SyncError {
    let why = match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => one_line(&e),
    };
    if e.as_db_error().is_none() || e.is_closed() || is_shutdown(&e) {
        SyncError::Unreachable { server: server.to_owned(), why }
    } else {
        SyncError::Refused { server: server.to_owned(), what, why }
    }
}

/// The server shutting down or terminating the connection (class 57, 08).
fn is_shutdown(e: &postgres::Error) -> bool {
    e.code().is_some_and(|c| c.code().starts_with("57") || c.code().starts_with("08"))
}

fn one_line(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let inner_text = inner.to_string();
        if !s.contains(&inner_text) {
            s.push_str(": ");
            s.push_str(&inner_text);
        }
        source = inner.source();
    }
    s.replace('\n', " ")
}

/// `classify` for `map_err`: `.map_err(on(&server, "reading records"))`.
pub(crate) fn on<'a>(server: &'a str, what: &'static str) -> impl FnOnce(postgres::Error) -> SyncError + 'a {
    move |e| classify(server, what, e)
}
