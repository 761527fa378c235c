//! Who may ask: the web configuration in force (`Web`: TLS, basic auth users, response
//! headers, swapped whole by a reload) and the basic auth check, which remembers what
//! passed and gives bcrypt to one check at a time.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use base64::Engine;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use crate::serve::shared::Latest;
use crate::serve::webconfig::{Users, WebConfig};

/// What `--web.config.file` asks of every request.
#[derive(Clone, Default)]
pub(crate) struct Guard {
    users: Option<Arc<Users>>,
    pub(super) headers: Arc<Vec<(HeaderName, HeaderValue)>>,
}

/// The longest a basic auth check waits for its turn before the request gets 503.
const AUTH_QUEUE_WAIT: Duration = Duration::from_secs(5);

/// Successful basic auth checks remembered, at most this many (then forgotten at once).
const REMEMBERED_MAX: usize = 1024;

/// The web configuration in force: read per request (authentication, headers) and per
/// connection (TLS), and swapped whole by a reload, so a rotated certificate or a changed
/// password takes effect without a restart and a bad file never replaces a good one.
pub struct Web {
    active: Latest<Active>,
    /// Basic auth checks that passed: a scrape pays bcrypt once, not every time.
    remembered: Remembered,
    /// One bcrypt check at a time, first come first served: failed checks can take one
    /// CPU at most, however many clients guess.
    checks: Arc<Semaphore>,
}

/// Successful checks, as the exporter toolkit keeps them, but only as a keyed 128-bit
/// digest of (user, password, hash), never the password. The hash is part of the key, so
/// a reload that changes a user's hash or removes the user checks afresh.
struct Remembered {
    keys: (RandomState, RandomState),
    seen: std::sync::Mutex<HashSet<u128>>,
}

impl Remembered {
    fn new() -> Self {
        Remembered {
            keys: (RandomState::new(), RandomState::new()),
            seen: std::sync::Mutex::new(HashSet::new()),
        }
    }

    fn key(&self, user: &str, password: &str, hash: &str) -> u128 {
        let half = |k: &RandomState| k.hash_one((user, password, hash)) as u128;
        (half(&self.keys.0) << 64) | half(&self.keys.1)
    }

    fn contains(&self, key: u128) -> bool {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.contains(&key)
    }

    fn insert(&self, key: u128) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= REMEMBERED_MAX {
            seen.clear();
        }
        seen.insert(key);
    }
}

pub(super) struct Active {
    pub(super) guard: Guard,
    pub(super) tls: Option<TlsAcceptor>,
}

impl Web {
    pub fn new(config: WebConfig) -> Arc<Web> {
        Arc::new(Web {
            active: Latest::new(Active::from(config)),
            remembered: Remembered::new(),
            checks: Arc::new(Semaphore::new(1)),
        })
    }

    /// Puts `config` in force for the next requests and connections.
    pub fn set(&self, config: WebConfig) {
        self.active.set(Active::from(config));
    }

    pub(super) fn active(&self) -> Arc<Active> {
        self.active.get()
    }
}

impl From<WebConfig> for Active {
    fn from(c: WebConfig) -> Active {
        Active {
            guard: Guard::new(c.users, &c.headers),
            tls: c.tls.map(TlsAcceptor::from),
        }
    }
}

impl Guard {
    pub fn new(users: Option<Users>, headers: &[(String, String)]) -> Guard {
        let headers = headers
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    HeaderName::try_from(k).ok()?,
                    HeaderValue::try_from(v).ok()?,
                ))
            })
            .collect();
        Guard {
            users: users.map(Arc::new),
            headers: Arc::new(headers),
        }
    }
}

pub(super) enum Auth {
    Passed,
    Denied,
    Busy,
}

/// Basic auth: a remembered success passes at once, without bcrypt and without waiting
/// behind anyone; anything else waits its turn for the one bcrypt check at a time.
pub(super) async fn authorize(web: &Web, guard: &Guard, headers: &HeaderMap) -> Auth {
    let Some(users) = &guard.users else {
        return Auth::Passed;
    };
    let Some((user, password)) = basic_credentials(headers) else {
        return Auth::Denied;
    };
    let key = web.remembered.key(&user, &password, users.hash_of(&user));
    if web.remembered.contains(key) {
        return Auth::Passed;
    }
    let turn = tokio::time::timeout(AUTH_QUEUE_WAIT, web.checks.clone().acquire_owned());
    let Ok(Ok(turn)) = turn.await else {
        return Auth::Busy;
    };
    // The same credentials may have passed while this one waited.
    if web.remembered.contains(key) {
        return Auth::Passed;
    }
    let users = users.clone();
    // The turn is held by the check itself, so a client that hangs up does not free it
    // for another check while bcrypt still runs.
    let passed = tokio::task::spawn_blocking(move || {
        let _turn = turn;
        users.check(&user, &password)
    })
    .await
    .unwrap_or(false);
    if passed {
        web.remembered.insert(key);
        Auth::Passed
    } else {
        Auth::Denied
    }
}

/// `Authorization: Basic base64(user:password)`.
fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    credentials(headers.get(header::AUTHORIZATION)?.to_str().ok()?)
}

/// The user and password of an `Authorization` value, when it is `Basic` and well formed.
pub fn credentials(value: &str) -> Option<(String, String)> {
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let (user, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}
