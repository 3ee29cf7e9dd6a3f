//! Waiting: for an event ([`eventually`]), and for a whole test body ([`limit`]).
//!
//! A test waits for what it needs to have happened (a state reached, a process group
//! recorded, a frame received, a counter moved), never for a fixed time: a fixed time is
//! too short on a loaded machine and wasted on an idle one.

use std::fmt::Debug;
use std::time::Duration;

/// Every test body runs under this limit: a hang is a failure.
pub const TEST_LIMIT: Duration = Duration::from_secs(60);

/// How long a test waits for an event that should come soon: long enough for a loaded
/// machine, short enough to fail within [`TEST_LIMIT`].
pub const WAIT: Duration = Duration::from_secs(30);

/// How often [`eventually`] asks again.
const POLL: Duration = Duration::from_millis(20);

/// Asks `probe` until it answers `Ok`, and returns that; panics after `within` with `what`
/// (the event waited for) and the last `Err` the probe answered (what it saw instead).
pub async fn eventually<T, E: Debug>(
    what: &str,
    within: Duration,
    probe: impl AsyncFnMut() -> Result<T, E>,
) -> T {
    match until(within, probe).await {
        Ok(v) => v,
        Err(seen) => panic!("not within {within:?}: {what}; last seen: {seen:?}"),
    }
}

/// [`eventually`] without the panic: the probe's last `Err` after `within`. For a test that
/// shows an event with a protection on and its absence with the protection off.
pub async fn until<T, E>(
    within: Duration,
    mut probe: impl AsyncFnMut() -> Result<T, E>,
) -> Result<T, E> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let seen = match probe().await {
            Ok(v) => return Ok(v),
            Err(seen) => seen,
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(seen);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A probe's answer: `Ok(seen)` when `done`, else `Err(seen)` (for [`eventually`]).
pub fn ready<V>(done: bool, seen: V) -> Result<V, V> {
    if done {
        Ok(seen)
    } else {
        Err(seen)
    }
}

/// Lets `d` pass, where the passing of time is what a test is about (an answer given later,
/// a caller that polls at a fixed rate, a quota's minute), never to wait for an event.
pub async fn time_passes(d: Duration) {
    tokio::time::sleep(d).await;
}

/// Runs a test body under [`TEST_LIMIT`].
pub async fn limit<F: std::future::Future<Output = ()>>(f: F) {
    limit_to(TEST_LIMIT, f).await
}

/// Runs a test body under a longer limit (tests of real CLIs).
pub async fn limit_to<F: std::future::Future<Output = ()>>(max: Duration, f: F) {
    tokio::time::timeout(max, f)
        .await
        .expect("test took longer than its limit (a hang)");
}
