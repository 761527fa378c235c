//! `--web.config.file`: TLS and basic auth in the exporter-toolkit format that
//! node_exporter and Prometheus use, so one file and one `promtool check web-config` serve
//! the whole fleet.
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt        # relative paths are relative to this file
//!   key_file: server.key
//!   min_version: TLS12           # TLS12 (default) or TLS13
//!   client_auth_type: RequireAndVerifyClientCert   # or VerifyClientCertIfGiven
//!   client_ca_file: ca.crt
//! http_server_config:
//!   headers:
//!     Strict-Transport-Security: max-age=31536000
//! basic_auth_users:
//!   prometheus: $2y$10$...       # bcrypt hash
//! ```
//!
//! Unknown keys, and toolkit keys this exporter does not implement, are errors naming the
//! key: a setting that is silently ignored is a security hole.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use tokio_rustls::rustls;

/// A loaded, validated web configuration.
pub struct WebConfig {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub users: Option<Users>,
    /// Extra response headers (`http_server_config.headers`).
    pub headers: Vec<(String, String)>,
    /// The file and the TLS files it names: a change to any of them means a reload.
    pub files: Vec<PathBuf>,
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfig")
            .field("tls", &self.tls.is_some())
            .field("users", &self.users.as_ref().map(|u| u.hashes.len()))
            .field("headers", &self.headers)
            .finish()
    }
}

/// The basic auth users: name -> bcrypt hash, and a hash of the same cost that unknown
/// names are checked against so they take as long as known ones.
pub struct Users {
    hashes: BTreeMap<String, String>,
    decoy: String,
}

impl Users {
    /// Whether `user`/`password` match. Costs one bcrypt check whether or not the user
    /// exists; callers serialise calls so bcrypt cannot be used to exhaust the CPU.
    pub fn check(&self, user: &str, password: &str) -> bool {
        match self.hashes.get(user) {
            Some(hash) => bcrypt::verify(password, hash).unwrap_or(false),
            None => {
                let _ = bcrypt::verify(password, &self.decoy);
                false
            }
        }
    }

    /// The hash `user` is checked against (the decoy for an unknown name): part of the
    /// key of a remembered success, so a changed hash is checked afresh.
    pub(crate) fn hash_of(&self, user: &str) -> &str {
        self.hashes.get(user).unwrap_or(&self.decoy)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileFormat {
    tls_server_config: Option<TlsFormat>,
    http_server_config: Option<HttpFormat>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFormat {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    client_auth_type: Option<String>,
    client_ca_file: Option<PathBuf>,
    min_version: Option<String>,
    max_version: Option<String>,
    // exporter-toolkit keys that are not implemented: present means an error.
    cert: Option<serde_yaml_ng::Value>,
    key: Option<serde_yaml_ng::Value>,
    cipher_suites: Option<serde_yaml_ng::Value>,
    curve_preferences: Option<serde_yaml_ng::Value>,
    prefer_server_cipher_suites: Option<serde_yaml_ng::Value>,
    client_allowed_sans: Option<serde_yaml_ng::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpFormat {
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

/// The response headers exporter-toolkit lets a web config set.
const SETTABLE_HEADERS: [&str; 5] = [
    "Content-Security-Policy",
    "X-Frame-Options",
    "X-Content-Type-Options",
    "X-XSS-Protection",
    "Strict-Transport-Security",
];

impl WebConfig {
    /// No file: plain HTTP without authentication.
    pub fn none() -> WebConfig {
        WebConfig {
            tls: None,
            users: None,
            headers: Vec::new(),
            files: Vec::new(),
        }
    }

    pub fn load(path: &Path) -> Result<WebConfig, WebConfigError> {
        let fail = |message: String| WebConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut config = Self::parse(&text, base).map_err(fail)?;
        config.files.insert(0, path.to_path_buf());
        Ok(config)
    }

    /// Parses and validates the file's text; relative paths are resolved against `base`.
    pub fn parse(text: &str, base: &Path) -> Result<WebConfig, String> {
        if text.trim().is_empty() {
            return Ok(WebConfig::none());
        }
        let file: FileFormat = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
        let files: Vec<PathBuf> = file
            .tls_server_config
            .iter()
            .flat_map(|t| [&t.cert_file, &t.key_file, &t.client_ca_file])
            .flatten()
            .map(|p| base.join(p))
            .collect();
        let tls = file
            .tls_server_config
            .map(|t| tls_config(t, base))
            .transpose()?;
        let mut headers = Vec::new();
        if let Some(http) = file.http_server_config {
            if http.http2 == Some(true) {
                return Err(
                    "http_server_config.http2: HTTP/2 is not supported, the exporter serves HTTP/1.1 only".into(),
                );
            }
            for (name, value) in http.headers.unwrap_or_default() {
                let Some(known) = SETTABLE_HEADERS
                    .iter()
                    .find(|h| h.eq_ignore_ascii_case(&name))
                else {
                    return Err(format!(
                        "http_server_config.headers: {name} cannot be set (allowed: {})",
                        SETTABLE_HEADERS.join(", ")
                    ));
                };
                if axum::http::HeaderValue::from_str(&value).is_err() {
                    return Err(format!("http_server_config.headers.{name}: invalid value"));
                }
                headers.push((known.to_string(), value));
            }
        }
        // An empty list means no authentication, as in exporter-toolkit.
        let users = file
            .basic_auth_users
            .filter(|u| !u.is_empty())
            .map(users)
            .transpose()?;
        Ok(WebConfig {
            tls,
            users,
            headers,
            files,
        })
    }
}

fn users(hashes: BTreeMap<String, String>) -> Result<Users, String> {
    let mut cost = 0;
    for (user, hash) in &hashes {
        if user.is_empty() || user.contains(':') {
            return Err(format!("basic_auth_users: invalid user name {user:?}"));
        }
        cost = cost.max(bcrypt_cost(hash).ok_or_else(|| {
            format!("basic_auth_users.{user}: not a bcrypt hash ($2a$, $2b$ or $2y$)")
        })?);
    }
    let decoy =
        bcrypt::hash("membloat decoy", cost).map_err(|e| format!("basic_auth_users: {e}"))?;
    Ok(Users { hashes, decoy })
}

/// The cost of a well-formed bcrypt hash (`$2y$10$` + 53 characters of salt and hash).
fn bcrypt_cost(hash: &str) -> Option<u32> {
    let rest = ["$2a$", "$2b$", "$2y$", "$2x$"]
        .iter()
        .find_map(|p| hash.strip_prefix(p))?;
    let (cost, tail) = rest.split_once('$')?;
    let cost: u32 = cost.parse().ok()?;
    let valid = (4..=31).contains(&cost)
        && tail.len() == 53
        && tail
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'/');
    valid.then_some(cost)
}

fn tls_version(key: &str, v: &str) -> Result<&'static rustls::SupportedProtocolVersion, String> {
    match v {
        "TLS13" => Ok(&rustls::version::TLS13),
        "TLS12" => Ok(&rustls::version::TLS12),
        "TLS10" | "TLS11" => Err(format!(
            "tls_server_config.{key}: {v} is not supported, the minimum is TLS12"
        )),
        _ => Err(format!(
            "tls_server_config.{key}: unknown version {v:?} (TLS12 or TLS13)"
        )),
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "the exporter-toolkit TLS keys, each checked where it is applied"
)]
fn tls_config(t: TlsFormat, base: &Path) -> Result<Arc<rustls::ServerConfig>, String> {
    for (key, set) in [
        ("cert", t.cert.is_some()),
        ("key", t.key.is_some()),
        ("cipher_suites", t.cipher_suites.is_some()),
        ("curve_preferences", t.curve_preferences.is_some()),
        (
            "prefer_server_cipher_suites",
            t.prefer_server_cipher_suites.is_some(),
        ),
        ("client_allowed_sans", t.client_allowed_sans.is_some()),
    ] {
        if set {
            return Err(format!(
                "tls_server_config.{key} is not supported by membloat_exporter"
            ));
        }
    }
    let resolve = |p: &Path| base.join(p);
    let cert_file = t
        .cert_file
        .ok_or("tls_server_config.cert_file is required")?;
    let key_file = t.key_file.ok_or("tls_server_config.key_file is required")?;
    let min = tls_version("min_version", t.min_version.as_deref().unwrap_or("TLS12"))?;
    let max = tls_version("max_version", t.max_version.as_deref().unwrap_or("TLS13"))?;
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = match (min.version, max.version)
    {
        (rustls::ProtocolVersion::TLSv1_3, rustls::ProtocolVersion::TLSv1_2) => {
            return Err("tls_server_config: max_version is below min_version".into())
        }
        (rustls::ProtocolVersion::TLSv1_3, _) => vec![&rustls::version::TLS13],
        (_, rustls::ProtocolVersion::TLSv1_2) => vec![&rustls::version::TLS12],
        _ => vec![&rustls::version::TLS13, &rustls::version::TLS12],
    };

    let auth_type = t.client_auth_type.as_deref().unwrap_or("NoClientCert");
    match (auth_type, t.client_ca_file.is_some()) {
        ("NoClientCert", false)
        | ("RequireAndVerifyClientCert" | "VerifyClientCertIfGiven", true) => {}
        ("NoClientCert", true) => {
            return Err(
                "tls_server_config.client_ca_file is set but client_auth_type is NoClientCert"
                    .into(),
            )
        }
        ("RequireAndVerifyClientCert" | "VerifyClientCertIfGiven", false) => {
            return Err(format!(
                "tls_server_config.client_auth_type {auth_type} needs client_ca_file"
            ))
        }
        ("RequestClientCert" | "RequireAnyClientCert", _) => {
            return Err(format!(
                "tls_server_config.client_auth_type {auth_type} accepts unverified certificates and is not supported; use RequireAndVerifyClientCert"
            ))
        }
        (other, _) => {
            return Err(format!(
                "tls_server_config.client_auth_type: unknown value {other:?}"
            ))
        }
    }

    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let cert_path = resolve(&cert_file);
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|i| i.collect::<Result<_, _>>())
        .map_err(|e| format!("tls_server_config.cert_file {}: {e}", cert_path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "tls_server_config.cert_file {}: no certificate",
            cert_path.display()
        ));
    }
    let key_path = resolve(&key_file);
    let key = PrivateKeyDer::from_pem_file(&key_path)
        .map_err(|e| format!("tls_server_config.key_file {}: {e}", key_path.display()))?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("tls_server_config: {e}"))?;
    let builder = match &t.client_ca_file {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let ca_path = resolve(ca);
            let mut roots = rustls::RootCertStore::empty();
            let cas = CertificateDer::pem_file_iter(&ca_path)
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    format!(
                        "tls_server_config.client_ca_file {}: {e}",
                        ca_path.display()
                    )
                })?;
            for ca in cas {
                roots.add(ca).map_err(|e| {
                    format!(
                        "tls_server_config.client_ca_file {}: {e}",
                        ca_path.display()
                    )
                })?;
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider);
            let verifier = if auth_type == "VerifyClientCertIfGiven" {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| format!("tls_server_config.client_ca_file: {e}"))?,
            )
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("tls_server_config: certificate and key: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests;
