//! prov-collector: started only by prov-helper's `observe`, never by users.
//! It arrives with the prov group as effective gid (so the kernel made it
//! non-dumpable) and descriptors 3..=9 in a fixed order.
#![deny(unsafe_code)]

use std::process::ExitCode;

use nix::unistd::{getresgid, getresuid, setresgid, setsid};
use prov_collect::collector::{self, Handover};
use prov_collect::error::CollectorError;

fn main() -> ExitCode {
    // First of all, give up the prov group: it marks holders, and the
    // collector must never look like one.
    let gids = getresgid().map(|g| g.real);
    let dropped = gids.and_then(|g| setresgid(g, g, g).map(|()| g));
    match (dropped, getresgid()) {
        (Ok(g), Ok(now)) if now.real == g && now.effective == g && now.saved == g => {}
        _ => {
            eprintln!("prov-collector: cannot drop the prov group");
            return ExitCode::from(111);
        }
    }
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
    let [ctl, group, namespace, ns_root, tracker, tracker_for_command, holder_pipe] =
        match prov_collect::sys::take_inherited_fds(3) {
            Ok(fds) => fds,
            Err(e) => {
                eprintln!("prov-collector: {}", CollectorError::Handover(e));
                return ExitCode::from(2);
            }
        };
    let handover = Handover {
        ctl,
        group,
        namespace,
        ns_root,
        tracker,
        tracker_for_command,
        holder_pipe,
        holder_pid,
        unmarked_mounts,
        reports_fd_errors: fd_errors == "fd-errors",
    };
    let is_root = getresuid().is_ok_and(|u| u.real.is_root());
    match collector::run(handover, !is_root) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The collector log has the same line, through the writer.
            eprintln!("prov-collector: {e}");
            ExitCode::FAILURE
        }
    }
}
