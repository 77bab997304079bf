//! `rl-harness`: gives the Python/Node/Java/C suites the same real Redis the
//! Rust tests get, without each of them reimplementing process management.

use std::path::Path;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicI32, Ordering};
use std::thread::sleep;
use std::time::Duration;

use rl_harness::{process, Deployment, RedisServer, ServerOptions, Topology};

const USAGE: &str = "\
rl-harness: run tests against a throwaway redis-server on 127.0.0.1

USAGE:
    rl-harness run [--topology standalone|sentinel|cluster] [--] CMD [ARGS...]
        Start the servers, run CMD with RL_TEST_REDIS_URL, RL_TEST_REDIS_PORT,
        RL_TEST_REDIS_PID, RL_TEST_REDIS_DIR (holds redis.log) and RL_HARNESS
        set, stop the servers, and exit with CMD's exit code (128+N if CMD died
        of signal N). SIGTERM/SIGINT/SIGHUP sent to the harness are forwarded
        to CMD; the servers die with the harness even on SIGKILL (their
        directories are then left behind).

TOPOLOGIES:
    standalone  one server; URL redis://127.0.0.1:PORT/
    sentinel    primary, replica and 3 Sentinels monitoring it as \"rlmaster\";
                URL redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/rlmaster
    cluster     3 Cluster masters, no replicas;
                URL redis+cluster://127.0.0.1:N1,127.0.0.1:N2,127.0.0.1:N3
    PORT, PID and DIR describe the primary (sentinel) or the first node (cluster).

    rl-harness start [--topology standalone] [--json]
        Start a server that outlives this command and print where it is
        (standalone only: `stop` takes one pid):
        `export VAR=...` lines for `eval`, or with --json one line
        {\"url\":...,\"port\":...,\"pid\":...,\"dir\":...}.

    rl-harness stop --pid PID [--dir DIR]
        Stop a server from `start` (SIGTERM, then SIGKILL after 5 s) and
        remove its directory.

ENVIRONMENT:
    RL_REDIS_SERVER   redis-server binary to use (default: PATH, /usr/bin, /usr/sbin)

EXIT CODES:
    CMD's code for `run`; 2 for usage errors; 125 if the harness itself failed.
";

/// Exit code for harness failures, distinct from anything a test runner uses
/// (same convention as `env`/`docker run`).
const HARNESS_FAILED: u8 = 125;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("run") => run(&args[1..]),
        Some("start") => start(&args[1..]),
        Some("stop") => stop(&args[1..]),
        Some("-h" | "--help" | "help") => {
            print!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        _ => Err(Failure::Usage(
            "expected a subcommand: run, start or stop".into(),
        )),
    };
    result.unwrap_or_else(|failure| match failure {
        Failure::Usage(msg) => {
            eprintln!("rl-harness: {msg}\n\n{USAGE}");
            ExitCode::from(2)
        }
        Failure::Harness(msg) => {
            eprintln!("rl-harness: {msg}");
            ExitCode::from(HARNESS_FAILED)
        }
    })
}

enum Failure {
    Usage(String),
    Harness(String),
}

fn harness_err(context: &str) -> impl FnOnce(std::io::Error) -> Failure + '_ {
    move |e| Failure::Harness(format!("{context}: {e}"))
}

fn run(args: &[String]) -> Result<ExitCode, Failure> {
    let (mut topology, mut i) = (Topology::default(), 0);
    while let Some(arg) = args.get(i).filter(|a| a.starts_with('-')) {
        i += 1;
        match arg.as_str() {
            "--" => break,
            "--topology" => topology = parse_topology(args.get(i))?,
            other => return Err(Failure::Usage(format!("unknown option {other:?} for run"))),
        }
        i += usize::from(arg == "--topology");
    }
    let Some((program, program_args)) = args[i.min(args.len())..].split_first() else {
        return Err(Failure::Usage("run needs a command to run".into()));
    };

    install_signal_handlers();
    // Only the main thread spawns, and it lives as long as the harness, so
    // PDEATHSIG here means "the server dies with the harness".
    let options = ServerOptions::default()
        .die_with_parent(true)
        .new_session(true);
    let mut deployment =
        Deployment::start(topology, options).map_err(harness_err("starting redis-server"))?;
    if PENDING_SIGNAL.load(Ordering::SeqCst) != 0 {
        return Err(Failure::Harness(
            "interrupted while starting redis-server".into(),
        ));
    }

    let mut command = Command::new(program);
    command.args(program_args).envs(deployment.env());
    if let Ok(me) = std::env::current_exe() {
        command.env("RL_HARNESS", me);
    }
    let mut child = command
        .spawn()
        .map_err(harness_err(&format!("running {program:?}")))?;
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .map_err(harness_err("waiting for the command"))?
        {
            break status;
        }
        // Negative: the tty driver already sent it to the child (same process
        // group), and forwarding it would look like a second, impatient Ctrl-C.
        let pending = PENDING_SIGNAL.swap(0, Ordering::SeqCst);
        if pending > 0 {
            let _ = process::signal(child.id(), pending);
        }
        sleep(Duration::from_millis(20));
    };
    deployment
        .stop()
        .map_err(harness_err("stopping redis-server"))?;

    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

fn start(args: &[String]) -> Result<ExitCode, Failure> {
    let (mut topology, mut json, mut it) = (Topology::default(), false, args.iter());
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--json" => json = true,
            "--topology" => topology = parse_topology(it.next())?,
            other => {
                return Err(Failure::Usage(format!(
                    "unknown option {other:?} for start"
                )))
            }
        }
    }
    // No PDEATHSIG: this server must outlive us. Its own session keeps the
    // caller's Ctrl-C from reaching it, and /dev/null stdio keeps it from
    // holding open a pipe the caller is reading our output from.
    let options = ServerOptions::default().new_session(true);
    let server = match topology {
        Topology::Standalone => {
            RedisServer::start_with(options).map_err(harness_err("starting redis-server"))?
        }
        Topology::Sentinel | Topology::Cluster => {
            return Err(Failure::Usage(format!(
                "start only supports --topology standalone; use `run --topology {topology}`"
            )))
        }
    };
    let d = server.detach();
    if json {
        let line = serde_json::json!({ "url": d.url, "port": d.port, "pid": d.pid, "dir": d.dir });
        println!("{line}");
    } else {
        println!("export RL_TEST_REDIS_URL='{}'", d.url);
        println!("export RL_TEST_REDIS_PORT={}", d.port);
        println!("export RL_TEST_REDIS_PID={}", d.pid);
        println!("export RL_TEST_REDIS_DIR='{}'", d.dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn stop(args: &[String]) -> Result<ExitCode, Failure> {
    let (mut pid, mut dir) = (None, None);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| Failure::Usage(format!("{arg} needs a value")));
        match arg.as_str() {
            "--pid" => {
                pid = Some(
                    value?
                        .parse::<u32>()
                        .map_err(|_| Failure::Usage("--pid takes a number".into()))?,
                )
            }
            "--dir" => dir = Some(value?),
            other => return Err(Failure::Usage(format!("unknown option {other:?} for stop"))),
        }
    }
    let pid = pid.ok_or_else(|| Failure::Usage("stop needs --pid PID".into()))?;
    if process::is_alive(pid) {
        // The pid may have been reused since `start`; never kill a stranger.
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmdline).contains("redis") {
            return Err(Failure::Harness(format!(
                "pid {pid} is not a redis-server; not stopping it"
            )));
        }
        process::terminate(pid, Duration::from_secs(5))
            .map_err(harness_err("stopping redis-server"))?;
    }
    if let Some(dir) = dir {
        let path = Path::new(&dir);
        // Guard against removing anything that is not one of our temp dirs.
        if !path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("rl-redis-"))
        {
            return Err(Failure::Usage(format!(
                "{dir:?} is not an rl-harness directory (rl-redis-*)"
            )));
        }
        match std::fs::remove_dir_all(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(harness_err("removing dir")(e))
            }
            _ => {}
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_topology(value: Option<&String>) -> Result<Topology, Failure> {
    let value = value.ok_or_else(|| Failure::Usage("--topology needs a value".into()))?;
    value.parse().map_err(Failure::Usage)
}

/// The last signal received: positive if sent with kill(2), negative if the
/// kernel sent it (e.g. Ctrl-C at a terminal).
static PENDING_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t with SA_SIGINFO.
    let code = unsafe { (*info).si_code };
    // si_code > 0 means the kernel sent it (e.g. the tty driver), not kill(2).
    PENDING_SIGNAL.store(if code > 0 { -sig } else { sig }, Ordering::SeqCst);
}

/// Instead of dying on the first signal (and leaving the server to
/// PDEATHSIG), the harness lets the command finish and then cleans up.
fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only touches atomics, which is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}
