//! One real redis-server process owned by a test.

use std::fs::{self, OpenOptions};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::binary::redis_server_path;
use crate::port::free_port;
use crate::process::{is_alive, signal};
use crate::resp::{Connection, RespValue};

const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
const STOP_GRACE: Duration = Duration::from_secs(5);
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// Free ports can be taken between probing and binding; a few retries make
/// that race practically invisible.
const PORT_ATTEMPTS: usize = 5;

#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// Appended after the harness's own flags, so they win, e.g. `--maxmemory 1mb`.
    pub extra_args: Vec<String>,
    pub requirepass: Option<String>,
    /// PR_SET_PDEATHSIG fires when the spawning *thread* exits, and Rust tests
    /// run on short-lived threads, so only long-lived launchers (the CLI's main
    /// thread) should turn this on.
    pub die_with_parent: bool,
    /// Puts the server in its own session so a terminal Ctrl-C aimed at the
    /// launcher's process group does not kill it behind the harness's back.
    pub new_session: bool,
}

impl ServerOptions {
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.extra_args.push(arg.into());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.extra_args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn requirepass(mut self, password: impl Into<String>) -> Self {
        self.requirepass = Some(password.into());
        self
    }

    pub fn die_with_parent(mut self, on: bool) -> Self {
        self.die_with_parent = on;
        self
    }

    pub fn new_session(mut self, on: bool) -> Self {
        self.new_session = on;
        self
    }

    /// For a multi-server topology's data nodes: the topology's own flags
    /// first, so the caller's `extra_args` still win.
    pub(crate) fn with_leading_args<I: IntoIterator<Item = S>, S: Into<String>>(
        &self,
        args: I,
    ) -> Self {
        let mut extra_args: Vec<String> = args.into_iter().map(Into::into).collect();
        extra_args.extend(self.extra_args.iter().cloned());
        ServerOptions {
            extra_args,
            ..self.clone()
        }
    }

    /// Only how the process is run (parent death, session), for helpers such
    /// as Sentinels that must not get data-node flags.
    pub(crate) fn process_only(&self) -> Self {
        ServerOptions {
            die_with_parent: self.die_with_parent,
            new_session: self.new_session,
            ..ServerOptions::default()
        }
    }

    /// Sentinel and Cluster would need the password threaded through
    /// `masterauth`, `sentinel auth-pass` and MIGRATE; no test needs that yet,
    /// so say so instead of starting a half-authenticated deployment.
    pub(crate) fn reject_password(&self, topology: &str) -> io::Result<()> {
        match self.requirepass {
            Some(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("requirepass is not supported for the {topology} topology"),
            )),
            None => Ok(()),
        }
    }
}

/// Where a server that outlives its launcher can be found, so a later
/// `rl-harness stop` can clean it up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetachedServer {
    pub url: String,
    pub port: u16,
    pub pid: u32,
    pub dir: PathBuf,
}

/// Stopped on drop, so a panicking test never leaks a server.
#[derive(Debug)]
pub struct RedisServer {
    options: ServerOptions,
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    pid: u32,
    frozen: bool,
    /// Sentinel directives; `Some` runs the process as `redis-server
    /// sentinel.conf --sentinel`. Sentinel rewrites its config file at run
    /// time, so the text is written into `dir` on every launch.
    sentinel_config: Option<String>,
}

impl RedisServer {
    pub fn start() -> io::Result<Self> {
        Self::start_with(ServerOptions::default())
    }

    pub fn start_with(options: ServerOptions) -> io::Result<Self> {
        Self::start_inner(options, None)
    }

    /// A Sentinel whose config file holds `config` (e.g. `sentinel monitor ...`
    /// lines); the port, bind address and directory are the harness's own.
    pub(crate) fn start_sentinel(options: ServerOptions, config: String) -> io::Result<Self> {
        Self::start_inner(options, Some(config))
    }

    fn start_inner(options: ServerOptions, sentinel_config: Option<String>) -> io::Result<Self> {
        let binary = redis_server_path()?;
        let mut last_err = None;
        for _ in 0..PORT_ATTEMPTS {
            let port = free_port()?;
            let mut server = RedisServer {
                options: options.clone(),
                port,
                dir: fresh_dir(port),
                child: None,
                pid: 0,
                frozen: false,
                sentinel_config: sentinel_config.clone(),
            };
            match server.launch(&binary) {
                Ok(()) => return Ok(server),
                // Dropping `server` removes its directory before the next try.
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => last_err = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_err.expect("PORT_ATTEMPTS > 0"))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The current process, or the last one if it has been stopped or killed.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    pub fn url(&self) -> String {
        match &self.options.requirepass {
            Some(pw) => format!("redis://:{}@127.0.0.1:{}/", percent_encode(pw), self.port),
            None => format!("redis://127.0.0.1:{}/", self.port),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn options(&self) -> &ServerOptions {
        &self.options
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some() && is_alive(self.pid)
    }

    /// The end of the server's log, for error messages that explain themselves.
    pub fn log_tail(&self) -> String {
        let log = fs::read(self.dir.join("redis.log")).unwrap_or_default();
        let text = String::from_utf8_lossy(&log);
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// A new connection (authenticated if needed) whose reads give up after
    /// `timeout`, which is how tests observe a frozen server.
    pub fn connect(&self, timeout: Duration) -> io::Result<Connection> {
        Connection::open(self.addr(), self.options.requirepass.as_deref(), timeout)
    }

    pub fn command(&self, args: &[&[u8]]) -> io::Result<RespValue> {
        self.connect(COMMAND_TIMEOUT)?.command(args)
    }

    pub fn ping(&self, timeout: Duration) -> io::Result<()> {
        match self.connect(timeout)?.command(&[b"PING"])? {
            RespValue::Simple(s) if s == "PONG" => Ok(()),
            other => Err(io::Error::other(format!("PING answered {other:?}"))),
        }
    }

    pub fn freeze(&mut self) -> io::Result<()> {
        signal(self.running_pid()?, libc::SIGSTOP)?;
        self.frozen = true;
        Ok(())
    }

    pub fn thaw(&mut self) -> io::Result<()> {
        signal(self.running_pid()?, libc::SIGCONT)?;
        self.frozen = false;
        Ok(())
    }

    /// A crash: no shutdown, and the directory stays so the log can be read
    /// and `restart` can bring the server back.
    pub fn kill(&mut self) -> io::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill()?;
            child.wait()?;
        }
        self.frozen = false;
        Ok(())
    }

    /// Graceful shutdown, escalating to SIGKILL; idempotent.
    pub fn stop(&mut self) -> io::Result<()> {
        if let Some(mut child) = self.child.take() {
            if child.try_wait()?.is_none() {
                if self.frozen {
                    signal(self.pid, libc::SIGCONT)?;
                }
                signal(self.pid, libc::SIGTERM)?;
                let deadline = Instant::now() + STOP_GRACE;
                while child.try_wait()?.is_none() {
                    if Instant::now() >= deadline {
                        child.kill()?;
                        child.wait()?;
                        break;
                    }
                    sleep(Duration::from_millis(5));
                }
            }
        }
        self.frozen = false;
        match fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Brings the server back on the same port, as clients expect after an
    /// outage. Data is not kept: persistence is off.
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop()?;
        self.launch(&redis_server_path()?)
    }

    /// Lets the server outlive this handle; the caller is now responsible for
    /// stopping it (e.g. `rl-harness stop --pid`).
    pub fn detach(mut self) -> DetachedServer {
        drop(self.child.take()); // dropping a Child neither kills nor waits
        DetachedServer {
            url: self.url(),
            port: self.port,
            pid: self.pid,
            dir: std::mem::take(&mut self.dir),
        }
    }

    fn running_pid(&self) -> io::Result<u32> {
        match self.child {
            Some(_) => Ok(self.pid),
            None => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "redis-server is not running",
            )),
        }
    }

    fn launch(&mut self, binary: &Path) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let log_path = self.dir.join("redis.log");
        // Startup errors (bad flags) go to stderr before the logfile is open;
        // sending both to the same file keeps the whole story in one place.
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?;
        let mut cmd = Command::new(binary);
        if let Some(config) = &self.sentinel_config {
            // The config file must come first on the command line.
            let path = self.dir.join("sentinel.conf");
            fs::write(&path, config)?;
            cmd.arg(path).arg("--sentinel");
        }
        cmd.args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--protected-mode",
                "no",
            ])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(&log_path);
        if let Some(pw) = &self.options.requirepass {
            cmd.args(["--requirepass", pw]);
        }
        cmd.args(&self.options.extra_args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let (die_with_parent, new_session) =
            (self.options.die_with_parent, self.options.new_session);
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: only async-signal-safe libc calls run between fork and exec.
        unsafe {
            cmd.pre_exec(move || pre_exec_setup(die_with_parent.then_some(parent), new_session));
        }
        let child = cmd.spawn()?;
        self.pid = child.id();
        self.child = Some(child);
        self.frozen = false;
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            let child = self.child.as_mut().expect("launched");
            if let Some(status) = child.try_wait()? {
                self.child = None;
                let tail = self.log_tail();
                let kind = if tail.contains("Address already in use") {
                    io::ErrorKind::AddrInUse
                } else {
                    io::ErrorKind::Other
                };
                let msg = format!(
                    "redis-server on port {} exited during startup ({status}); log:\n{tail}",
                    self.port
                );
                return Err(io::Error::new(kind, msg));
            }
            if self.answers_as_us() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let _ = self.kill();
                let msg = format!(
                    "redis-server on port {} did not answer PING within {STARTUP_TIMEOUT:?}; log:\n{}",
                    self.port,
                    self.log_tail()
                );
                return Err(io::Error::new(io::ErrorKind::TimedOut, msg));
            }
            sleep(Duration::from_millis(10));
        }
    }

    /// PING alone could be answered by another server that won the port race
    /// while ours is still failing to bind, so check the process id too.
    fn answers_as_us(&self) -> bool {
        let Ok(mut conn) = self.connect(Duration::from_millis(500)) else {
            return false;
        };
        let Ok(RespValue::Bulk(info)) = conn.command(&[b"INFO", b"server"]) else {
            return false;
        };
        String::from_utf8_lossy(&info)
            .lines()
            .any(|l| l.trim() == format!("process_id:{}", self.pid))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // An empty dir marks a detached server, which is no longer ours to stop.
        if !self.dir.as_os_str().is_empty() {
            let _ = self.stop();
        }
    }
}

fn pre_exec_setup(die_with: Option<libc::pid_t>, new_session: bool) -> io::Result<()> {
    // SAFETY: plain syscalls with no pointers we own.
    unsafe {
        if new_session && libc::setsid() < 0 {
            return Err(io::Error::last_os_error());
        }
        if let Some(parent) = die_with {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
        }
    }
    Ok(())
}

fn fresh_dir(port: u16) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!("rl-redis-{}-{port}-{nanos}", std::process::id()))
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
