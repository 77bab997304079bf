//! How a user key becomes a Redis key.
//!
//! `<prefix>{<escaped user key>}`: the braces make the whole escaped user key the Cluster hash tag,
//! so everything one limiter stores sits in one slot. Escaping `%`, `{` and `}` as `%25`, `%7B`,
//! `%7D` keeps the tag closed by our own brace (Redis ends a tag at the first `}`) and keeps the
//! mapping injective, so distinct user keys never share state, whatever bytes they hold. A key
//! with none of those three bytes is used verbatim, which lets a script-calling gateway build the
//! same name by hand: `rl:{api:order:create}`.

use crate::error::{Error, Result};

pub(crate) fn check_prefix(prefix: &str) -> Result<()> {
    if prefix.contains(['{', '}']) {
        return Err(Error::invalid(
            "key_prefix",
            format!("{prefix:?} contains a brace; the hash tag must come from the user key"),
        ));
    }
    if prefix.len() > 1024 {
        return Err(Error::invalid(
            "key_prefix",
            format!("is {} bytes; at most 1024", prefix.len()),
        ));
    }
    Ok(())
}

/// The Redis key holding `user_key`'s window.
pub fn redis_key(prefix: &str, user_key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + user_key.len() + 2);
    out.extend_from_slice(prefix.as_bytes());
    out.push(b'{');
    push_escaped(&mut out, user_key);
    out.push(b'}');
    out
}

/// The Redis key holding `user_key`'s window inside `group` (composite calls, `composite.rs`):
/// `<prefix>{<escaped group>}{<escaped user key>}`. Redis takes the first `{...}` as the hash tag,
/// so every key of one group sits in one Cluster slot. Distinct from every ungrouped key (which
/// holds one `}`, at its end; this holds two) and injective in (group, key) by the escaping; the
/// lease suffix `:l` still follows the last `}`.
pub fn group_key(prefix: &str, group: &[u8], user_key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + group.len() + user_key.len() + 4);
    out.extend_from_slice(prefix.as_bytes());
    out.push(b'{');
    push_escaped(&mut out, group);
    out.extend_from_slice(b"}{");
    push_escaped(&mut out, user_key);
    out.push(b'}');
    out
}

/// Appends `user_key` escaped: afterwards every `%` in it is followed by `25`, `7B` or `7D`, which
/// leaves any other `%` sequence free for rl's own suffixes (the sub-keys of `shards.rs`).
pub(crate) fn push_escaped(out: &mut Vec<u8>, user_key: &[u8]) {
    for &b in user_key {
        match b {
            b'%' => out.extend_from_slice(b"%25"),
            b'{' => out.extend_from_slice(b"%7B"),
            b'}' => out.extend_from_slice(b"%7D"),
            _ => out.push(b),
        }
    }
}

/// The HASH holding the leases on a window (`lua/sliding_window.lua`, convention 3): the window's
/// key plus `:l`, after its closing brace, so the same hash tag puts it in the same slot.
pub(crate) fn lease_key(redis_key: &[u8]) -> Vec<u8> {
    let mut k = redis_key.to_vec();
    k.extend_from_slice(b":l");
    k
}

/// The Cluster hash slot of a Redis key: CRC16 of its hash tag (the first non-empty `{...}`), or
/// of the whole key, modulo 16384. The failover repair uses it to tell which primary holds a key.
pub(crate) fn slot(redis_key: &[u8]) -> u16 {
    let tag = redis_key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &redis_key[open + 1..];
        let len = rest.iter().position(|&b| b == b'}')?;
        (len > 0).then(|| &rest[..len])
    });
    crc16::State::<crc16::XMODEM>::calculate(tag.unwrap_or(redis_key)) % crate::primaries::SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis_cluster_keyslot() {
        // CLUSTER KEYSLOT answers, and the Cluster spec's hash tag rules.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"123456789"), 12739);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(
            slot(b"foo{}{bar}"),
            crc16::State::<crc16::XMODEM>::calculate(b"foo{}{bar}") % 16384
        );
        assert_eq!(slot(&redis_key("rl:", b"api:order")), slot(b"api:order"));
    }

    #[test]
    fn plain_keys_are_verbatim_inside_the_tag() {
        assert_eq!(redis_key("rl:", b"api:order"), b"rl:{api:order}".to_vec());
    }

    #[test]
    fn braces_and_percent_are_escaped_injectively() {
        assert_eq!(redis_key("rl:", b"a}b{c%"), b"rl:{a%7Db%7Bc%25}".to_vec());
        // "%7D" typed by a user must not meet an escaped "}".
        assert_ne!(redis_key("rl:", b"%7D"), redis_key("rl:", b"}"));
    }

    #[test]
    fn grouped_keys_share_their_groups_slot_and_never_meet_plain_keys() {
        let g = group_key("rl:", b"tenant:7", b"ip:1.2.3.4");
        assert_eq!(g, b"rl:{tenant:7}{ip:1.2.3.4}".to_vec());
        assert_eq!(slot(&g), slot(b"tenant:7"));
        assert_eq!(slot(&group_key("rl:", b"tenant:7", b"user:9")), slot(&g));
        // A plain key cannot spell a grouped one: its braces are escaped.
        assert_ne!(redis_key("rl:", b"tenant:7}{ip:1.2.3.4"), g);
        // (group, key) pairs that concatenate alike stay apart.
        assert_ne!(
            group_key("rl:", b"a}{b", b"c"),
            group_key("rl:", b"a", b"b}{c")
        );
    }

    #[test]
    fn prefix_with_brace_is_rejected() {
        assert!(check_prefix("rl:{x}:").is_err());
        assert!(check_prefix("rl:").is_ok());
    }
}
