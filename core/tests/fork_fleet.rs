//! A forked child is a new instance of the fleet, not its parent's twin: its own id in the
//! heartbeats (so `instances` counts every worker of a `gunicorn --preload` fleet and each one's
//! local budget is its share), its own flush counter and record (repair tokens never collide, and
//! the parent's unflushed local permits are written back by the parent alone). Alone in its test
//! binary so no other test thread is running when it forks.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::*;
use rl_core::Options;

#[test]
fn each_forked_child_is_its_own_instance() {
    const CHILDREN: usize = 3;
    let server = server();
    // Fallback on: heartbeats run, and the fleet is counted from them.
    let limiter = blocking_with(&server, Options::default());
    assert!(limiter.acquire("fleet", 100, 60_000, 1).unwrap().allowed);
    let parent_id = limiter.instance_id().unwrap().to_string();
    wait_until(
        "the parent's own heartbeat",
        Duration::from_secs(10),
        || limiter.stats().instances == 1,
    );

    let mut children = Vec::new();
    for _ in 0..CHILDREN {
        let mut fds = [0; 2];
        // SAFETY: a plain pipe for the child's report.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the child only runs our code and leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            unsafe { libc::close(fds[0]) };
            let d = limiter.acquire("fleet", 100, 60_000, 1);
            let id = limiter.instance_id().unwrap_or("").to_string();
            // Every member of the fleet (parent + children) must be counted, by heartbeats (before
            // its first heartbeat an instance counts the cold-start default, not the fleet).
            let start = Instant::now();
            let mut instances = limiter.stats().instances;
            while instances != (CHILDREN + 1) as u64 && start.elapsed() < Duration::from_secs(15) {
                let _ = limiter.acquire("fleet", 100, 60_000, 1);
                std::thread::sleep(Duration::from_millis(50));
                instances = limiter.stats().instances;
            }
            let stats = limiter.stats();
            let report = format!(
                "{}\n{}\n{}\n{}\n",
                id,
                instances,
                d.map(|d| d.allowed).unwrap_or(false),
                stats.transitions_to_local
            );
            let mut f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
            let _ = f.write_all(report.as_bytes());
            drop(f);
            // Stay alive (heartbeating) until the others have counted us too.
            std::thread::sleep(Duration::from_millis(1500));
            unsafe { libc::_exit(0) };
        }
        unsafe { libc::close(fds[1]) };
        children.push((pid, fds[0]));
    }
    // The parent keeps heartbeating while the children count.
    let mut reports = Vec::new();
    for (pid, fd) in children {
        let mut f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let mut text = String::new();
        f.read_to_string(&mut text).unwrap();
        assert_eq!(
            wait_with_deadline(pid, Duration::from_secs(30)),
            Some(0),
            "child {pid} hung or failed"
        );
        reports.push(text);
    }
    let mut ids = vec![parent_id.clone()];
    for r in &reports {
        let lines: Vec<&str> = r.lines().collect();
        assert_eq!(lines.len(), 4, "child report: {r:?}");
        assert!(!lines[0].is_empty(), "child has an instance id");
        assert_ne!(
            lines[0], parent_id,
            "a child must not reuse its parent's instance id"
        );
        assert_eq!(
            lines[1],
            (CHILDREN + 1).to_string(),
            "the child must count the parent and every child: {r:?}"
        );
        assert_eq!(lines[2], "true", "the child's first call is admitted");
        ids.push(lines[0].to_string());
    }
    let mut distinct = ids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        ids.len(),
        "every instance id is distinct: {ids:?}"
    );
    // The fleet ZSET holds one member per process.
    let members = match cmd(&server, &[b"ZRANGE", b"rl:instances", b"0", b"-1"]) {
        rl_harness::RespValue::Array(items) => items
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes().unwrap()).into_owned())
            .collect::<Vec<_>>(),
        other => panic!("ZRANGE: {other:?}"),
    };
    for id in &ids {
        assert!(
            members.contains(id),
            "{id} is in the fleet's heartbeats {members:?}"
        );
    }
    // The parent is unaffected and counts the children while their heartbeats are live.
    assert_eq!(limiter.instance_id().unwrap(), parent_id);
}
