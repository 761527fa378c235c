//! Serving: the routes and their limits (`http`), accepting connections and the
//! connection cap (`listen`, `conns`), response bodies (`body`), who may ask (`auth`, from
//! `--web.config.file`, read by `webconfig`), and the published scan both share
//! (`shared`).
//! Nothing here reads /proc: handlers copy what the scan loop published.

pub mod auth;
mod body;
mod conns;
pub mod http;
pub mod listen;
pub mod negotiate;
pub mod shared;
pub mod webconfig;
