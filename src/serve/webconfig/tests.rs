//! The web config file: its keys, its errors naming the key, bcrypt users.

use super::*;

fn err(text: &str) -> String {
    WebConfig::parse(text, Path::new("/nonexistent")).unwrap_err()
}

#[test]
fn empty_file_means_plain_http_without_auth() {
    let c = WebConfig::parse("", Path::new(".")).unwrap();
    assert!(c.tls.is_none() && c.users.is_none() && c.headers.is_empty());
}

#[test]
fn unknown_and_unsupported_keys_are_named() {
    assert!(err("basic_auth_user: {}\n").contains("basic_auth_user"));
    assert!(err("tls_server_config:\n  cert_fil: x\n").contains("cert_fil"));
    assert!(
        err("tls_server_config:\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n")
            .contains("cipher_suites is not supported")
    );
    assert!(err("http_server_config:\n  http2: true\n").contains("http2"));
    assert!(err("http_server_config:\n  headers:\n    Server: x\n").contains("Server"));
}

#[test]
fn tls_settings_are_checked_before_files_are_read() {
    assert!(err("tls_server_config:\n  key_file: k\n").contains("cert_file is required"));
    let weak = "tls_server_config:\n  cert_file: c\n  key_file: k\n  min_version: TLS11\n";
    assert!(err(weak).contains("TLS11 is not supported"));
    let inverted = "tls_server_config:\n  cert_file: c\n  key_file: k\n  min_version: TLS13\n  max_version: TLS12\n";
    assert!(err(inverted).contains("max_version is below min_version"));
    let unverified =
        "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: RequireAnyClientCert\n";
    assert!(err(unverified).contains("not supported"));
    let no_ca = "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: RequireAndVerifyClientCert\n";
    assert!(err(no_ca).contains("needs client_ca_file"));
    let missing = "tls_server_config:\n  cert_file: c.pem\n  key_file: k\n";
    assert!(err(missing).contains("/nonexistent/c.pem"));
}

#[test]
fn bcrypt_hashes_are_validated_and_checked() {
    assert!(err("basic_auth_users:\n  alice: plaintext\n").contains("alice: not a bcrypt hash"));
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let c = WebConfig::parse(
        &format!("basic_auth_users:\n  alice: '{hash}'\n"),
        Path::new("."),
    )
    .unwrap();
    let users = c.users.unwrap();
    assert!(users.check("alice", "s3cret"));
    assert!(!users.check("alice", "s3cret "));
    assert!(!users.check("bob", "s3cret"));
    assert!(!users.check("", ""));
}

#[test]
fn hashes_of_every_bcrypt_flavour_are_accepted() {
    // htpasswd -B writes $2y$, Go's bcrypt $2a$, this crate $2b$: the same algorithm.
    let b = bcrypt::hash("test", 5).unwrap();
    assert_eq!(bcrypt_cost(&b), Some(5));
    for prefix in ["$2a$", "$2y$"] {
        let other = b.replacen("$2b$", prefix, 1);
        assert_eq!(bcrypt_cost(&other), Some(5));
        assert!(bcrypt::verify("test", &other).unwrap(), "{prefix}");
    }
    assert_eq!(bcrypt_cost("$2y$10$short"), None);
    assert_eq!(bcrypt_cost("$1$md5"), None);
    assert_eq!(bcrypt_cost(&b.replacen("$05$", "$99$", 1)), None);
}
