//! The `rl-harness` binary, as the non-Rust suites will drive it.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use rl_harness::process::{is_alive, signal, wait_until_dead};
use rl_harness::{Connection, RespValue};

const BIN: &str = env!("CARGO_BIN_EXE_rl-harness");

fn harness(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn refuses(port: u16) -> bool {
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500)).is_err()
}

#[test]
fn run_exports_env_and_stops_the_server_afterwards() {
    let script = r#"test -n "$RL_TEST_REDIS_URL" && test -x "$RL_HARNESS" &&
        echo "$RL_TEST_REDIS_URL $RL_TEST_REDIS_PORT $RL_TEST_REDIS_PID""#;
    let out = harness(&["run", "--", "sh", "-c", script]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let [url, port, pid] = stdout.split_whitespace().collect::<Vec<_>>()[..] else {
        panic!("{stdout:?}")
    };
    assert_eq!(url, format!("redis://127.0.0.1:{port}/"));
    assert!(!is_alive(pid.parse().unwrap()));
    assert!(refuses(port.parse().unwrap()));
}

#[test]
fn run_propagates_the_exit_code() {
    assert_eq!(
        harness(&["run", "--", "sh", "-c", "exit 3"]).status.code(),
        Some(3)
    );
    assert_eq!(
        harness(&["run", "--topology", "standalone", "true"])
            .status
            .code(),
        Some(0)
    );
}

#[test]
fn run_gives_the_command_a_server_that_answers() {
    let script = r#"exec 3<>/dev/tcp/127.0.0.1/$RL_TEST_REDIS_PORT && printf 'PING\r\n' >&3 &&
        read -t 2 reply <&3 && test "$reply" = "$(printf '+PONG\r')""#;
    let out = harness(&["run", "--", "bash", "-c", script]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts `run` around a long sleep; returns it, the server pid, the sleep's
/// pid and the server dir.
fn run_sleeping() -> (std::process::Child, u32, u32, PathBuf) {
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "echo $RL_TEST_REDIS_PID $$ $RL_TEST_REDIS_DIR; exec sleep 30",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    let dir = PathBuf::from(words[2]);
    assert!(dir.join("redis.log").exists());
    (
        child,
        words[0].parse().unwrap(),
        words[1].parse().unwrap(),
        dir,
    )
}

#[test]
fn sigterm_to_run_is_forwarded_and_stops_the_server() {
    let (mut child, server_pid, sleep_pid, dir) = run_sleeping();
    assert!(is_alive(server_pid));
    signal(child.id(), libc::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
    assert!(!is_alive(server_pid));
    assert!(
        !is_alive(sleep_pid),
        "SIGTERM was not forwarded to the command"
    );
    assert!(!dir.exists());
}

#[test]
fn sigkill_to_run_still_kills_the_server() {
    let (mut child, server_pid, sleep_pid, dir) = run_sleeping();
    child.kill().unwrap();
    child.wait().unwrap();
    // Orphaned by the SIGKILL, which gave the harness no chance to clean up.
    let _ = signal(sleep_pid, libc::SIGKILL);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        wait_until_dead(server_pid, Duration::from_secs(5)),
        "PDEATHSIG did not fire"
    );
}

#[test]
fn start_leaves_a_server_running_and_stop_removes_it() {
    // `output()` returning at all shows the server does not hold our pipe open.
    let out = harness(&["start", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let port = info["port"].as_u64().unwrap() as u16;
    let pid = info["pid"].as_u64().unwrap() as u32;
    let dir = PathBuf::from(info["dir"].as_str().unwrap());
    assert_eq!(info["url"], format!("redis://127.0.0.1:{port}/"));

    let alive = is_alive(pid);
    let ping = Connection::open(([127, 0, 0, 1], port).into(), None, Duration::from_secs(2))
        .and_then(|mut c| c.command(&[b"PING"]));
    let out = harness(&[
        "stop",
        "--pid",
        &pid.to_string(),
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert!(alive, "server died when `start` exited");
    assert_eq!(ping.unwrap(), RespValue::Simple("PONG".into()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!is_alive(pid));
    assert!(refuses(port));
    assert!(!dir.exists());
}

#[test]
fn start_without_json_prints_shell_exports() {
    let out = harness(&["start"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let pid = text
        .lines()
        .find_map(|l| l.strip_prefix("export RL_TEST_REDIS_PID="))
        .unwrap()
        .to_string();
    let dir = text
        .lines()
        .find_map(|l| l.strip_prefix("export RL_TEST_REDIS_DIR="))
        .unwrap()
        .trim_matches('\'')
        .to_string();
    assert!(harness(&["stop", "--pid", &pid, "--dir", &dir])
        .status
        .success());
    assert!(
        text.contains("export RL_TEST_REDIS_URL='redis://127.0.0.1:"),
        "{text}"
    );
    assert!(!is_alive(pid.parse().unwrap()));
}

#[test]
fn stop_refuses_a_pid_that_is_not_redis() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let out = harness(&["stop", "--pid", &sleeper.id().to_string()]);
    let survived = is_alive(sleeper.id());
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(survived);
}

#[test]
fn usage_errors_and_help() {
    let help = harness(&["--help"]);
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("rl-harness run"));
    assert_eq!(harness(&[]).status.code(), Some(2));
    assert_eq!(harness(&["run"]).status.code(), Some(2));
    assert_eq!(
        harness(&["run", "--topology", "mesh", "--", "true"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(harness(&["stop"]).status.code(), Some(2));
}

#[test]
fn run_starts_sentinel_and_cluster_topologies() {
    for (topology, scheme, processes) in [
        ("sentinel", "redis+sentinel://", 5),
        ("cluster", "redis+cluster://", 3),
    ] {
        let script = r#"echo "$RL_TEST_REDIS_URL $RL_TEST_REDIS_PORT $RL_TEST_REDIS_PID";
            pgrep -P $PPID redis-server"#;
        let out = harness(&["run", "--topology", topology, "--", "sh", "-c", script]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        let mut lines = stdout.lines();
        let [url, port, pid] = lines.next().unwrap().split_whitespace().collect::<Vec<_>>()[..]
        else {
            panic!("{stdout:?}")
        };
        assert!(url.starts_with(scheme), "{url}");
        assert!(url.contains(&format!("127.0.0.1:{port}")) || topology == "sentinel");
        let pids: Vec<u32> = lines.map(|l| l.trim().parse().unwrap()).collect();
        assert_eq!(pids.len(), processes, "{stdout}");
        assert!(pids.contains(&pid.parse().unwrap()));
        for pid in pids {
            assert!(!is_alive(pid), "{topology}: pid {pid} outlived the harness");
        }
        assert!(refuses(port.parse().unwrap()));
    }
}
