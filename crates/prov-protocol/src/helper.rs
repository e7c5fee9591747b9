//! What prov-helper hands the processes it starts, as the readers see it:
//! the collector's descriptors, at fixed numbers from [`FIRST_FD`] on, and
//! its arguments; the tags of the helper's messages on the control socket
//! (its error) and on the tracker socket (what `join` reports of a
//! program).
//!
//! The helper links only libc and keeps its own copy of these values
//! (suid-helper/src/wire.rs); a test here includes that file and checks
//! that each value agrees.

/// The first descriptor the collector is given.
pub const FIRST_FD: i32 = 3;
/// The descriptors the collector takes, in this order from [`FIRST_FD`]:
/// the caller's control socket, the fanotify group, the observed mount
/// namespace, its root directory, the collector's and the command's ends
/// of the tracker socket, the write end of the holder's pipe.
pub const COLLECTOR_FDS: usize = 7;
pub const CTL_FD: i32 = 3;
pub const GROUP_FD: i32 = 4;
pub const NAMESPACE_FD: i32 = 5;
pub const NS_ROOT_FD: i32 = 6;
pub const TRACKER_FD: i32 = 7;
pub const TRACKER_FOR_COMMAND_FD: i32 = 8;
pub const HOLDER_PIPE_FD: i32 = 9;

/// The collector's third argument: whether the kernel reports a failed
/// event descriptor as an error event.
pub const FD_ERRORS_ARG: &str = "fd-errors";
pub const NO_FD_ERRORS_ARG: &str = "no-fd-errors";

/// The helper's one message on the control socket: it could not set up
/// the observation; a one-line reason follows the tag.
pub const ERROR_TAG: u8 = b'E';

/// What `join` reports of a program on the tracker socket: a tag, then
/// (for some) a reason or a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum JoinReport {
    /// The program could not enter the observation and runs untraced (the
    /// reason follows).
    Untraced = b'X',
    /// A setuid/setgid program (its path follows) runs outside the
    /// observation.
    Unobserved = b'U',
    /// The seccomp listener of the program's namespace filter is attached
    /// (the listener's descriptor comes with it).
    NamespaceListener = b'S',
    /// The program carries an enclosing observation's namespace filter,
    /// which notes its calls.
    Enclosed = b'N',
    /// The program's namespace calls cannot be watched (the reason follows).
    Unwatched = b'W',
}

impl JoinReport {
    pub const ALL: [JoinReport; 5] = [
        JoinReport::Untraced,
        JoinReport::Unobserved,
        JoinReport::NamespaceListener,
        JoinReport::Enclosed,
        JoinReport::Unwatched,
    ];

    /// The report a message is, and what follows its tag.
    pub fn read(msg: &[u8]) -> Option<(JoinReport, &[u8])> {
        let (&tag, rest) = msg.split_first()?;
        JoinReport::ALL.into_iter().find(|r| *r as u8 == tag).map(|r| (r, rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The helper's own copy, as it is compiled into prov-helper.
    mod helper_copy {
        #![allow(dead_code)]
        include!("../../../suid-helper/src/wire.rs");
    }

    #[test]
    fn the_helpers_copy_agrees() {
        assert_eq!(helper_copy::FIRST_FD, FIRST_FD);
        let ours = [CTL_FD, GROUP_FD, NAMESPACE_FD, NS_ROOT_FD, TRACKER_FD, TRACKER_FOR_COMMAND_FD, HOLDER_PIPE_FD];
        let helpers = [
            helper_copy::CTL_FD,
            helper_copy::GROUP_FD,
            helper_copy::NAMESPACE_FD,
            helper_copy::NS_ROOT_FD,
            helper_copy::TRACKER_FD,
            helper_copy::TRACKER_FOR_COMMAND_FD,
            helper_copy::HOLDER_PIPE_FD,
        ];
        assert_eq!(helpers, ours);
        // In order, from FIRST_FD, with the program's descriptor after them.
        assert!(ours.iter().enumerate().all(|(i, &fd)| fd == FIRST_FD + i as i32));
        assert_eq!(ours.len(), COLLECTOR_FDS);
        assert_eq!(helper_copy::COLLECTOR_EXE_FD, FIRST_FD + COLLECTOR_FDS as i32);
        assert_eq!((helper_copy::FD_ERRORS_ARG, helper_copy::NO_FD_ERRORS_ARG), (FD_ERRORS_ARG, NO_FD_ERRORS_ARG));
        assert_eq!(helper_copy::ERROR_TAG, ERROR_TAG);
        let reports = [
            (helper_copy::UNTRACED_TAG, JoinReport::Untraced),
            (helper_copy::UNOBSERVED_TAG, JoinReport::Unobserved),
            (helper_copy::NAMESPACE_LISTENER_TAG, JoinReport::NamespaceListener),
            (helper_copy::ENCLOSED_TAG, JoinReport::Enclosed),
            (helper_copy::UNWATCHED_TAG, JoinReport::Unwatched),
        ];
        for (tag, report) in reports {
            assert_eq!(JoinReport::read(&[tag, b'x']), Some((report, &b"x"[..])));
        }
    }

    #[test]
    fn an_unknown_tag_is_no_report() {
        assert_eq!(JoinReport::read(b"Q"), None);
        assert_eq!(JoinReport::read(b""), None);
    }
}
