//! TLS to the central store, decided as libpq decides it from `sslmode`
//! and `sslrootcert` (docs/cluster-store.md says what each mode does).
//! rustls, with the ring provider, so building prov needs no libssl.
//!
//! - disable: never TLS. allow: without TLS first, with TLS when the
//!   server refuses that. prefer (libpq's default): TLS when the server
//!   offers it, else without; a failed handshake is tried again without.
//! - require: TLS or nothing; the certificate is checked against the root
//!   certificates only when the root file exists (as libpq).
//! - verify-ca: the certificate must chain to the root certificates.
//! - verify-full: that, and it must name the host connected to.
//!
//! The root certificates: `sslrootcert` (default ~/.postgresql/root.crt),
//! or the system's (`sslrootcert=system`, /etc/ssl/certs). Where libpq
//! refuses verify-full for lack of a root file, prov uses the system's.
//! A Unix socket never carries TLS (the server offers none there).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use postgres::config::{Host, SslMode as CrateSslMode};
use postgres::{Client, Config, NoTls};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::addresses;
use crate::error::{Result, SyncError};

/// libpq's sslmode values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Option<SslMode> {
        Some(match value {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// Where the root certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Roots {
    /// A PEM file: `given` when named by sslrootcert, else libpq's default.
    File { path: PathBuf, given: bool },
    /// The system's trusted roots.
    System,
}

/// The TLS settings of a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    pub mode: SslMode,
    roots: Roots,
}

impl Tls {
    /// From the sslmode and sslrootcert found (value, where from), with
    /// libpq's defaults: prefer; ~/.postgresql/root.crt;
    /// `sslrootcert=system` makes verify-full the default and refuses
    /// weaker modes (any public CA would do for verify-ca).
    pub fn new(mode: Option<(String, &str)>, rootcert: Option<String>, home: &Path) -> Result<Tls> {
        let roots = match rootcert.as_deref() {
            Some("system") => Roots::System,
            Some(path) => Roots::File { path: PathBuf::from(path), given: true },
            None => Roots::File { path: home.join(".postgresql/root.crt"), given: false },
        };
        let mode = match mode {
            Some((value, from)) => SslMode::parse(&value)
                .ok_or_else(|| SyncError::BadUrl(format!("sslmode={value:?} (from {from}) is not one libpq knows")))?,
            None if roots == Roots::System => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        if roots == Roots::System && mode != SslMode::VerifyFull {
            return Err(SyncError::BadUrl(format!(
                "sslrootcert=system needs sslmode=verify-full, not {} (any public CA would be trusted)",
                mode.name()
            )));
        }
        Ok(Tls { mode, roots })
    }

    /// The root certificates as said in messages.
    pub fn roots_name(&self) -> String {
        match &self.roots {
            Roots::File { path, given: false } if !path.exists() && self.mode == SslMode::VerifyFull => {
                "the system's trusted roots".into()
            }
            Roots::File { path, .. } => path.display().to_string(),
            Roots::System => "the system's trusted roots".into(),
        }
    }

    /// Connects with `config` as the mode says: the TLS settings checked
    /// first (a missing root file is said before any lookup or
    /// connection), then each address of its host in turn
    /// (`addresses::with_addresses`).
    pub fn connect(&self, config: &Config) -> Result<Client, ConnectError> {
        let socket = matches!(config.get_hosts().first(), Some(Host::Unix(_)));
        let plain = socket || self.mode == SslMode::Disable;
        let tls = if plain { None } else { Some(MakeRustlsConnect::new(self.client_config()?)) };
        let mut last = None;
        for config in addresses::with_addresses(config).map_err(ConnectError::Unresolved)? {
            match self.connect_to(config, tls.clone()) {
                Ok(client) => return Ok(client),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("with_addresses gives one configuration at least"))
    }

    /// One attempt at one address; `tls`: None without TLS (a socket, or
    /// sslmode=disable).
    fn connect_to(&self, mut config: Config, tls: Option<MakeRustlsConnect>) -> Result<Client, ConnectError> {
        let Some(tls) = tls else {
            return config.ssl_mode(CrateSslMode::Disable).connect(NoTls).map_err(ConnectError::Postgres);
        };
        match self.mode {
            SslMode::Allow => match config.ssl_mode(CrateSslMode::Disable).connect(NoTls) {
                // The server said no (pg_hba.conf asks for TLS, say): with TLS.
                Err(e) if e.as_db_error().is_some() => {
                    config.ssl_mode(CrateSslMode::Require).connect(tls).map_err(ConnectError::Postgres)
                }
                other => other.map_err(ConnectError::Postgres),
            },
            SslMode::Prefer => match config.ssl_mode(CrateSslMode::Prefer).connect(tls) {
                Err(e) if is_handshake_failure(&e) => {
                    config.ssl_mode(CrateSslMode::Disable).connect(NoTls).map_err(ConnectError::Postgres)
                }
                other => other.map_err(ConnectError::Postgres),
            },
            _ => config.ssl_mode(CrateSslMode::Require).connect(tls).map_err(ConnectError::Postgres),
        }
    }

    /// The rustls configuration: which certificates are trusted and how
    /// much of them is checked.
    fn client_config(&self) -> Result<ClientConfig, ConnectError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifying = matches!(self.mode, SslMode::VerifyCa | SslMode::VerifyFull);
        let roots = match &self.roots {
            Roots::System => Some(system_roots()?),
            Roots::File { path, .. } if path.exists() => Some(file_roots(path)?),
            Roots::File { path, given } if verifying && (*given || self.mode == SslMode::VerifyCa) => {
                return Err(ConnectError::Settings(format!(
                    "sslmode={} needs the CA that signed the server's certificate, and {} does not exist: \
                     name it with sslrootcert=FILE",
                    self.mode.name(),
                    path.display()
                )))
            }
            // verify-full without a root file: the system's (libpq refuses).
            Roots::File { .. } if verifying => Some(system_roots()?),
            // require, prefer, allow without a root file: encrypted, not verified (as libpq).
            Roots::File { .. } => None,
        };
        let chain = match roots {
            Some(roots) => Some(
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| ConnectError::Settings(format!("the root certificates: {e}")))?,
            ),
            None => None,
        };
        let verifier = Verifier { chain, check_name: self.mode == SslMode::VerifyFull, provider: provider.clone() };
        Ok(ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ConnectError::Settings(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth())
    }

    /// What went wrong with TLS in `e`, in words, when it was TLS.
    pub fn explain(&self, e: &postgres::Error) -> Option<String> {
        let mode = self.mode.name();
        if let Some(problem) = certificate_error(e) {
            let why = match problem {
                CertificateError::UnknownIssuer => {
                    format!("its certificate is not signed by a CA of {}", self.roots_name())
                }
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                    "its certificate is not for the host name connected to".into()
                }
                CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                    "its certificate has expired".into()
                }
                CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                    "its certificate is not valid yet (or this host's clock is off)".into()
                }
                CertificateError::Revoked => "its certificate is revoked".into(),
                other => format!("its certificate is not accepted ({other:?})"),
            };
            return Some(format!("{why} (sslmode={mode})"));
        }
        let source = std::error::Error::source(e).map(|s| s.to_string().replace('\n', " ")).unwrap_or_default();
        if source.contains("server does not support TLS") {
            return Some(format!("the server does not offer TLS, which sslmode={mode} asks for"));
        }
        is_handshake_failure(e).then(|| format!("the TLS handshake failed: {source} (sslmode={mode})"))
    }
}

/// Why a connection with TLS was not made.
#[derive(Debug)]
pub enum ConnectError {
    /// The TLS settings cannot be used (a missing or bad root file).
    Settings(String),
    /// No address was found for the host.
    Unresolved(String),
    Postgres(postgres::Error),
}

fn is_handshake_failure(e: &postgres::Error) -> bool {
    e.as_db_error().is_none() && e.to_string().contains("TLS handshake")
}

/// The certificate problem rustls found, in the error's sources.
fn certificate_error(e: &postgres::Error) -> Option<CertificateError> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let inner = s.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()).map_or(s, |i| i as _);
        if let Some(rustls::Error::InvalidCertificate(c)) = inner.downcast_ref::<rustls::Error>() {
            return Some(c.clone());
        }
        source = s.source();
    }
    None
}

fn system_roots() -> Result<RootCertStore, ConnectError> {
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if added == 0 {
        return Err(ConnectError::Settings(
            "the system has no trusted root certificates (package ca-certificates): name the CA with sslrootcert=FILE"
                .into(),
        ));
    }
    Ok(roots)
}

fn file_roots(path: &Path) -> Result<RootCertStore, ConnectError> {
    let bad = |why: String| ConnectError::Settings(format!("root certificate file {}: {why}", path.display()));
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad(e.to_string()))?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(bad("no certificate in it".into()));
    }
    Ok(roots)
}

/// Checks the chain (when there are roots) and the name (verify-full);
/// the handshake's signatures are always checked, so the peer holds the
/// key of the certificate it showed.
#[derive(Debug)]
struct Verifier {
    chain: Option<Arc<WebPkiServerVerifier>>,
    check_name: bool,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else { return Ok(ServerCertVerified::assertion()) };
        // webpki checks the name after the chain: a name error means the chain is good.
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_roots_follow_libpq() {
        let home = Path::new("/nonexistent");
        assert_eq!(Tls::new(None, None, home).unwrap().mode, SslMode::Prefer);
        assert_eq!(Tls::new(None, Some("system".into()), home).unwrap().mode, SslMode::VerifyFull);
        let err = Tls::new(Some(("verify-ca".into(), "PGSSLMODE")), Some("system".into()), home).unwrap_err();
        assert!(err.to_string().contains("sslrootcert=system needs sslmode=verify-full"), "{err}");
        let err = Tls::new(Some(("sometimes".into(), "the [sync] url")), None, home).unwrap_err();
        assert!(err.to_string().contains("sslmode=\"sometimes\" (from the [sync] url) is not one libpq knows"));
        // verify-ca needs a root file; verify-full falls back on the system's.
        let ca = Tls::new(Some(("verify-ca".into(), "x")), None, home).unwrap();
        match ca.client_config() {
            Err(ConnectError::Settings(why)) => assert!(why.contains("/nonexistent/.postgresql/root.crt"), "{why}"),
            _ => panic!("verify-ca without a root file"),
        }
        let full = Tls::new(Some(("verify-full".into(), "x")), None, home).unwrap();
        assert_eq!(full.roots_name(), "the system's trusted roots");
        let given = Tls::new(Some(("verify-full".into(), "x")), Some("/nonexistent/ca.pem".into()), home).unwrap();
        assert!(matches!(given.client_config(), Err(ConnectError::Settings(_))));
        // require without a root file: encrypted, nothing to load.
        assert!(Tls::new(Some(("require".into(), "x")), None, home).unwrap().client_config().is_ok());
    }
}
