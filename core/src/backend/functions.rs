//! The window script as a Redis Functions library (Redis >= 7): loaded once with `FUNCTION LOAD`
//! and called with `FCALL`, with EVALSHA (`script.rs`) where functions are refused.
//!
//! Why: a library's top level runs once, at load, so the script's helper functions are not made
//! anew on every call as under EVAL (a large part of a lone call's Redis CPU); and a library
//! persists and replicates, so a restart with persistence or a failover brings no `NOSCRIPT`.
//!
//! The library is generated from `lua/sliding_window.lua` itself, never a second copy: the file
//! up to its EVAL-only tail (see [`EVAL_TAIL`]) plus a `register_function` of its `entry`. Its
//! name carries the script's SHA1, so rl versions with different scripts keep their own library
//! side by side on one Redis, and identical versions share one. A gateway's EVALSHA of the file
//! (the design's convention) is untouched: same file, same window.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::LazyLock;

use redis::aio::ConnectionLike;
use redis::{RedisError, Value};

use super::script::{SLIDING_WINDOW, SLIDING_WINDOW_LUA};

/// The line of `lua/sliding_window.lua` from which on the file runs only under EVAL (it calls
/// `entry` with the global KEYS/ARGV); a library ends just before it.
const EVAL_TAIL: &str = "-- rl: the lines below run only under EVAL";

/// The Functions form of the window script.
pub struct Library {
    /// `rl_<first 16 hex digits of the script's SHA1>`.
    pub name: String,
    /// The one function it registers, `rl_window_<the same digits>`: FCALL's first argument.
    pub function: String,
    /// What `FUNCTION LOAD` takes.
    pub code: String,
}

/// `lua/sliding_window.lua` as a library, for callers that load it themselves (and tools).
pub static LIBRARY: LazyLock<Library> =
    LazyLock::new(|| library(SLIDING_WINDOW_LUA, SLIDING_WINDOW.get_hash()));

fn library(script: &str, sha: &str) -> Library {
    let body = script
        .find(EVAL_TAIL)
        .map(|at| &script[..at])
        .expect("lua/sliding_window.lua marks its EVAL-only tail");
    let id = &sha[..16];
    let (name, function) = (format!("rl_{id}"), format!("rl_window_{id}"));
    let code = format!(
        "#!lua name={name}\n{body}redis.register_function{{function_name='{function}', callback=entry}}\n"
    );
    Library {
        name,
        function,
        code,
    }
}

/// Not known yet (the initial state, 0) or FCALL works; both try FCALL.
const FUNCTIONS: u8 = 1;
const SCRIPTS: u8 = 2;

/// Which way one limiter calls the script: found out on its first call, not assumed. Once
/// functions are refused (Redis < 7, or an ACL user without `+fcall` / `+function|load`) it
/// stays on EVALSHA, and says so once in the log.
#[derive(Default)]
pub(crate) struct Caller {
    state: AtomicU8,
}

impl Caller {
    /// Calls the window script with `key` and `args` (the native convention), by FCALL, loading
    /// the library when the server lacks it (first use, `FUNCTION FLUSH`, a new Cluster master),
    /// or by EVALSHA once functions are refused.
    pub(crate) async fn call<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        key: &[u8],
        args: &[&[u8]],
    ) -> redis::RedisResult<Value> {
        self.call_keys(conn, &[key], args).await
    }

    /// [`Caller::call`] with several keys (a composite call's, all in one slot).
    pub(crate) async fn call_keys<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> redis::RedisResult<Value> {
        if self.state.load(Ordering::Relaxed) != SCRIPTS {
            let mut loaded = false;
            loop {
                match fcall(conn, keys, args).await {
                    Ok(v) => {
                        self.state.store(FUNCTIONS, Ordering::Relaxed);
                        return Ok(v);
                    }
                    Err(e) if missing(&e) && !loaded => {
                        // Every master of a Cluster (redis-rs routes FUNCTION LOAD to all of
                        // them); otherwise the primary, which replicates it.
                        let r = redis::cmd("FUNCTION")
                            .arg("LOAD")
                            .arg("REPLACE")
                            .arg(&LIBRARY.code)
                            .query_async::<Value>(conn)
                            .await;
                        match r {
                            Ok(_) => {
                                tracing::debug!(library = %LIBRARY.name, "rl: loaded the window library");
                                loaded = true;
                            }
                            Err(e) if refused(&e) => {
                                self.scripts(&e);
                                break;
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    Err(e) if refused(&e) => {
                        self.scripts(&e);
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        let mut inv = SLIDING_WINDOW.prepare_invoke();
        for k in keys {
            inv.key(*k);
        }
        for a in args {
            inv.arg(*a);
        }
        inv.invoke_async(conn).await
    }

    fn scripts(&self, why: &RedisError) {
        if self.state.swap(SCRIPTS, Ordering::Relaxed) != SCRIPTS {
            tracing::warn!(error = %why, "rl: Redis Functions refused; calling the window script by EVALSHA");
        }
    }
}

async fn fcall<C: ConnectionLike + Send>(
    conn: &mut C,
    keys: &[&[u8]],
    args: &[&[u8]],
) -> redis::RedisResult<Value> {
    // Sized once: growing the command argument by argument reallocated it several times a call.
    let bytes = keys.iter().chain(args).map(|a| a.len()).sum::<usize>() + 64;
    let mut c = redis::Cmd::with_capacity(3 + keys.len() + args.len(), bytes);
    c.arg("FCALL").arg(&LIBRARY.function).arg(keys.len());
    for k in keys {
        c.arg(*k);
    }
    for a in args {
        c.arg(*a);
    }
    c.query_async(conn).await
}

/// The server does not hold the library (yet).
fn missing(e: &RedisError) -> bool {
    e.detail()
        .is_some_and(|d| d.starts_with("Function not found"))
}

/// Functions are not for this client: a server without them (Redis < 7), or an ACL user that
/// may not run FCALL or FUNCTION LOAD.
fn refused(e: &RedisError) -> bool {
    e.code() == Some("NOPERM")
        || e.detail().is_some_and(|d| {
            d.starts_with("unknown command") || d.starts_with("unknown subcommand")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_the_script_up_to_its_eval_tail() {
        let l = &*LIBRARY;
        let id = &SLIDING_WINDOW.get_hash()[..16];
        assert_eq!(l.name, format!("rl_{id}"));
        assert_eq!(l.function, format!("rl_window_{id}"));
        let body = l
            .code
            .strip_prefix(&format!("#!lua name={}\n", l.name))
            .unwrap();
        let tail = SLIDING_WINDOW_LUA.find(EVAL_TAIL).unwrap();
        assert!(body.starts_with(&SLIDING_WINDOW_LUA[..tail]));
        assert_eq!(
            &body[tail..],
            format!(
                "redis.register_function{{function_name='{}', callback=entry}}\n",
                l.function
            )
        );
        // The tail is EVAL's call of the same `entry`, and nothing else.
        assert_eq!(
            SLIDING_WINDOW_LUA[tail..].lines().nth(1),
            Some("return entry(KEYS, ARGV)")
        );
        assert_eq!(SLIDING_WINDOW_LUA[tail..].trim_end().lines().count(), 2);
    }
}
