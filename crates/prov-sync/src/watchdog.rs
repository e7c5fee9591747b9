//! A bound on every wait for the central store. The client's own connect
//! timeout covers only the TCP connect: a server that accepts and then
//! never answers (stopped, hung, a dead link behind a proxy) would hold the
//! TLS handshake, the startup or a statement for ever, and TCP keepalives
//! do not help while its kernel still acknowledges.
//!
//! The blocking client gives no handle on its socket, so the watchdog
//! works from outside: it notes this process's descriptors before the
//! connection is made; a wait that sees no progress for [`ANSWER_WAIT`]
//! shuts down the sockets made since, and the client's wait ends with a
//! closed connection, which [`Watchdog::fired`] turns into "did not answer".

use std::collections::BTreeSet;
use std::os::fd::RawFd;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long one wait for the server may see no progress: far above any
/// answer prov asks for (a push of 50 000 events takes about a second on a
/// LAN), far below "for ever".
pub const ANSWER_WAIT: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub struct Watchdog {
    shared: Arc<(Mutex<State>, Condvar)>,
}

struct State {
    /// The descriptors open before the connection: never touched.
    before: BTreeSet<RawFd>,
    /// When the current wait runs out; None while nothing waits.
    deadline: Option<Instant>,
    fired: bool,
    /// The Central (and this watchdog with it) is gone.
    done: bool,
}

impl Watchdog {
    /// Notes the open descriptors and starts the watching thread, the
    /// first wait (the connection) already armed.
    pub fn start(limit: Duration) -> Watchdog {
        let state = State { before: open_fds(), deadline: Some(Instant::now() + limit), fired: false, done: false };
        let watchdog = Watchdog { shared: Arc::new((Mutex::new(state), Condvar::new())) };
        let shared = Arc::clone(&watchdog.shared);
        std::thread::spawn(move || watch(&shared));
        watchdog
    }

    /// Starts (or extends, after progress) a wait of at most `limit`.
    pub fn arm(&self, limit: Duration) {
        let (lock, wake) = &*self.shared;
        lock.lock().unwrap_or_else(|e| e.into_inner()).deadline = Some(Instant::now() + limit);
        wake.notify_all();
    }

    /// Nothing waits for the server now (local work follows).
    pub fn disarm(&self) {
        let (lock, wake) = &*self.shared;
        lock.lock().unwrap_or_else(|e| e.into_inner()).deadline = None;
        wake.notify_all();
    }

    /// Whether a wait ran out and the connection was cut.
    pub fn fired(&self) -> bool {
        self.shared.0.lock().unwrap_or_else(|e| e.into_inner()).fired
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // The last handle but the thread's own: the thread ends.
        if Arc::strong_count(&self.shared) == 2 {
            let (lock, wake) = &*self.shared;
            lock.lock().unwrap_or_else(|e| e.into_inner()).done = true;
            wake.notify_all();
        }
    }
}

fn watch(shared: &(Mutex<State>, Condvar)) {
    let (lock, wake) = shared;
    let mut state = lock.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if state.done || state.fired {
            return;
        }
        match state.deadline {
            None => state = wake.wait(state).unwrap_or_else(|e| e.into_inner()),
            Some(at) => {
                let now = Instant::now();
                if now >= at {
                    state.fired = true;
                    cut_new_sockets(&state.before);
                    return;
                }
                state = wake.wait_timeout(state, at - now).unwrap_or_else(|e| e.into_inner()).0;
            }
        }
    }
}

/// This process's open descriptors.
fn open_fds() -> BTreeSet<RawFd> {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// Shuts down every socket opened since `before`: the client's connection
/// (and at most a name lookup's datagram socket, to no harm). Shutting
/// down, unlike closing, leaves the descriptor to its owner.
fn cut_new_sockets(before: &BTreeSet<RawFd>) {
    for fd in open_fds().difference(before) {
        let is_socket = std::fs::read_link(format!("/proc/self/fd/{fd}"))
            .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"));
        if is_socket {
            let _ = nix::sys::socket::shutdown(*fd, nix::sys::socket::Shutdown::Both);
        }
    }
}
