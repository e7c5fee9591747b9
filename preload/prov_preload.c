/*
 * libprov_preload.so — loaded into the interactive shell only (LD_PRELOAD,
 * removed from the environment at load so no child inherits it).
 *
 * While a command is observed it
 *   (a) rewrites the shell's own opens (redirections, `exec 3>f`, builtins)
 *       and those of its forked subshells to openat2(<namespace root>, path,
 *       RESOLVE_IN_ROOT), so they go through the observed mounts;
 *   (b) rewrites execve in the shell and its forked children to
 *       `prov-helper join …`, which enters the observed namespace, drops every
 *       privilege and execs the real program.
 *
 * The shell integration (shell/prov.bash, shell/prov.zsh) talks to the shim
 * through opens of paths under CTL_PREFIX, which never reach the kernel:
 *   ping                 succeeds iff the shim is loaded in this process
 *   capture              zsh: the fd of a memfd receiving the command's text
 *   begin                start observing (zsh: the text is in the capture)
 *   end/STATUS           zsh: the command finished with STATUS
 *   precmd/STATUS        bash: the first prompt hook: the command finished
 *                        with STATUS, if one started, and the next line is
 *                        about to be read (bash_prompt.h)
 *   prepare              prepare the next observation now
 *   texts                bash: succeeds iff commands get their text
 *   debug-trap           bash: its DEBUG trap into $__prov_trap (bash_trap.h)
 *   pause, resume        around prompt tools' hooks (see pause_observation)
 * and bash's PS0 calls strftime with the format BEGIN_FORMAT (\D{...}), which
 * starts the observation from inside prompt expansion, before any redirection
 * of the command line is performed.
 *
 * The next observation is prepared in the background while the prompt idles
 * (`prov __prepare`, which runs the helper and hands back the descriptors),
 * asked for by the shell's first read() or pselect() after a command ended: the
 * line editor waiting for the next line, once the prompt is out. The preparer
 * is started once and then waits on its socket for each next request (when
 * requests come faster than it can prepare, as pasted lines do, it keeps one
 * more observation ready ahead); it exits when the shell is gone. A command
 * that left its namespace clean has its collector offer the observation for
 * another record (Stored with a new tracker): the request then hands it back
 * to the preparer, which sends the next record's settings on it and hands it
 * out again, so the line starts no helper, collector or writer at all
 * (give_back_stored).
 *
 * Rules for hooks: resolve real symbols lazily (a hook may run before the
 * constructor), keep errno, never allocate in code that runs after fork, and
 * never abort: whatever fails, the shell's own call goes ahead untraced.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <spawn.h>
#include <time.h>
#include <unistd.h>

#include "bash_history.h"
#include "bash_prompt.h"
#include "bash_trap.h"
#include "shim_messages.h"
#include "shim_env.h"
#include "shim_parse.h"
#include "shim_shell.h"
#include "shim_state.h"
#include "shim_util.h"

#define EXPORT __attribute__((visibility("default")))
#define CTL_PREFIX "/.prov-shim-ctl/"
#define BEGIN_FORMAT "prov-shim-begin"
/* Descriptors of the shim live at or above this number, out of the way of
 * the shell's own (bash: 10 and up for saved fds, 255 for scripts). */
#define HIGH_FD 700
/* How long `begin` waits for the background preparation (first command
 * right after the prompt, or a preparer still starting): at least
 * [shell] prepare_wait_ms (the preparer sends it; this default until its
 * first answer), longer where preparing takes longer and for the shell's
 * first preparation (prepare_wait_ms() in shim_parse.h). A preparation that missed it once is not waited for again:
 * a hanging helper may cost the user one pause, never one per command. */
#define PREPARE_WAIT_MS 2000
#define PREPARE_WAIT_FACTOR 3
#define PREPARE_WAIT_CEILING_MS 20000
/* How long a command's start waits for the previous command's record to be
 * stored (see wait_stored). */
#define STORED_WAIT_MS 2000
/* How long the request for the next observation waits for the last one's
 * Stored, to hand it back if it can serve again (give_back_stored): its
 * record is usually stored within a millisecond or two; one that takes
 * longer (a command with many files) is left to end, and a new observation
 * is prepared as before. */
#define REUSE_WAIT_MS 20
/* The longest Stored answer read whole: its reasons name up to three
 * places (database, spool, fallback spool), each a path. */
#define STORED_MAX 2048
/* The preparer's answer: a few numbers and the [env] patterns. */
#define PREPARED_MAX 4608

#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef RESOLVE_IN_ROOT
#define RESOLVE_IN_ROOT 0x10
#endif
struct prov_open_how { uint64_t flags, mode, resolve; };

extern char **environ;

static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static FILE *(*real_fopen)(const char *, const char *);
static FILE *(*real_fopen64)(const char *, const char *);
static int (*real_execve)(const char *, char *const[], char *const[]);
static int (*real_dup2)(int, int);
static size_t (*real_strftime)(char *, size_t, const char *, const struct tm *);
static ssize_t (*real_read)(int, void *, size_t);
static int (*real_pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *);
static void (*real_exit)(int);

/* The shim's state. The lifecycles are states (shim_state.h: what holds in
 * each); the flags left are independent of them and of each other. */
static struct {
    int loaded;              /* the constructor ran and found its settings: the shim acts at all */
    int is_bash;             /* the shell is bash (else zsh) */
    pid_t shell_pid;         /* the shell itself, not one of its forks */

    enum command_state command;
    int pause_depth;         /* COMMAND_OBSERVED: prompt tools' hooks running, nested (see pause_observation) */
    int ns_root, ctl, tracker, holder; /* the observation, in COMMAND_OBSERVED */

    enum end_state ended;
    int storing;             /* the ended record's control socket, unless END_NONE */
    int storing_root;        /* ... and its namespace root, while it may serve again (give_back_stored) */
    char end[160];           /* its End, in END_HELD and END_SENT */
    int end_len;

    enum prep_state prep;
    int prep_sock;           /* our end of the running preparer's socket, in any state, or -1 */
    int prepare_pending;     /* a command ended: ask for the next observation at the shell's next read */
    int r_ns_root, r_ctl, r_tracker, r_holder; /* the prepared observation, in PREP_READY */
    int r_skip_space;        /* config: commands typed with a leading space are not observed */
    int prepare_floor_ms;    /* [shell] prepare_wait_ms, as last answered */
    int prepare_took_ms;     /* how long the last preparation took, or -1 */

    int capture;             /* memfd the shell wrote into (zsh's text) */
    unsigned long seq;
    char helper[PATH_MAX], prov[PATH_MAX];
    char session[40], shell[16];
    char last_warning[256];
    char lost[1200];         /* what the last stored answer says went wrong (lost, or kept elsewhere), not yet said */
    char lost_said[1200];    /* the line said last: said once, not per command */
} S = {
    .ns_root = -1, .ctl = -1, .tracker = -1, .storing = -1, .storing_root = -1,
    .r_ns_root = -1, .r_ctl = -1, .r_tracker = -1,
    .prep_sock = -1, .capture = -1,
    .prepare_floor_ms = PREPARE_WAIT_MS, .prepare_took_ms = -1,
};

static void resolve_real(void)
{
    if (!real_open) real_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
    if (!real_open64) real_open64 = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open64");
    if (!real_fopen) real_fopen = (FILE * (*)(const char *, const char *))dlsym(RTLD_NEXT, "fopen");
    if (!real_fopen64) real_fopen64 = (FILE * (*)(const char *, const char *))dlsym(RTLD_NEXT, "fopen64");
    if (!real_execve) real_execve = (int (*)(const char *, char *const[], char *const[]))dlsym(RTLD_NEXT, "execve");
    if (!real_dup2) real_dup2 = (int (*)(int, int))dlsym(RTLD_NEXT, "dup2");
    if (!real_strftime)
        real_strftime = (size_t(*)(char *, size_t, const char *, const struct tm *))dlsym(RTLD_NEXT, "strftime");
    if (!real_read) real_read = (ssize_t(*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
    if (!real_pselect)
        real_pselect = (int (*)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *))
            dlsym(RTLD_NEXT, "pselect");
    if (!real_exit) real_exit = (void (*)(int))dlsym(RTLD_NEXT, "exit");
}

/* ------------------------------------------------------------ utilities */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Moves fd to a high number; the old number is closed. */
static int move_high(int fd, int cloexec)
{
    if (fd < 0) return -1;
    int high = fcntl(fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, HIGH_FD);
    if (high < 0) high = fcntl(fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, 20);
    if (high < 0) return fd;
    close(fd);
    return high;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* Whether the other end of a socket is gone (a collector's control socket:
 * the collector died). */
static int hung_up(int sock)
{
    struct pollfd p = { .fd = sock, .events = POLLRDHUP };
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/* Sends one message of `len` bytes with `nfds` descriptors (at most 3;
 * SCM_RIGHTS) on `sock`; sendmsg's result. */
static ssize_t send_with_fds(int sock, const void *p, size_t len, const int *fds, int nfds, int flags)
{
    struct iovec iov = { .iov_base = (void *)p, .iov_len = len };
    union { struct cmsghdr h; char space[CMSG_SPACE(3 * sizeof(int))]; } c;
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (nfds > 0) {
        memset(&c, 0, sizeof c);
        m.msg_control = c.space;
        m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(h), fds, (size_t)nfds * sizeof(int));
    }
    return sendmsg(sock, &m, MSG_NOSIGNAL | flags);
}

/* Receives one message (at most `cap` bytes, without waiting) and the
 * descriptors that came with it, close-on-exec, into fds[3]; *nfds says how
 * many (more than 3 are not installed by the kernel). recvmsg's result. */
static ssize_t recv_with_fds(int sock, char *buf, size_t cap, int fds[3], int *nfds)
{
    union { struct cmsghdr h; char space[CMSG_SPACE(3 * sizeof(int))]; } c;
    struct iovec iov = { .iov_base = buf, .iov_len = cap };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.space, .msg_controllen = sizeof c.space };
    ssize_t n = recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    *nfds = 0;
    for (struct cmsghdr *h = n >= 0 ? CMSG_FIRSTHDR(&m) : NULL; h; h = CMSG_NXTHDR(&m, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        if (k > (size_t)(3 - *nfds)) k = (size_t)(3 - *nfds);
        memcpy(fds + *nfds, CMSG_DATA(h), k * sizeof(int));
        *nfds += (int)k;
    }
    return n;
}

/* Whether `fd` became readable (or hung up) within wait_ms; signals do not
 * cut the wait short. */
static int readable_within(int fd, int wait_ms)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int64_t deadline = now_ns() + (int64_t)wait_ms * 1000000;
    for (;;) {
        int left = (int)((deadline - now_ns()) / 1000000);
        int r = poll(&p, 1, left < 0 ? 0 : left);
        if (r > 0) return 1;
        if (r == 0 || errno != EINTR) return 0;
    }
}

static void warn_once(const char *why)
{
    if (strncmp(S.last_warning, why, sizeof S.last_warning - 1) == 0) return;
    snprintf(S.last_warning, sizeof S.last_warning, "%s", why);
    char line[400];
    int n = snprintf(line, sizeof line, "prov: not tracing: %s\n", why);
    if (n > 0) { ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1); (void)w; }
}


/* Input the shell has not read yet on its standard input. */
static int input_waiting(void)
{
    struct pollfd in = { .fd = 0, .events = POLLIN };
    return poll(&in, 1, 0) == 1 && (in.revents & POLLIN);
}

/* The ended record is stored, lost, or no longer followed: its control
 * socket and namespace root are let go. */
static void end_done(void)
{
    close_fd(&S.storing);
    close_fd(&S.storing_root);
    S.ended = end_next(S.ended, END_DONE);
}

/* The End of an observed command (`{"End":{…}}`) that its collector did
 * not store: to the preparer as `{"Orphan":{…}}` with the record's control
 * socket, which names the record; the preparer spools it, and a spooled
 * end wins over "collector gone" (the command's own end time and status). */
static void keep_orphan_end(const char *end, int len)
{
    if (S.prep_sock < 0 || S.ended == END_NONE) return;
    char msg[sizeof S.end + 8];
    int n = msg_orphan(msg, sizeof msg, end, len);
    if (n > 0) (void)send_with_fds(S.prep_sock, msg, (size_t)n, &S.storing, 1, MSG_DONTWAIT);
}

/* The ended command's End, held since its end hook (end_observation), goes
 * out once the shell waits anyway: at its next read of the terminal (the
 * prompt is drawn), before anything waits for Stored, or at the next
 * command's start. One the collector cannot take ends it as before. */
static void send_pending_end(void)
{
    /* A fork of the shell (a prompt's $(...)) has a copy of it: the shell
     * sends it, once. */
    if (S.ended != END_HELD || !shim_in_shell_itself()) return;
    if (hung_up(S.storing) || send(S.storing, S.end, (size_t)S.end_len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* The collector is gone (killed): the shell's end and status are
         * kept all the same. */
        keep_orphan_end(S.end, S.end_len);
        end_done();
        return;
    }
    S.ended = end_next(S.ended, END_SEND_OK);
}

/* The Stored answer (len 0: the collector hung up without one, killed
 * after it took the End): one that says the record was not all stored
 * (its writer died, as a rule), or none, has its end kept again, in case
 * that was what failed. */
static void after_stored(const char *msg, size_t len)
{
    char why[8];
    if (S.ended == END_SENT && (len == 0 || stored_lost(msg, len, why, sizeof why)))
        keep_orphan_end(S.end, S.end_len);
    (void)stored_problem(msg, len, S.lost, sizeof S.lost);
}

/* ------------------------------------------------------- preparation */

/* The ended observation back to the preparer, if its collector offers it for
 * another record: Stored (read here, waiting up to wait_ms) came with a new
 * tracker. The preparer checks it is the one it handed out, sends the next
 * record's settings and identity on it and answers as to "P". Returns 1 if
 * handed back. Whatever comes of it, the record is stored or its collector
 * gone once Stored or a hang-up was read; one not answered in time is still
 * waited for by wait_stored, and ends as before when its control socket is
 * closed (at the next command's end). */
static int give_back_stored(int wait_ms)
{
    send_pending_end();
    if (S.ended == END_NONE || S.storing_root < 0) return 0;
    if (!readable_within(S.storing, wait_ms)) {
        close_fd(&S.storing_root);
        return 0;
    }
    char msg[STORED_MAX];
    int got[3], ngot;
    ssize_t n = recv_with_fds(S.storing, msg, sizeof msg, got, &ngot);
    /* Neither the database nor the spool took it: said at the next line. */
    if (n >= 0) after_stored(msg, (size_t)n);
    /* Stored comes with the new tracker alone. */
    int handed = 0;
    if (n > 0 && ngot == 1 && stored_reusable(msg, (size_t)n) && S.prep_sock >= 0) {
        int fds[3] = { S.storing, S.storing_root, got[0] };
        handed = send_with_fds(S.prep_sock, AGAIN_REQUEST, 1, fds, 3, MSG_DONTWAIT) == 1;
    }
    /* Our copies: the preparer has its own now, or the collector is to see
     * its control socket hang up and end. */
    for (int i = 0; i < ngot; i++) close(got[i]);
    end_done();
    return handed;
}

/* Starts `prov __prepare SESSION SHELL VERSION` in its own session, stdio on
 * /dev/null, with its end of a fresh socketpair as fd 3: if it dies without
 * an answer, our end hangs up and nobody waits. posix_spawn (vfork-like) keeps
 * this off the prompt's critical path; the shell reaps the child like any
 * other it does not know. */
static void spawn_preparer(void)
{
    S.prepare_pending = 0;
    if (S.prep != PREP_IDLE || !S.loaded) return;
    /* The preparer of this shell waits for the next request: no process
     * start. One that is gone (or never started) is started anew. */
    if (S.prep_sock >= 0) {
        if (give_back_stored(REUSE_WAIT_MS) || send(S.prep_sock, PREPARE_REQUEST, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
            S.prep = prep_next(S.prep, PREP_REQUESTED);
            return;
        }
        close_fd(&S.prep_sock);
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) return;
    int peer = move_high(sv[1], 1); /* never 3 itself: dup2 onto 3 must clear CLOEXEC */
    char *argv[] = { "prov", "__prepare", S.session, S.shell, PROV_PROTOCOL_VERSION, NULL };
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDWR, 0);
    posix_spawn_file_actions_adddup2(&fa, 0, 1);
    posix_spawn_file_actions_adddup2(&fa, 0, 2);
    posix_spawn_file_actions_adddup2(&fa, peer, 3);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
    posix_spawn_file_actions_addclosefrom_np(&fa, 4);
#endif
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int err = posix_spawn(&pid, S.prov, &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(peer);
    if (err) { close(sv[0]); return; }
    close_fd(&S.prep_sock);
    close_fd(&S.storing_root); /* a new preparer knows nothing of it */
    S.prep_sock = move_high(sv[0], 1);
    S.prep = prep_next(S.prep, PREP_REQUESTED);
}

/* Takes a prepared observation from the socket, waiting up to wait_ms.
 * The preparer sends "R<holder pid>" with [ctl, ns root, tracker], or
 * "E<reason>". */
static void take_prepared(int wait_ms)
{
    if (!prep_awaited(S.prep)) return;
    if (!readable_within(S.prep_sock, wait_ms)) {
        if (wait_ms > 0) S.prep = prep_next(S.prep, PREP_MISSED);
        return;
    }
    char msg[PREPARED_MAX];
    int fds[3] = { -1, -1, -1 }, nfds;
    ssize_t n = recv_with_fds(S.prep_sock, msg, sizeof msg - 1, fds, &nfds);
    /* The preparer stays for the next request; one that hung up is gone. */
    if (n <= 0) {
        S.prep = prep_next(S.prep, PREP_FAILED);
        close_fd(&S.prep_sock);
        warn_once("the observation could not be prepared (prov __prepare failed)");
        return;
    }
    msg[n] = 0;
    int holder, skip_space, kind = parse_prepared(msg, &holder, &skip_space);
    if (kind == 'R' && nfds == 3) {
        int floor = prepared_number(msg, "wait=");
        if (floor > 0) S.prepare_floor_ms = floor;
        S.prepare_took_ms = prepared_number(msg, "took=");
        shim_env_patterns(msg);
        S.r_holder = holder;
        S.r_skip_space = skip_space;
        S.r_ctl = move_high(fds[0], 1);
        S.r_ns_root = move_high(fds[1], 1);
        S.r_tracker = move_high(fds[2], 1);
        S.prep = prep_next(S.prep, PREP_PREPARED);
        return;
    }
    S.prep = prep_next(S.prep, PREP_FAILED);
    for (int i = 0; i < nfds; i++) close(fds[i]);
    if (kind == 'E') warn_once(msg + 1);
}

/* ---------------------------------------------------------- control */

static int null_fd(void) { return real_open("/dev/null", O_RDWR | O_CLOEXEC); }

/* Text of the capture memfd (zsh's preexec writes the line into it). */
static int read_capture(struct buf *text)
{
    if (S.capture < 0) return -1;
    struct stat st;
    if (fstat(S.capture, &st) < 0) return -1;
    size_t size = (size_t)st.st_size;
    if (buf_reserve(text, size + 1)) return -1;
    ssize_t n = pread(S.capture, text->p, size, 0);
    if (n < 0) return -1;
    text->len = (size_t)n > MAX_TEXT ? MAX_TEXT : (size_t)n;
    return 0;
}

/* Observed right now: the shell's opens and execs go into the namespace. */
static int observing(void) { return S.command == COMMAND_OBSERVED && S.pause_depth == 0; }

/* The observation's descriptors, closed (the command ended, or could not
 * begin in it). */
static void close_observation(void)
{
    S.pause_depth = 0;
    close_fd(&S.ctl);
    close_fd(&S.tracker);
    close_fd(&S.ns_root);
}

/* Before prov itself runs (a query), the previous command's record is
 * stored (the collector answers End with Stored, or hangs up): a query typed
 * right after a command, even in the same pasted block, finds it. Neither
 * the prompt nor any other program waits (waiting at every command's start
 * cost 30-45 ms per pasted line, benches/README.md); a query typed by hand
 * finds the wait long over. A collector that does not answer in time costs
 * one wait, then is left. */
static void wait_stored(void)
{
    send_pending_end();
    /* A fork of the shell running prov before the prompt is drawn: the
     * record cannot be stored before the shell sends End, after it. */
    if (S.ended != END_SENT) return;
    (void)readable_within(S.storing, STORED_WAIT_MS);
    end_done();
}

/* Sends Begin on `sock` (with send `flags` besides MSG_NOSIGNAL); a long
 * text goes in a memfd attached to it. */
static int send_begin(int sock, int flags, const struct buf *text, const char *cwd)
{
    int memfd = -1;
    if (text->len > INLINE_TEXT_MAX) {
        memfd = (int)syscall(SYS_memfd_create, "prov-text", MFD_CLOEXEC);
        if (memfd < 0) return -1;
        size_t done = 0;
        while (done < text->len) {
            ssize_t w = write(memfd, text->p + done, text->len - done);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) { close(memfd); return -1; }
            done += (size_t)w;
        }
    }
    struct buf msg = {0};
    int bad = msg_begin(&msg, ++S.seq, memfd < 0 ? (const unsigned char *)text->p : NULL, text->len, cwd,
                        (uint64_t)now_ns(), sock == S.ctl, shim_env_append);
    int rc = -1;
    if (!bad) rc = send_with_fds(sock, msg.p, msg.len, &memfd, memfd >= 0 ? 1 : 0, flags) < 0 ? -1 : 0;
    if (memfd >= 0) close(memfd);
    buf_free(&msg);
    return rc;
}

/* A command that runs without an observation still has a record, marked
 * untraced with the reason (the warning just printed): the preparer stores
 * it. The preparer is there whenever it answered why it could not prepare,
 * or is still preparing; it applies [shell] skip_space_prefixed itself. */
static void begin_unobserved(const struct buf *text, const char *cwd)
{
    /* Never blocking: a preparer stuck in a hung helper, its socket full,
     * must not hold the shell. Such a command then has no record; the shell
     * has said once that it is not tracing. */
    if (S.prep_sock >= 0 && send_begin(S.prep_sock, MSG_DONTWAIT, text, cwd) == 0) S.command = COMMAND_UNOBSERVED;
}

static void end_unobserved(const char *status)
{
    S.command = COMMAND_NONE;
    struct buf msg = {0};
    const char *why = S.last_warning[0] ? S.last_warning : "no observation could be prepared";
    int bad = msg_end(&msg, (uint64_t)now_ns(), status, why);
    if (!bad) (void)send(S.prep_sock, msg.p, msg.len, MSG_NOSIGNAL | MSG_DONTWAIT);
    buf_free(&msg);
}

/* The observation for the command about to start: the one ready, or one
 * asked for now and waited for. One whose collector is gone (killed while
 * the prompt idled) is replaced, once, as if none had been ready. The
 * wait counts from `began` (the command's start hook): what the shim did
 * before (a hand-back's wait for Stored) comes out of it, so a stopped
 * preparer holds a command up no longer than the wait says. */
static void take_ready(int64_t began)
{
    for (int round = 0; round < 2; round++) {
        if (S.prep == PREP_READY && hung_up(S.r_ctl)) {
            close_fd(&S.r_ctl);
            close_fd(&S.r_ns_root);
            close_fd(&S.r_tracker);
            S.prep = prep_next(S.prep, PREP_TAKEN);
        }
        if (S.prep == PREP_READY) return;
        spawn_preparer();
        int wait = S.prep == PREP_LATE ? 0
                                   : prepare_wait_ms(S.prepare_floor_ms, S.prepare_took_ms,
                                                     PREPARE_WAIT_FACTOR, PREPARE_WAIT_CEILING_MS);
        int64_t spent_ms = (now_ns() - began) / 1000000;
        take_prepared(spent_ms >= wait ? 0 : wait - (int)spent_ms);
        /* Waited in vain (or no time was left): late, as a full wait is. */
        if (wait > 0 && spent_ms >= wait) S.prep = prep_next(S.prep, PREP_MISSED);
    }
}

/* The shell says once, in one line, that records are lost, or kept in the
 * fallback spool, and why (the database and the spool named); again only
 * when that changes. */
static void say_lost_once(void)
{
    if (!S.lost[0]) return;
    if (strcmp(S.lost, S.lost_said) != 0) {
        char line[sizeof S.lost + 8];
        int n = snprintf(line, sizeof line, "prov: %s\n", S.lost);
        if (n > 0) { ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1); (void)w; }
        memcpy(S.lost_said, S.lost, sizeof S.lost_said);
    }
    S.lost[0] = 0;
}

/* The last record's Stored answer, if it came after give_back_stored
 * stopped waiting: read now (without waiting) for what it says was lost.
 * The record is then stored or lost: its control socket is let go. */
static void read_late_stored(void)
{
    if (S.ended != END_SENT || !readable_within(S.storing, 0)) return;
    char msg[STORED_MAX];
    int got[3], ngot;
    ssize_t n = recv_with_fds(S.storing, msg, sizeof msg, got, &ngot);
    if (n >= 0) after_stored(msg, (size_t)n);
    for (int i = 0; i < ngot; i++) close(got[i]);
    end_done();
}

static void begin_observation(const struct buf *text)
{
    int64_t began = now_ns();
    send_pending_end();
    read_late_stored();
    say_lost_once();
    if (S.command != COMMAND_NONE || !S.loaded) return;
    take_ready(began);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
    if (S.prep != PREP_READY) {
        if (!S.last_warning[0]) warn_once("no observation could be prepared in time");
        begin_unobserved(text, cwd);
        return;
    }
    /* The privacy opt-out: such a command runs untraced, and the prepared
     * observation waits for the next one. */
    if (S.r_skip_space && text->len && text->p[0] == ' ') return;
    S.ctl = S.r_ctl; S.ns_root = S.r_ns_root; S.tracker = S.r_tracker; S.holder = S.r_holder;
    S.r_ctl = S.r_ns_root = S.r_tracker = -1;
    S.prep = prep_next(S.prep, PREP_TAKEN);

    if (send_begin(S.ctl, 0, text, cwd) < 0) {
        warn_once("the collector is gone");
        close_observation();
        begin_unobserved(text, cwd);
    } else {
        /* Every process of the command inherits the tracker: its hang-up
         * tells the collector that the last of them is gone. */
        fcntl(S.tracker, F_SETFD, 0);
        S.command = COMMAND_OBSERVED;
        S.last_warning[0] = 0;
    }
}

static void end_observation(const char *status)
{
    if (S.command == COMMAND_UNOBSERVED) end_unobserved(status);
    if (S.command == COMMAND_OBSERVED) {
        struct buf msg = {0};
        int bad = msg_end(&msg, (uint64_t)now_ns(), status, NULL);
        /* The shell's own tracker now, before the prompt's hooks fork
         * anything that would inherit it: when End is read, the collector
         * then knows whether the command's last process is gone, and so
         * whether the observation can serve another record. The collector
         * holds the tracker itself until End (end_when_idle in Begin), so
         * this does not wake it. */
        close_fd(&S.tracker);
        /* End itself waits until the shell does (send_pending_end): woken
         * now, the collector would take the shell's CPU while it draws the
         * prompt (benches/README.md). The prompt never waits for storing:
         * the next command's start does (wait_stored), if it comes before
         * the answer. */
        size_t end_len = msg.len;
        int ctl = S.ctl, root = S.ns_root;
        S.ctl = S.ns_root = -1;
        close_observation();
        S.command = COMMAND_NONE;
        /* The last command's record is no longer followed. */
        end_done();
        if (!bad && end_len <= sizeof S.end) {
            memcpy(S.end, msg.p, end_len);
            S.end_len = (int)end_len;
            S.storing = ctl;
            S.storing_root = root;
            S.ended = end_next(S.ended, END_WRITTEN);
        } else {
            close(ctl);
            close(root);
        }
        buf_free(&msg);
        /* The next line already waiting (pasted, or a script on stdin):
         * nobody looks at this prompt, and that line's start waits for the
         * record to be stored, so the collector had better start now. */
        if (input_waiting()) send_pending_end();
    }
    /* Not now: starting the preparer (a vfork and exec, then three
     * processes setting up) would delay the prompt. The shell's next read is
     * the line editor waiting for the next line, after the prompt is out. */
    S.prepare_pending = 1;
}

/* An empty capture memfd for the shell to write into. The last one is
 * emptied and used again (a memfd made and freed at every prompt cost as
 * much as the rest of the shim's work there); the duplicate the shell gets
 * shares its offset, put back to the start. */
static int new_capture(int *slot)
{
    if (*slot >= 0 && (ftruncate(*slot, 0) < 0 || lseek(*slot, 0, SEEK_SET) < 0)) close_fd(slot);
    if (*slot < 0) {
        int fd = (int)syscall(SYS_memfd_create, "prov-capture", MFD_CLOEXEC);
        if (fd < 0) return null_fd();
        *slot = move_high(fd, 1);
    }
    /* The shell writes (and closes) its own duplicate. */
    return fcntl(*slot, F_DUPFD_CLOEXEC, 0);
}


/* A prompt tool's hook that bash runs between the start of a command and
 * the command itself (a DEBUG trap: bash-preexec's preexec functions,
 * starship's timer) is not part of the command: while paused, the shell's
 * opens and execs go on as outside any observation, and what the hook
 * starts and execs does not hold the tracker. */
static int pause_observation(int pause)
{
    /* Nested: a hook wrapped in another tool's hook. */
    if (S.command == COMMAND_OBSERVED && (pause || S.pause_depth > 0)) {
        S.pause_depth += pause ? 1 : -1;
        fcntl(S.tracker, F_SETFD, S.pause_depth ? FD_CLOEXEC : 0);
    }
    return null_fd();
}

static int control(const char *cmd)
{
    if (!strcmp(cmd, "ping")) return null_fd();
    if (!strcmp(cmd, "capture")) return new_capture(&S.capture);
    if (!strcmp(cmd, "begin")) {
        struct buf text = {0};
        read_capture(&text);
        begin_observation(&text);
        buf_free(&text);
        return null_fd();
    }
    if (!strncmp(cmd, "end/", 4)) { end_observation(cmd + 4); return null_fd(); }
    if (!strncmp(cmd, "precmd/", 7)) {
        /* bash's first prompt hook: the command's end, if one started,
         * and the next line's settings (bash_prompt.h). */
        if (bash_prompt_command_ended()) end_observation(cmd + 7);
        if (bash_prompt_next_line() < 0) warn_once("PS0 is readonly or an integer variable, so commands cannot be told to start");
        return null_fd();
    }
    if (!strcmp(cmd, "prepare")) { spawn_preparer(); return null_fd(); }
    if (!strcmp(cmd, "texts")) {
        errno = ENOENT;
        return bash_prompt_texts() ? null_fd() : -1;
    }
    if (!strcmp(cmd, "pause")) return pause_observation(1);
    if (!strcmp(cmd, "resume")) return pause_observation(0);
    if (!strcmp(cmd, "debug-trap")) {
        bash_debug_trap_to_variable();
        return null_fd();
    }
    errno = ENOENT;
    return -1;
}

/* ------------------------------------------------------------- hooks */

static int is_control(const char *path)
{
    return path && S.loaded && !strncmp(path, CTL_PREFIX, sizeof CTL_PREFIX - 1);
}

/* The open through the observed namespace's root. */
static int open_observed(const char *path, int flags, mode_t mode)
{
    char abs[PATH_MAX * 2];
    const char *p = path;
    if (path[0] != '/') {
        if (!getcwd(abs, PATH_MAX)) return -2;
        size_t n = strlen(abs), m = strlen(path);
        if (n + 1 + m + 1 > sizeof abs) return -2;
        abs[n] = '/';
        memcpy(abs + n + 1, path, m + 1);
        p = abs;
    }
    struct prov_open_how how = {
        .flags = (uint64_t)(unsigned)flags,
        .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
        .resolve = RESOLVE_IN_ROOT,
    };
    long fd = syscall(SYS_openat2, S.ns_root, p, &how, sizeof how);
    if (fd < 0 && errno == ENOSYS) {
        /* Before 5.6: absolute symlinks then resolve outside (see docs). */
        while (*p == '/') p++;
        fd = openat(S.ns_root, *p ? p : ".", flags, mode);
    }
    return (int)fd;
}

static int do_open(int (*real)(const char *, int, ...), const char *path, int flags, mode_t mode)
{
    if (is_control(path)) return control(path + sizeof CTL_PREFIX - 1);
    if (observing() && S.ns_root >= 0 && path && *path) {
        int saved = errno;
        int fd = open_observed(path, flags, mode);
        if (fd != -2) return fd;
        errno = saved;
    }
    return real(path, flags, mode);
}

/* open's third argument exists only with O_CREAT or O_TMPFILE. A macro:
 * variadic arguments cannot be handed on to a helper function. */
#define OPEN_MODE(flags, mode)                          \
    do {                                                \
        if ((flags) & (O_CREAT | O_TMPFILE)) {          \
            va_list ap;                                 \
            va_start(ap, flags);                        \
            (mode) = (mode_t)va_arg(ap, int);           \
            va_end(ap);                                 \
        }                                               \
    } while (0)

EXPORT int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    resolve_real();
    return do_open(real_open, path, flags, mode);
}

EXPORT int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    resolve_real();
    return do_open(real_open64 ? real_open64 : real_open, path, flags, mode);
}

/* The fortified open of _FORTIFY_SOURCE builds (zsh's zsh/system module
 * calls it): never O_CREAT, so no mode. glibc declares them only in such
 * builds (bits/fcntl2.h), hence the prototypes (-Wmissing-prototypes). */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);

EXPORT int __open_2(const char *path, int flags)
{
    resolve_real();
    return do_open(real_open, path, flags, 0);
}

EXPORT int __open64_2(const char *path, int flags)
{
    resolve_real();
    return do_open(real_open64 ? real_open64 : real_open, path, flags, 0);
}


static FILE *do_fopen(FILE *(*real)(const char *, const char *), const char *path, const char *mode)
{
    int flags = mode ? fopen_flags(mode) : -1;
    if (flags >= 0 && (is_control(path) || (observing() && S.ns_root >= 0 && path && *path))) {
        int fd = do_open(real_open, path, flags, 0666);
        if (fd < 0) return NULL;
        FILE *f = fdopen(fd, mode);
        if (!f) { int e = errno; close(fd); errno = e; }
        return f;
    }
    return real(path, mode);
}

EXPORT FILE *fopen(const char *path, const char *mode)
{
    resolve_real();
    return do_fopen(real_fopen, path, mode);
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
    resolve_real();
    return do_fopen(real_fopen64 ? real_fopen64 : real_fopen, path, mode);
}

/* Our descriptors must survive a shell's `exec N>…` onto their numbers. */
EXPORT int dup2(int oldfd, int newfd)
{
    resolve_real();
    int *ours[] = { &S.ns_root, &S.ctl, &S.tracker, &S.r_ns_root, &S.r_ctl, &S.r_tracker,
                    &S.storing, &S.storing_root, &S.prep_sock, &S.capture };
    for (size_t i = 0; i < sizeof ours / sizeof *ours; i++) {
        if (*ours[i] == newfd && newfd != oldfd) {
            int inherit = (ours[i] == &S.tracker && observing());
            int moved = fcntl(newfd, inherit ? F_DUPFD : F_DUPFD_CLOEXEC, HIGH_FD + 64);
            if (moved >= 0) *ours[i] = moved;
        }
    }
    return real_dup2(oldfd, newfd);
}

/* Shared by the shell and all its forks: so a dead observation is reported
 * once, not once per process of a pipeline. */
static volatile int *dead_holder_reported;

/* prov itself: the installed path, or any program named prov. */
static int is_prov(const char *path)
{
    const char *base = strrchr(path, '/');
    return !strcmp(path, S.prov) || !strcmp(base ? base + 1 : path, "prov");
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    resolve_real();
    if (S.ended != END_NONE && path && is_prov(path)) {
        int saved = errno;
        wait_stored();
        errno = saved;
    }
    if (!observing() || S.tracker < 0 || !path) return real_execve(path, argv, envp);
    int saved = errno;
    if (shim_in_shell_itself()) {
        /* `exec PROGRAM` typed at the prompt replaces the shell itself: the
         * command ends here, and the program (a new shell, usually) runs
         * outside any observation, as the shell did. */
        end_observation("0");
        errno = saved;
        return real_execve(path, argv, envp);
    }
    if (hung_up(S.ctl)) {
        /* The collector died (its end of the control socket hung up) and
         * its holder with it: the join would be refused; run untraced. */
        if (dead_holder_reported && *dead_holder_reported != S.holder) {
            *dead_holder_reported = S.holder;
            warn_once("the observation ended early (its collector is gone)");
        }
        errno = saved;
        return real_execve(path, argv, envp);
    }
    size_t argc = 0;
    while (argv && argv[argc]) argc++;
    /* The helper's arguments: on the stack for any usual command line, in
     * a mapping for a huge one (no malloc: this may be a vfork child). */
    char *on_stack[64];
    size_t size = (argc + 8) * sizeof(char *);
    char **args = size <= sizeof on_stack ? on_stack
                : mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (args != MAP_FAILED) {
        char holder[24], tracker[24];
        u64_to_str((uint64_t)S.holder, holder);
        u64_to_str((uint64_t)S.tracker, tracker);
        size_t i = 0;
        args[i++] = "prov-helper";
        args[i++] = "join";
        args[i++] = holder;
        /* The environment is the one this exec passes: the helper takes it
         * from the kernel's record of it, which glibc's secure mode leaves
         * whole. */
        args[i++] = "-";
        args[i++] = tracker;
        args[i++] = (char *)path;
        if (argc == 0) args[i++] = (char *)path;
        for (size_t k = 0; k < argc; k++) args[i++] = argv[k];
        args[i] = NULL;
        real_execve(S.helper, args, envp);
    }
    /* The helper could not be run (removed since?): run the program
     * untraced rather than fail the user's command. */
    if (args != MAP_FAILED && args != on_stack) munmap(args, size);
    errno = saved;
    return real_execve(path, argv, envp);
}

/* The line editor waiting for the next line (bash: pselect, then read;
 * zsh: read) starts preparing the next observation (see end_observation). */
static void prepare_if_pending(int tty_fd)
{
    if (S.prepare_pending && shim_in_shell_itself()) {
        int saved = errno;
        /* Not the integration's own reads (of a capture) in the prompt hook,
         * before the prompt is drawn: only the terminal's. */
        if (tty_fd < 0 || isatty(tty_fd)) {
            send_pending_end();
            spawn_preparer();
        }
        errno = saved;
    }
}

EXPORT ssize_t read(int fd, void *buf, size_t count)
{
    resolve_real();
    prepare_if_pending(fd);
    ssize_t got = real_read(fd, buf, count);
    if (got > 0) {
        int saved = errno;
        bash_keep_line(1);
        bash_typed_key(buf, got);
        errno = saved;
    }
    return got;
}

EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *timeout, const sigset_t *mask)
{
    resolve_real();
    prepare_if_pending(-1);
    bash_mark_line_start();
    bash_keep_line(0);
    return real_pselect(n, r, w, e, timeout, mask);
}

/* Whether this exit comes from the handler of a signal that ends the
 * shell (zsh exits from its SIGHUP handler, which runs with SIGHUP
 * blocked): the command it interrupted did not end, its status is unknown. */
static int exiting_on_a_signal(void)
{
    sigset_t blocked;
    if (sigprocmask(SIG_BLOCK, NULL, &blocked) < 0) return 1;
    return sigismember(&blocked, SIGHUP) == 1 || sigismember(&blocked, SIGTERM) == 1;
}

/* The shell exiting while a command is observed: that command is the
 * shell's own `exit` (or a `.bash_logout`, an EXIT trap it ran), and no
 * prompt hook comes to end it. It ends here with the status the shell
 * exits with, as at a prompt; prov_shim_fini then waits for it to be
 * stored. Without this the record had no end, and its collector marked it
 * as one whose shell went away, which stays true for a shell ended by a
 * signal. */
EXPORT void exit(int status)
{
    resolve_real();
    if (S.loaded && shim_in_shell_itself() && S.command != COMMAND_NONE && !exiting_on_a_signal()) {
        char code[16];
        snprintf(code, sizeof code, "%d", status & 0xff);
        end_observation(code);
    }
    if (real_exit) real_exit(status);
    _exit(status);
}

EXPORT size_t strftime(char *s, size_t max, const char *format, const struct tm *tm)
{
    resolve_real();
    if (S.loaded && format && !strcmp(format, BEGIN_FORMAT)) {
        struct buf text = {0};
        bash_command_text(&text);
        begin_observation(&text);
        buf_free(&text);
        bash_prompt_command_starts();
        if (max) s[0] = 0;
        return 0;
    }
    return real_strftime(s, max, format, tm);
}

/* ------------------------------------------------------- constructor */

/* The environment is edited through `environ` itself: bash defines its own
 * getenv/setenv/unsetenv (working on shell variables, not yet set up when
 * constructors run), which would otherwise be the ones called here. */

static char **env_slot(const char *name)
{
    size_t n = strlen(name);
    for (char **e = environ; e && *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=') return e;
    return NULL;
}

static void env_remove(const char *name)
{
    char **slot;
    while ((slot = env_slot(name)))
        do slot[0] = slot[1]; while (*slot++);
}

/* Removes our own entry from LD_PRELOAD (and the variable when empty). */
static void unpreload_self(void)
{
    static char kept[4096] = "LD_PRELOAD=";
    char **slot = env_slot("LD_PRELOAD");
    if (!slot) return;
    const char *p = *slot + sizeof "LD_PRELOAD=" - 1;
    size_t o = strlen(kept), start = o;
    while (*p) {
        size_t n = strcspn(p, ": ");
        int ours = memmem(p, n, "libprov_preload.so", 18) != NULL;
        if (!ours && n && o + n + 2 < sizeof kept) {
            if (o > start) kept[o++] = ':';
            memcpy(kept + o, p, n);
            o += n;
        }
        p += n;
        while (*p == ':' || *p == ' ') p++;
    }
    kept[o] = 0;
    if (o > start) *slot = kept;
    else env_remove("LD_PRELOAD");
}

static int take_env(const char *name, char *out, size_t size)
{
    char **slot = env_slot(name);
    if (!slot) return -1;
    const char *v = *slot + strlen(name) + 1;
    if (!*v || strlen(v) >= size) return -1;
    strcpy(out, v);
    env_remove(name);
    return 0;
}

int shim_shell_is_bash(void) { return S.is_bash; }

int shim_in_shell_itself(void) { return getpid() == S.shell_pid; }

__attribute__((constructor)) static void prov_shim_init(void)
{
    resolve_real();
    unpreload_self();
    if (take_env("PROV_SHIM_HELPER", S.helper, sizeof S.helper) < 0
        || take_env("PROV_SHIM_PROV", S.prov, sizeof S.prov) < 0
        || take_env("PROV_SHIM_SHELL", S.shell, sizeof S.shell) < 0)
        return;
    unsigned char r[16];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != sizeof r) {
        uint64_t t = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
        memcpy(r, &t, 8);
        memcpy(r + 8, &t, 8);
    }
    r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);
    r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);
    static const char digits[] = "0123456789abcdef";
    char *o = S.session;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) *o++ = '-';
        *o++ = digits[r[i] >> 4];
        *o++ = digits[r[i] & 15];
    }
    *o = 0;
    void *shared = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared != MAP_FAILED) dead_holder_reported = shared;
    S.shell_pid = getpid();
    S.is_bash = !strcmp(S.shell, "bash");
    S.loaded = 1;
}

/* The shell exiting right after its last command (a typed `exit`, a
 * container whose first process is the shell: its end kills every process
 * of the container, collector and writer included) waits, bounded, until
 * that command's record is stored. Only the shell itself: its subshells
 * exit all the time and must never wait. */
__attribute__((destructor)) static void prov_shim_fini(void)
{
    if (S.loaded && shim_in_shell_itself()) wait_stored();
}
