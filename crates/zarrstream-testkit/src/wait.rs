//! Polls with a deadline: a condition that never comes true fails the test with what it
//! waited for, instead of hanging `cargo test`.

use std::time::{Duration, Instant};

/// Calls `done` every `every` until it returns `Some`, and returns that; panics naming
/// `what` once `deadline` has passed without it.
pub fn wait_until<T>(
    deadline: Instant,
    every: Duration,
    what: &str,
    mut done: impl FnMut() -> Option<T>,
) -> T {
    loop {
        if let Some(v) = done() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(every);
    }
}

/// [`wait_until`] with a deadline `within` from now.
pub fn wait_for<T>(
    within: Duration,
    every: Duration,
    what: &str,
    done: impl FnMut() -> Option<T>,
) -> T {
    wait_until(Instant::now() + within, every, what, done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_the_first_value_and_panics_past_the_deadline() {
        let mut n = 0;
        let got = wait_for(
            Duration::from_secs(5),
            Duration::from_millis(1),
            "n = 3",
            || {
                n += 1;
                (n == 3).then_some(n)
            },
        );
        assert_eq!(got, 3);
        let late = std::panic::catch_unwind(|| {
            wait_until(Instant::now(), Duration::from_millis(1), "never", || {
                None::<()>
            })
        });
        assert!(late.is_err(), "a deadline in the past must fail the wait");
    }
}
