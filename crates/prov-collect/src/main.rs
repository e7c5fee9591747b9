//! prov-collector: started only by prov-helper's `observe`, never by users.
//! It arrives with the user's ids, non-dumpable (installed unreadable to
//! users, see the helper's `open_collector`), and descriptors 3..=9 in a
//! fixed order.

use std::os::fd::{FromRawFd, OwnedFd};
use std::process::ExitCode;

use nix::unistd::{getresuid, setsid};
use prov_collect::collector::{self, Handover};

fn main() -> ExitCode {
    // Ctrl-C or a hang-up of the user's terminal must not cut a record short.
    let _ = setsid();

    let args: Vec<String> = std::env::args().skip(1).collect();
    let [holder_pid, unmarked, fd_errors] = args.as_slice() else {
        eprintln!("prov-collector: is started by prov-helper only");
        return ExitCode::from(2);
    };
    let (Ok(holder_pid), Ok(unmarked_mounts)) = (holder_pid.parse(), unmarked.parse()) else {
        eprintln!("prov-collector: bad arguments");
        return ExitCode::from(2);
    };
    for fd in 3..=9 {
        // SAFETY: F_GETFD/F_SETFD only inspect or flag a descriptor number.
        let open = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } == 0;
        if !open {
            eprintln!("prov-collector: descriptor {fd} missing; is started by prov-helper only");
            return ExitCode::from(2);
        }
    }
    // SAFETY: descriptors 3..=9 were checked open above; the helper placed
    // them for us and nothing else in this process refers to them.
    let fd = |n| unsafe { OwnedFd::from_raw_fd(n) };
    let handover = Handover {
        ctl: fd(3),
        group: fd(4),
        namespace: fd(5),
        ns_root: fd(6),
        tracker: fd(7),
        tracker_for_command: fd(8),
        holder_pipe: fd(9),
        holder_pid,
        unmarked_mounts,
        reports_fd_errors: fd_errors == "fd-errors",
    };
    let is_root = getresuid().is_ok_and(|u| u.real.is_root());
    match collector::run(handover, !is_root) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("prov-collector: {e}");
            prov_collect::log::line(&format!("stopped early, the record may be incomplete or lost: {e}"));
            ExitCode::FAILURE
        }
    }
}
