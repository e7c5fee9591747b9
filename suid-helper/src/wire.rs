// What prov-helper writes for other processes, as numbers and bytes: the
// descriptors and arguments it hands the collector, and the one-byte tags
// of its messages. prov-protocol's `helper` module holds the same values
// for the readers; the helper links only libc, so it keeps this copy, and
// prov-protocol's tests include this very file and check that the two agree.
// Constants only: nothing here runs.

/// The first descriptor the collector is given; the others follow in the
/// order below.
pub const FIRST_FD: i32 = 3;
/// The caller's control socket (SOCK_SEQPACKET).
pub const CTL_FD: i32 = 3;
/// The fanotify group.
pub const GROUP_FD: i32 = 4;
/// The observed mount namespace.
pub const NAMESPACE_FD: i32 = 5;
/// The observed namespace's root directory.
pub const NS_ROOT_FD: i32 = 6;
/// The collector's end of the tracker socket.
pub const TRACKER_FD: i32 = 7;
/// The command's end of the tracker socket (the collector hands it on).
pub const TRACKER_FOR_COMMAND_FD: i32 = 8;
/// The write end of the holder's pipe: its hang-up ends the holder.
pub const HOLDER_PIPE_FD: i32 = 9;
/// The collector's program, executed by descriptor (closed on exec).
pub const COLLECTOR_EXE_FD: i32 = 10;

/// The collector's third argument: whether the kernel reports a failed
/// event descriptor as an error event (FAN_REPORT_FD_ERROR).
pub const FD_ERRORS_ARG: &str = "fd-errors";
pub const NO_FD_ERRORS_ARG: &str = "no-fd-errors";

/// On the control socket: the helper could not set up the observation
/// (a one-line reason follows).
pub const ERROR_TAG: u8 = b'E';
/// On the tracker socket, from `join`: the program could not enter the
/// observation and runs untraced (the reason follows).
pub const UNTRACED_TAG: u8 = b'X';
/// On the tracker socket: a setuid/setgid program (its path follows) runs
/// outside the observation.
pub const UNOBSERVED_TAG: u8 = b'U';
/// On the tracker socket: the seccomp listener of the program's namespace
/// filter is attached.
pub const NAMESPACE_LISTENER_TAG: u8 = b'S';
/// On the tracker socket: the program carries an enclosing observation's
/// namespace filter, which notes its calls.
pub const ENCLOSED_TAG: u8 = b'N';
/// On the tracker socket: the program's namespace calls cannot be watched
/// (the reason follows).
pub const UNWATCHED_TAG: u8 = b'W';
