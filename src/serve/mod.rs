//! Serving: the HTTP server and its hardening (`http`), TLS and basic auth from
//! `--web.config.file` (`webconfig`), and the published scan both share (`shared`).
//! Nothing here reads /proc: handlers copy what the scan loop published.

mod conns;
pub mod http;
pub mod negotiate;
pub mod shared;
pub mod webconfig;
