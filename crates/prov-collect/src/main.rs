//! prov-collector: started only by prov-helper's `observe`, never by users.
//! It arrives with the user's ids, non-dumpable (installed unreadable to
//! users, see the helper's `open_collector`), and descriptors 3..=9 in the
//! order `prov_protocol::helper` names.
#![deny(unsafe_code)]

use std::process::ExitCode;

use nix::unistd::{getresuid, setsid};
use prov_collect::collector::{self, Handover};
use prov_collect::error::CollectorError;
use prov_protocol::helper;

fn main() -> ExitCode {
    // The helper starts us by descriptor (execveat): older kernels (5.10
    // seen; 6.18 not) name such a process after the descriptor, "10" in ps.
    let _ = nix::sys::prctl::set_name(c"prov-collector");
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
    // In the order of helper::CTL_FD ..= helper::HOLDER_PIPE_FD.
    let [ctl, group, namespace, ns_root, tracker, tracker_for_command, holder_pipe] =
        match prov_collect::sys::take_inherited_fds::<{ helper::COLLECTOR_FDS }>(helper::FIRST_FD) {
            Ok(fds) => fds,
            Err(e) => {
                eprintln!("prov-collector: {}", CollectorError::Handover(e));
                return ExitCode::from(2);
            }
        };
    let handover = Handover {
        ctl,
        group: std::sync::Arc::new(group),
        namespace,
        ns_root,
        tracker,
        tracker_for_command,
        holder_pipe,
        holder_pid,
        unmarked_mounts,
        reports_fd_errors: fd_errors == helper::FD_ERRORS_ARG,
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
