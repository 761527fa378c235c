//! The web config, read again while the exporter runs.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::serve::auth::Web;
use crate::serve::webconfig::WebConfig;

/// How often the web config's files are checked for a change.
const WEB_CONFIG_POLL: Duration = Duration::from_secs(5);

/// Re-reads `--web.config.file` on SIGHUP and when it or a TLS file it names changes, as
/// exporter-toolkit does; a file that fails to load is logged and the last good config
/// stays in force. SIGHUP is handled even without a web config, so a `systemctl reload`
/// or a log rotation never ends the exporter.
pub(super) async fn reload_web_config(
    web: Arc<Web>,
    path: Option<PathBuf>,
    mut files: Vec<PathBuf>,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        crate::log!(Warn, "cannot handle SIGHUP: it will end the exporter");
        return;
    };
    let mut stamps = modified(&files);
    let mut poll = tokio::time::interval(WEB_CONFIG_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let why = tokio::select! {
            _ = hup.recv() => "SIGHUP",
            _ = poll.tick() => {
                let now = modified(&files);
                if now == stamps {
                    continue;
                }
                stamps = now;
                "a changed file"
            }
        };
        let Some(path) = &path else {
            crate::log!(Info, "nothing to reload", trigger = why);
            continue;
        };
        match WebConfig::load(path) {
            Ok(config) => {
                files = config.files.clone();
                stamps = modified(&files);
                web.set(config);
                crate::log!(
                    Info,
                    "web config reloaded",
                    trigger = why,
                    file = path.display()
                );
            }
            Err(e) => crate::log!(
                Warn,
                "web config not reloaded: keeping the one in force",
                trigger = why,
                err = e
            ),
        }
    }
}

/// Modification time and size of each file (None when it cannot be read).
fn modified(files: &[PathBuf]) -> Vec<Option<(std::time::SystemTime, u64)>> {
    files
        .iter()
        .map(|f| {
            let m = std::fs::metadata(f).ok()?;
            Some((m.modified().ok()?, m.len()))
        })
        .collect()
}
