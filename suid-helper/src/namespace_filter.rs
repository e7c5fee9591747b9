//! The seccomp filter that tells prov when a process of a command makes or
//! enters another mount namespace (`unshare -m`, bwrap, Apptainer, podman,
//! `nsenter`): there, the observation's fanotify marks do not reach, and the
//! record must say so (docs/containers.md).
//!
//! `join` installs it, with a user-notification listener, just before the
//! command's program is executed; every descendant inherits it. The filter
//! makes the kernel stop such a call and wait for the listener, which the
//! observation's collector holds: it notes the program and lets the call go
//! on unchanged (SECCOMP_USER_NOTIF_FLAG_CONTINUE). `pivot_root` is stopped
//! too: a sandbox (bwrap, crun, runc) calls it once its mounts are in place,
//! just before it starts the contained program, and the collector has those
//! mounts marked before it lets the call go on (prov-collect
//! `follow_namespaces`). So is `mount`: a program that made a namespace
//! mounts in it before it starts anything (`unshare -m` makes its mounts
//! private), and the collector has the new namespace marked before that
//! call goes on, so none of the program's files are missed. Every other
//! call passes at once. `clone3` fails with ENOSYS, as Docker's default profile does:
//! its flags are in memory a filter cannot read, and glibc, Go and Rust fall
//! back to `clone`, whose flags it can.
//!
//! The listener never reaches the user: a filter installed with privilege
//! (as here, without no_new_privs, so that setuid programs keep working
//! inside) would otherwise let its holder fake the results of setuid
//! programs' calls. It goes only to the observation's own collector, which
//! the user cannot ptrace, and which only ever lets calls continue.

/// `struct seccomp_data` offsets (linux/seccomp.h).
const NR: u32 = 0;
const ARCH: u32 = 4;
/// The low 32 bits of argument `i` (little-endian machines only: the
/// architectures below).
const fn arg_low(i: u32) -> u32 {
    16 + 8 * i
}

/// AUDIT_ARCH_* (linux/audit.h): machine | 64-bit | little-endian flags.
const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH_AARCH64: u32 = 183 | 0x8000_0000 | 0x4000_0000;
/// x32 system calls are the x86_64 numbers with this bit set.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const CLONE_NEWNS: u32 = libc::CLONE_NEWNS as u32;

/// One architecture's numbers for the calls watched.
struct Numbers {
    arch: u32,
    clone: u32,
    clone3: u32,
    unshare: u32,
    setns: u32,
    pivot_root: u32,
    mount: u32,
}

#[cfg(target_arch = "x86_64")]
const NATIVE: Numbers =
    Numbers { arch: AUDIT_ARCH_X86_64, clone: 56, clone3: 435, unshare: 272, setns: 308, pivot_root: 155, mount: 165 };
/// 32-bit programs on a 64-bit x86 kernel enter through their own table.
#[cfg(target_arch = "x86_64")]
const COMPAT: Option<Numbers> = Some(Numbers {
    arch: AUDIT_ARCH_I386,
    clone: 120,
    clone3: 435,
    unshare: 310,
    setns: 346,
    pivot_root: 217,
    mount: 21,
});
#[cfg(target_arch = "aarch64")]
const NATIVE: Numbers =
    Numbers { arch: AUDIT_ARCH_AARCH64, clone: 220, clone3: 435, unshare: 97, setns: 268, pivot_root: 41, mount: 40 };
#[cfg(target_arch = "aarch64")]
const COMPAT: Option<Numbers> = None;
/// Elsewhere no filter is installed (`SUPPORTED`).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const NATIVE: Numbers = Numbers { arch: 0, clone: 0, clone3: 0, unshare: 0, setns: 0, pivot_root: 0, mount: 0 };
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const COMPAT: Option<Numbers> = None;

/// Whether this build knows the machine's system call numbers.
pub const SUPPORTED: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

const LD_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JSET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const AND: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;
const NO_CLONE3: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;

/// The checks of one architecture, after its `arch` test: the number is
/// loaded (x32's bit cleared) and each watched call goes to its argument
/// test. Self-contained: every path ends in a return.
fn checks(n: &Numbers) -> Vec<libc::sock_filter> {
    // The flags tests, at fixed distances from the dispatch below.
    let flags_in =
        |arg: u32| [stmt(LD_ABS, arg_low(arg)), jump(JSET, CLONE_NEWNS, 0, 1), stmt(RET, NOTIFY), stmt(RET, ALLOW)];
    let mut prog = vec![stmt(LD_ABS, NR)];
    if n.arch == AUDIT_ARCH_X86_64 {
        prog.push(stmt(AND, !X32_SYSCALL_BIT));
    }
    // Dispatch: 6 tests, then ALLOW; the bodies follow.
    //   clone3 -> ENOSYS
    //   pivot_root, mount -> NOTIFY
    //   clone, unshare -> flags in argument 0
    //   setns -> nstype in argument 1: 0 (any kind) or CLONE_NEWNS
    prog.extend([
        jump(JEQ, n.clone3, 6, 0),
        jump(JEQ, n.pivot_root, 6, 0),
        jump(JEQ, n.mount, 5, 0),
        jump(JEQ, n.clone, 5, 0),
        jump(JEQ, n.unshare, 4, 0),
        jump(JEQ, n.setns, 7, 0),
        stmt(RET, ALLOW),
        stmt(RET, NO_CLONE3),
        stmt(RET, NOTIFY),
    ]);
    prog.extend(flags_in(0));
    prog.extend([stmt(LD_ABS, arg_low(1)), jump(JEQ, 0, 1, 0), jump(JSET, CLONE_NEWNS, 0, 1), stmt(RET, NOTIFY)]);
    prog.push(stmt(RET, ALLOW));
    prog
}

/// The whole program: each known architecture's checks; any other passes.
pub fn program() -> Vec<libc::sock_filter> {
    let native = checks(&NATIVE);
    let compat = COMPAT.as_ref().map(checks);
    let mut prog = vec![stmt(LD_ABS, ARCH)];
    match (&compat, COMPAT.as_ref()) {
        (Some(c), Some(n)) => {
            // Native: over the next two; compat: over those and the native
            // checks; anything else: ALLOW.
            let over_native = u8::try_from(native.len() + 1).unwrap_or(u8::MAX);
            prog.extend([jump(JEQ, NATIVE.arch, 2, 0), jump(JEQ, n.arch, over_native, 0), stmt(RET, ALLOW)]);
            prog.extend(native);
            prog.extend(c.iter().copied());
        }
        _ => {
            prog.push(jump(JEQ, NATIVE.arch, 1, 0));
            prog.push(stmt(RET, ALLOW));
            prog.extend(native);
        }
    }
    prog
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the classic-BPF program on one call, as the kernel would.
    fn run(prog: &[libc::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let ins = prog[pc];
            pc += 1;
            match ins.code {
                LD_ABS => {
                    let at = ins.k as usize;
                    acc = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
                }
                AND => acc &= ins.k,
                JEQ => pc += usize::from(if acc == ins.k { ins.jt } else { ins.jf }),
                JSET => pc += usize::from(if acc & ins.k != 0 { ins.jt } else { ins.jf }),
                RET => return ins.k,
                other => panic!("unexpected instruction {other:#x}"),
            }
        }
    }

    fn decide(arch: u32, nr: u32, arg0: u64, arg1: u64) -> u32 {
        run(&program(), arch, nr, [arg0, arg1, 0, 0, 0, 0])
    }

    #[test]
    fn only_mount_namespace_calls_are_stopped() {
        for n in std::iter::once(&NATIVE).chain(COMPAT.as_ref()) {
            let a = n.arch;
            // A fork, a thread, a user namespace alone: straight through.
            assert_eq!(decide(a, n.clone, libc::SIGCHLD as u64, 0), ALLOW);
            assert_eq!(decide(a, n.clone, (libc::CLONE_VM | libc::CLONE_THREAD) as u64, 0), ALLOW);
            assert_eq!(decide(a, n.unshare, libc::CLONE_NEWUSER as u64, 0), ALLOW);
            assert_eq!(decide(a, n.setns, 5, libc::CLONE_NEWNET as u64), ALLOW);
            // A new or joined mount namespace: stopped for the listener.
            assert_eq!(decide(a, n.unshare, (libc::CLONE_NEWUSER | libc::CLONE_NEWNS) as u64, 0), NOTIFY);
            assert_eq!(decide(a, n.clone, (libc::CLONE_NEWNS | libc::SIGCHLD) as u64, 0), NOTIFY);
            assert_eq!(decide(a, n.setns, 5, 0), NOTIFY, "nstype 0 may be a mount namespace");
            assert_eq!(decide(a, n.setns, 5, libc::CLONE_NEWNS as u64), NOTIFY);
            assert_eq!(decide(a, n.setns, 5, (libc::CLONE_NEWNS | libc::CLONE_NEWNET) as u64), NOTIFY);
            // A sandbox's mounts are in place: stopped until marked.
            assert_eq!(decide(a, n.pivot_root, 0, 0), NOTIFY);
            // A mount, in a namespace that may be new: stopped until marked.
            assert_eq!(decide(a, n.mount, 0, 0), NOTIFY);
            // clone3's flags are out of reach: the caller falls back to clone.
            assert_eq!(decide(a, n.clone3, 0, 0), NO_CLONE3);
            // Anything else.
            assert_eq!(decide(a, 0, u64::MAX, u64::MAX), ALLOW);
            assert_eq!(decide(a, 1, libc::CLONE_NEWNS as u64, 0), ALLOW);
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn x32_calls_are_watched_like_native_ones() {
        let unshare = NATIVE.unshare | X32_SYSCALL_BIT;
        assert_eq!(decide(AUDIT_ARCH_X86_64, unshare, libc::CLONE_NEWNS as u64, 0), NOTIFY);
        assert_eq!(decide(AUDIT_ARCH_X86_64, NATIVE.clone3 | X32_SYSCALL_BIT, 0, 0), NO_CLONE3);
    }

    #[test]
    fn other_architectures_pass() {
        assert_eq!(decide(0x1234, NATIVE.unshare, libc::CLONE_NEWNS as u64, 0), ALLOW);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_compat_table_is_not_read_as_native_numbers() {
        // 310 is unshare for i386 and process_vm_readv for x86_64.
        assert_eq!(decide(AUDIT_ARCH_X86_64, 310, libc::CLONE_NEWNS as u64, 0), ALLOW);
        assert_eq!(decide(AUDIT_ARCH_I386, 272, libc::CLONE_NEWNS as u64, 0), ALLOW);
    }
}
