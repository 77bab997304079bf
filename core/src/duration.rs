//! Human durations for the `rl` command and binding options ("1s", "250ms").

use crate::error::{Error, Result};

/// Parses `1500`, `1500ms`, `2s`, `5m`, `1h`, `1d` into milliseconds.
pub fn parse_duration_ms(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let bad = || {
        Error::invalid(
            "duration",
            format!("{s:?} is not a duration like 1500, 250ms, 1s, 5m, 1h or 1d"),
        )
    };
    if digits.is_empty() {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let scale = match unit {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    n.checked_mul(scale).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::parse_duration_ms;

    #[test]
    fn units() {
        assert_eq!(parse_duration_ms("1500").unwrap(), 1500);
        assert_eq!(parse_duration_ms("250ms").unwrap(), 250);
        assert_eq!(parse_duration_ms("2s").unwrap(), 2000);
        assert_eq!(parse_duration_ms("1d").unwrap(), 86_400_000);
        for bad in [
            "",
            "s",
            "1.5s",
            "-1s",
            "1 y",
            "abc",
            "99999999999999999999s",
        ] {
            assert!(parse_duration_ms(bad).is_err(), "{bad} should be rejected");
        }
    }
}
