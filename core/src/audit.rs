//! Checking exactness after the fact, from the decisions' own times: tests and `rl bench` use it
//! so that "never more than the limit in any window" is measured, not assumed.

/// The most permits admitted inside any span `(t - window_ms, t]`, given each admitted decision's
/// `(now_ms, cost)`. Order does not matter.
pub fn max_in_any_window(admitted: &[(u64, u64)], window_ms: u64) -> u64 {
    let mut v = admitted.to_vec();
    v.sort_unstable();
    let (mut best, mut sum, mut lo) = (0u64, 0u64, 0usize);
    for hi in 0..v.len() {
        sum += v[hi].1;
        // The span ending at v[hi].0 holds times > v[hi].0 - window.
        while v[lo].0 + window_ms <= v[hi].0 {
            sum -= v[lo].1;
            lo += 1;
        }
        best = best.max(sum);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::max_in_any_window;

    #[test]
    fn counts_half_open_spans() {
        // 1000 and 2000 are exactly one window apart: never in one span (t-1000, t].
        assert_eq!(max_in_any_window(&[(1000, 1), (2000, 1)], 1000), 1);
        assert_eq!(max_in_any_window(&[(1000, 1), (1999, 1)], 1000), 2);
        assert_eq!(
            max_in_any_window(&[(5, 3), (1, 2), (900, 4), (1004, 1)], 1000),
            9
        );
        assert_eq!(max_in_any_window(&[], 1000), 0);
    }
}
