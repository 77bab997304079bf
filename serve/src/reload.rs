//! Live reload of the policies file: on a change (its files' size and mtime, polled) and on
//! SIGHUP. A file that does not load is refused, its line and reason logged, and the policies
//! in force stay. A swap never disturbs a check in flight: each check holds the policies it
//! started with (an `Arc` from `arc_swap`), so no request fails or changes meaning mid-way.
//!
//! Polling rather than inotify: one `stat` per file every interval works on every filesystem
//! (network mounts, ConfigMap symlink swaps in Kubernetes) and needs no dependency.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::config::{self, ConfigError};
use crate::Engine;

/// What identifies a version of the policies on disk.
type Fingerprint = Vec<(PathBuf, Option<(u64, SystemTime)>)>;

fn fingerprint(path: &Path, files: &[PathBuf]) -> Fingerprint {
    let mut list: Vec<PathBuf> = files.to_vec();
    if path.is_dir() {
        if let Ok(rd) = std::fs::read_dir(path) {
            list = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
            list.sort();
        }
    }
    list.into_iter()
        .map(|p| {
            let m = std::fs::metadata(&p)
                .ok()
                .and_then(|m| Some((m.len(), m.modified().ok()?)));
            (p, m)
        })
        .collect()
}

/// Reloads `path` into `engine` now: the number of limits in force, or why the file was
/// refused (the old policies stay).
pub fn reload(engine: &Engine, path: &Path) -> Result<usize, ConfigError> {
    match config::load(path, engine.metrics()) {
        Ok(p) => {
            let n = p.count();
            engine.swap(p);
            engine.metrics().reloaded(true);
            tracing::info!(file = %path.display(), limits = n, "policies loaded");
            Ok(n)
        }
        Err(e) => {
            engine.metrics().reloaded(false);
            tracing::error!(
                file = %e.file.display(),
                line = e.line,
                column = e.column,
                reason = %e.reason,
                "policies refused; the previous ones stay in force"
            );
            Err(e)
        }
    }
}

/// Watches `path` every `every`, and SIGHUP, for as long as the runtime runs.
pub fn spawn(engine: Arc<Engine>, path: PathBuf, every: Duration) {
    let files = engine.policies().files.clone();
    let mut seen = fingerprint(&path, &files);
    let (e2, p2) = (engine.clone(), path.clone());
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let files = e2.policies().files.clone();
            let now = fingerprint(&p2, &files);
            if now != seen {
                // A writer may still be writing: wait for the file to settle once.
                tokio::time::sleep(Duration::from_millis(50)).await;
                seen = fingerprint(&p2, &files);
                let (e, p) = (e2.clone(), p2.clone());
                let _ = tokio::task::spawn_blocking(move || reload(&e, &p)).await;
            }
        }
    });
    #[cfg(unix)]
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP; reload by editing the file");
            return;
        };
        while hup.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading the policies");
            let (e, p) = (engine.clone(), path.clone());
            let _ = tokio::task::spawn_blocking(move || reload(&e, &p)).await;
        }
    });
}
