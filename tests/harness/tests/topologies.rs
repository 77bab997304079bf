//! Sentinel and Cluster deployments against real redis-server processes.

use std::path::PathBuf;
use std::thread::sleep;
use std::time::{Duration, Instant};

use rl_harness::process::is_alive;
use rl_harness::{
    key_slot, Cluster, Deployment, RedisServer, RespValue, SentinelTrio, ServerOptions, Topology,
    MASTER_NAME,
};

fn ok() -> RespValue {
    RespValue::Simple("OK".into())
}

/// Pid and directory of every process, to check nothing outlives its owner.
fn footprint(servers: &[RedisServer]) -> Vec<(u32, PathBuf)> {
    servers
        .iter()
        .map(|s| (s.pid(), s.dir().to_path_buf()))
        .collect()
}

fn assert_all_gone(footprint: &[(u32, PathBuf)]) {
    for (pid, dir) in footprint {
        assert!(!is_alive(*pid), "pid {pid} is still running");
        assert!(!dir.exists(), "{} was left behind", dir.display());
    }
}

/// Replication is asynchronous, so give the replica a moment.
fn eventually_get(server: &RedisServer, key: &[u8]) -> RespValue {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let value = server.command(&[b"GET", key]).unwrap();
        if value != RespValue::Nil || Instant::now() >= deadline {
            return value;
        }
        sleep(Duration::from_millis(20));
    }
}

#[test]
fn sentinel_trio_replicates_and_fails_over_to_the_replica() {
    let started = Instant::now();
    let mut trio = SentinelTrio::start().unwrap();
    eprintln!("sentinel trio started in {:?}", started.elapsed());
    let gone = footprint(trio.servers());
    assert_eq!(gone.len(), 5);

    let ports = trio.sentinel_ports();
    assert_eq!(
        trio.url(),
        format!(
            "redis+sentinel://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}/{MASTER_NAME}",
            ports[0], ports[1], ports[2]
        )
    );
    assert_eq!(trio.current_primary_port().unwrap(), trio.primary().port());
    for sentinel in trio.sentinels() {
        assert!(sentinel.dir().join("sentinel.conf").exists());
    }

    assert_eq!(trio.primary().command(&[b"SET", b"k", b"v"]).unwrap(), ok());
    assert_eq!(
        eventually_get(trio.replica(), b"k"),
        RespValue::Bulk(b"v".to_vec())
    );
    let refused = trio.replica().command(&[b"SET", b"k", b"w"]).unwrap();
    assert!(
        matches!(&refused, RespValue::Error(e) if e.starts_with("READONLY")),
        "{refused:?}"
    );

    let old_primary = trio.primary().pid();
    trio.kill_primary().unwrap();
    assert!(!is_alive(old_primary));
    let killed = Instant::now();
    let new_port = trio.wait_for_failover(Duration::from_secs(15)).unwrap();
    eprintln!("failover took {:?}", killed.elapsed());
    assert_eq!(new_port, trio.replica().port());
    assert_eq!(trio.current_primary_port().unwrap(), new_port);
    assert_eq!(trio.replica().command(&[b"SET", b"k", b"w"]).unwrap(), ok());
    assert_eq!(
        trio.replica().command(&[b"GET", b"k"]).unwrap(),
        RespValue::Bulk(b"w".to_vec())
    );

    drop(trio);
    assert_all_gone(&gone);
}

#[test]
fn cluster_serves_every_slot_and_migrates_a_slot_with_its_key() {
    let started = Instant::now();
    let cluster = Cluster::start().unwrap();
    eprintln!("cluster started in {:?}", started.elapsed());
    let gone = footprint(cluster.nodes());
    let nodes = cluster.nodes();
    assert_eq!(nodes.len(), 3);
    assert_eq!(
        cluster.url(),
        format!(
            "redis+cluster://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}",
            nodes[0].port(),
            nodes[1].port(),
            nodes[2].port()
        )
    );
    for node in nodes {
        let info = node.command(&[b"CLUSTER", b"INFO"]).unwrap();
        assert!(info.as_str().unwrap().contains("cluster_state:ok"));
        assert!(node.dir().join("nodes.conf").exists());
    }
    let ids: Vec<String> = (0..3).map(|i| cluster.node_id(i).unwrap()).collect();
    assert!(ids.iter().all(|id| id.len() == 40));
    assert_eq!(
        [0, 5460, 5461, 10922, 10923, 16383].map(|slot| cluster.slot_owner(slot).unwrap()),
        [0, 0, 1, 1, 2, 2]
    );

    // key_slot agrees with the server, hash tags included.
    for key in [
        &b"foo"[..],
        b"{user1000}.following",
        b"foo{}{bar}",
        b"a{b}c",
        b"",
    ] {
        let reply = nodes[0].command(&[b"CLUSTER", b"KEYSLOT", key]).unwrap();
        assert_eq!(reply.as_int(), Some(i64::from(key_slot(key))), "{key:?}");
    }

    let slot = key_slot(b"foo");
    let from = cluster.key_owner(b"foo").unwrap();
    let to = (from + 1) % 3;
    assert_eq!(
        nodes[from].command(&[b"SET", b"foo", b"bar"]).unwrap(),
        ok()
    );
    let elsewhere = nodes[to].command(&[b"GET", b"foo"]).unwrap();
    assert!(
        matches!(&elsewhere, RespValue::Error(e) if e.starts_with("MOVED")),
        "{elsewhere:?}"
    );

    cluster.migrate_slot(slot, to).unwrap();
    assert_eq!(cluster.slot_owner(slot).unwrap(), to);
    assert_eq!(
        nodes[to].command(&[b"GET", b"foo"]).unwrap(),
        RespValue::Bulk(b"bar".to_vec())
    );
    let moved = nodes[from].command(&[b"GET", b"foo"]).unwrap();
    assert_eq!(
        moved,
        RespValue::Error(format!("MOVED {slot} 127.0.0.1:{}", nodes[to].port()))
    );
    assert!(cluster.migrate_slot(slot, to).is_err(), "already there");

    drop(cluster);
    assert_all_gone(&gone);
}

#[test]
fn cluster_with_replicas_fails_over_a_killed_master_to_its_replica() {
    let started = Instant::now();
    let mut cluster = Cluster::start_with_replicas(ServerOptions::default()).unwrap();
    eprintln!("6-node cluster started in {:?}", started.elapsed());
    let gone = footprint(cluster.nodes());
    assert_eq!(gone.len(), 6);
    let master = cluster.key_owner(b"foo").unwrap();
    assert!(master < 3, "a replica does not own slots: {master}");
    let replica = cluster.replica_of(master).unwrap();
    assert!(cluster.replica_of(3).is_err());
    let role = cluster.nodes()[replica].command(&[b"ROLE"]).unwrap();
    assert!(
        matches!(&role, RespValue::Array(r) if r[0].as_str() == Some("slave")),
        "{role:?}"
    );
    assert_eq!(
        cluster.nodes()[master]
            .command(&[b"SET", b"foo", b"bar"])
            .unwrap(),
        ok()
    );
    // Replication is asynchronous. A replica answers GET with MOVED unless the client sent
    // READONLY, so count its keys instead.
    let deadline = Instant::now() + Duration::from_secs(5);
    while cluster.nodes()[replica]
        .command(&[b"DBSIZE"])
        .unwrap()
        .as_int()
        != Some(1)
    {
        assert!(
            Instant::now() < deadline,
            "the key never reached the replica"
        );
        sleep(Duration::from_millis(20));
    }

    cluster.nodes_mut()[master].kill().unwrap();
    let killed = Instant::now();
    let owner = cluster
        .wait_for_failover(key_slot(b"foo"), master, Duration::from_secs(20))
        .unwrap();
    eprintln!("cluster failover took {:?}", killed.elapsed());
    assert_eq!(owner, replica);
    assert_eq!(
        cluster.nodes()[owner].command(&[b"GET", b"foo"]).unwrap(),
        RespValue::Bulk(b"bar".to_vec())
    );
    assert_eq!(
        cluster.nodes()[owner]
            .command(&[b"SET", b"foo", b"baz"])
            .unwrap(),
        ok()
    );

    drop(cluster);
    assert_all_gone(&gone);
}

#[test]
fn slow_migration_leaves_the_slot_half_moved_for_a_while() {
    let cluster = Cluster::start().unwrap();
    let gone = footprint(cluster.nodes());
    let nodes = cluster.nodes();
    let keys: Vec<String> = (0..40).map(|i| format!("{{limiter}}:{i}")).collect();
    let slot = key_slot(keys[0].as_bytes());
    let from = cluster.slot_owner(slot).unwrap();
    let to = (from + 2) % 3;
    for key in &keys {
        assert_eq!(
            nodes[from]
                .command(&[b"SET", key.as_bytes(), b"1"])
                .unwrap(),
            ok()
        );
    }

    let mut saw_ask = false;
    std::thread::scope(|scope| {
        let migration =
            scope.spawn(|| cluster.migrate_slot_slowly(slot, to, Duration::from_millis(100), 5));
        // The first batch is moved before the first pause, so the source soon
        // redirects for those keys while the rest still lives there.
        let mut conn = nodes[from].connect(Duration::from_secs(5)).unwrap();
        while !migration.is_finished() {
            for key in &keys {
                let reply = conn.command(&[b"GET", key.as_bytes()]).unwrap();
                saw_ask |= matches!(&reply, RespValue::Error(e) if e.starts_with("ASK "));
            }
            sleep(Duration::from_millis(10));
        }
        migration.join().unwrap().unwrap();
    });
    assert!(saw_ask, "the source never answered -ASK mid-migration");
    assert_eq!(nodes[from].command(&[b"DBSIZE"]).unwrap().as_int(), Some(0));
    assert_eq!(nodes[to].command(&[b"DBSIZE"]).unwrap().as_int(), Some(40));

    drop(cluster);
    assert_all_gone(&gone);
}

#[test]
fn deployments_export_the_topology_url() {
    for topology in [Topology::Sentinel, Topology::Cluster] {
        let mut deployment = Deployment::start(topology, ServerOptions::default()).unwrap();
        assert_eq!(deployment.topology(), topology);
        let gone = footprint(deployment.servers());
        let env = deployment.env();
        let url = deployment.url();
        assert!(env.contains(&(rl_harness::ENV_URL, url.clone())));
        let entry = deployment.entry();
        assert!(env.contains(&(rl_harness::ENV_PORT, entry.port().to_string())));
        match topology {
            Topology::Sentinel => {
                let trio = deployment.sentinel().unwrap();
                assert!(url.starts_with("redis+sentinel://"), "{url}");
                assert_eq!(entry.port(), trio.primary().port());
                assert_eq!(deployment.servers().len(), 5);
            }
            _ => {
                assert!(url.starts_with("redis+cluster://"), "{url}");
                assert_eq!(
                    deployment.cluster().unwrap().nodes()[0].port(),
                    entry.port()
                );
                assert_eq!(deployment.servers().len(), 3);
            }
        }
        deployment.stop().unwrap();
        assert_all_gone(&gone);
    }
}

#[test]
fn password_is_refused_for_multi_server_topologies() {
    for topology in [Topology::Sentinel, Topology::Cluster] {
        let err =
            Deployment::start(topology, ServerOptions::default().requirepass("pw")).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::Unsupported, "{err}");
    }
}
