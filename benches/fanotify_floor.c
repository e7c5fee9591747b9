/*
 * fanotify-floor: the least any fanotify tracer of prov's events can cost a
 * command.
 *
 * It takes the events prov takes, the way prov's group is set up (see
 * suid-helper/src/main.rs, new_fanotify_group and MARK_MASK):
 *   - a notification-class group, FAN_CLOEXEC | FAN_NONBLOCK, with
 *     FAN_REPORT_FD_ERROR where the kernel has it (6.13+), event files
 *     opened O_RDONLY | O_LARGEFILE | O_CLOEXEC | O_NONBLOCK;
 *   - a mount mark for FAN_CLOSE_WRITE | FAN_CLOSE_NOWRITE | FAN_OPEN_EXEC
 *     on every mount of the namespace that carries files (prov marks them
 *     all: a copy from one mount to another is seen on both); a mount
 *     that cannot be marked (proc, sysfs, ...) is skipped;
 * and does nothing with an event but close the descriptor the kernel opened
 * for it. What remains is the kernel's own per-event work, which no
 * fanotify tracer that looks at the file's content can avoid: allocating,
 * merging and queueing the event in the traced process's close(), opening
 * the file and installing a descriptor in read(), closing it.
 *
 * The reader is run as cheaply as measured (benches/README.md, "The
 * floor"): the default mode wakes at most every SLEEP_US and then reads the
 * queue empty in 256 KiB batches, so the traced process's close() rarely
 * has a sleeping reader to wake (a wake-up, on a virtual machine an
 * inter-processor interrupt, per event was the largest part of the old
 * floor's cost). The other modes are kept to measure that choice again:
 *   --mode poll      poll() for every batch (wake-up per event when idle)
 *   --mode block     blocking read() (same wake-ups, no poll; with --run
 *                    also woken every 10 ms to see whether COMMAND exited)
 *   --mode timer     (default) sleep SLEEP_US between reads that emptied
 *                    the queue
 *   --sleep-us N     the timer mode's pause (default 1000)
 *   --buf BYTES      read() buffer (default 262144)
 *   --cpu N          pin the reader to CPU N
 *   --fid            report file identifiers instead of descriptors
 *                    (FAN_REPORT_FID: no open per event; prov cannot use
 *                    it, it has to read the content; for comparison only)
 *
 * Two ways to run it, as root:
 *   fanotify-floor [OPTIONS] --run -- COMMAND...
 *       what benches/bench.py's "floor" mode does: like prov, in a mount
 *       namespace of its own (a copy of this one, its mounts slaves), every mount of
 *       it marked, COMMAND run there as a child; reads until COMMAND exits
 *       and its events are read, then exits with COMMAND's status. Only
 *       COMMAND's events are taken, as prov takes only its command's.
 *   fanotify-floor [OPTIONS] PATH
 *       marks only the mount holding PATH, in this namespace, prints
 *       "ready" and reads until SIGTERM (every process's events on that
 *       mount count).
 * Either prints its event count to stderr at the end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/mount.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef FAN_REPORT_FD_ERROR
#define FAN_REPORT_FD_ERROR 0x00002000
#endif

static volatile sig_atomic_t stop;

static void on_term(int sig) { (void)sig; stop = 1; }

static void on_alarm(int sig) { (void)sig; }

enum mode { MODE_TIMER, MODE_POLL, MODE_BLOCK };

static const unsigned long long MARK_MASK = FAN_CLOSE_WRITE | FAN_CLOSE_NOWRITE | FAN_OPEN_EXEC;

/* Every mount of this namespace but the kernel's pseudo filesystems, as
 * prov's helper marks them (mounts of other types fail to mark and are
 * skipped the same way). Returns the number marked. */
static int mark_all_mounts(int group, unsigned long long mask)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f)
        return 0;
    char line[4096];
    int marked = 0;
    while (fgets(line, sizeof line, f)) {
        /* id parent major:minor root mount_point ... - fstype source opts */
        char root[1024], point[1024], fstype[64];
        if (sscanf(line, "%*d %*d %*s %1023s %1023s", root, point) != 2)
            continue;
        char *dash = strstr(line, " - ");
        if (!dash || sscanf(dash + 3, "%63s", fstype) != 1)
            continue;
        static const char *skip[] = { "proc", "sysfs", "cgroup2", "cgroup", "devpts", "mqueue",
                                      "debugfs", "tracefs", "securityfs", "pstore", "bpf",
                                      "configfs", "fusectl", "binfmt_misc", "hugetlbfs",
                                      "autofs", "nsfs", "efivarfs", NULL };
        int skipped = 0;
        for (const char **s = skip; *s; s++)
            skipped |= strcmp(fstype, *s) == 0;
        if (skipped)
            continue;
        /* mountinfo escapes spaces as \040; such mount points are left out. */
        if (fanotify_mark(group, FAN_MARK_ADD | FAN_MARK_MOUNT, mask, AT_FDCWD, point) == 0)
            marked++;
    }
    fclose(f);
    return marked;
}

static void usage(void)
{
    fprintf(stderr, "usage: fanotify-floor [--mode timer|poll|block] [--sleep-us N] [--buf BYTES] "
                    "[--cpu N] [--fid] (PATH | --run -- COMMAND...)\n");
    exit(2);
}

/* Reads every queued event; returns how many, 0 when the queue was empty. */
static unsigned long read_batch(int group, char *buf, long buf_size, unsigned long *reads)
{
    ssize_t n = read(group, buf, (size_t)buf_size);
    if (n <= 0)
        return 0;
    (*reads)++;
    unsigned long events = 0;
    struct fanotify_event_metadata *m = (struct fanotify_event_metadata *)buf;
    for (; FAN_EVENT_OK(m, n); m = FAN_EVENT_NEXT(m, n)) {
        if (m->fd >= 0)
            close(m->fd);
        events++;
    }
    return events;
}

int main(int argc, char **argv)
{
    enum mode mode = MODE_TIMER;
    long sleep_us = 1000, buf_size = 256 * 1024;
    int cpu = -1, fid = 0;
    const char *path = NULL;
    char **command = NULL;
    for (int i = 1; i < argc && !command; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--mode") && v) {
            mode = !strcmp(v, "poll") ? MODE_POLL : !strcmp(v, "block") ? MODE_BLOCK : MODE_TIMER;
            i++;
        } else if (!strcmp(a, "--sleep-us") && v) {
            sleep_us = atol(v);
            i++;
        } else if (!strcmp(a, "--buf") && v) {
            buf_size = atol(v);
            i++;
        } else if (!strcmp(a, "--cpu") && v) {
            cpu = atoi(v);
            i++;
        } else if (!strcmp(a, "--fid")) {
            fid = 1;
        } else if (!strcmp(a, "--run") && v && !strcmp(v, "--") && i + 2 < argc) {
            command = argv + i + 2;
        } else if (a[0] == '-' || path) {
            usage();
        } else {
            path = a;
        }
    }
    if (!path == !command || buf_size < 4096)
        usage();
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) < 0)
            fprintf(stderr, "fanotify-floor: cannot pin to CPU %d: %s\n", cpu, strerror(errno));
    }

    unsigned flags = FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_UNLIMITED_QUEUE | (mode == MODE_BLOCK ? 0 : FAN_NONBLOCK);
    unsigned event_flags = O_RDONLY | O_LARGEFILE | O_CLOEXEC | O_NONBLOCK;
    unsigned long long mask = MARK_MASK;
    if (fid) {
        flags |= FAN_REPORT_FID;
    }
    int group = fanotify_init(flags | (fid ? 0 : FAN_REPORT_FD_ERROR), event_flags);
    if (group < 0 && errno == EINVAL && !fid)
        group = fanotify_init(flags, event_flags);
    if (group < 0) {
        fprintf(stderr, "fanotify-floor: fanotify_init: %s\n", strerror(errno));
        return 1;
    }
    if (command) {
        /* prov's observation: a copy of the mount table (slave of this one), all marked. */
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0) {
            fprintf(stderr, "fanotify-floor: new mount namespace: %s\n", strerror(errno));
            return 1;
        }
        if (mark_all_mounts(group, mask) == 0) {
            fprintf(stderr, "fanotify-floor: no mount could be marked\n");
            return 1;
        }
    } else if (fanotify_mark(group, FAN_MARK_ADD | FAN_MARK_MOUNT, mask, AT_FDCWD, path) < 0) {
        fprintf(stderr, "fanotify-floor: fanotify_mark %s: %s\n", path, strerror(errno));
        return 1;
    }
    /* No SA_RESTART: SIGTERM (and, with --run, SIGCHLD) must interrupt
     * poll(), read() and nanosleep(). */
    struct sigaction sa = { .sa_handler = on_term };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    pid_t child = -1;
    if (command) {
        struct sigaction chld = { .sa_handler = on_term, .sa_flags = SA_NOCLDSTOP };
        sigaction(SIGCHLD, &chld, NULL);
        child = fork();
        if (child < 0)
            return 1;
        if (child == 0) {
            close(group);
            signal(SIGTERM, SIG_DFL);
            signal(SIGINT, SIG_DFL);
            signal(SIGCHLD, SIG_DFL);
            execvp(command[0], command);
            fprintf(stderr, "fanotify-floor: %s: %s\n", command[0], strerror(errno));
            _exit(127);
        }
    }

    if (command && mode == MODE_BLOCK) {
        /* A SIGCHLD just before a blocking read() would leave it waiting
         * for good: it is interrupted every 10 ms to look. */
        struct sigaction al = { .sa_handler = on_alarm };
        sigaction(SIGALRM, &al, NULL);
        struct itimerval every = { { 0, 10000 }, { 0, 10000 } };
        setitimer(ITIMER_REAL, &every, NULL);
    }
    char *buf = aligned_alloc(4096, (size_t)buf_size);
    if (!buf)
        return 1;
    if (!command) {
        printf("ready\n");
        fflush(stdout);
    }

    unsigned long events = 0, reads = 0;
    struct timespec pause = { .tv_sec = sleep_us / 1000000, .tv_nsec = (sleep_us % 1000000) * 1000 };
    int status = 0;
    while (!stop) {
        if (mode == MODE_POLL) {
            struct pollfd p = { .fd = group, .events = POLLIN };
            if (poll(&p, 1, -1) < 0)
                continue;
        }
        unsigned long got = read_batch(group, buf, buf_size, &reads);
        events += got;
        /* Empty (EAGAIN), or interrupted: wait for more. */
        if (!got && mode == MODE_TIMER)
            nanosleep(&pause, NULL);
    }
    if (command) {
        /* The command's closes are queued by the time it has exited: read
         * to the end (the group is non-blocking but in block mode). */
        while (waitpid(child, &status, 0) < 0 && errno == EINTR)
            ;
        if (mode == MODE_BLOCK)
            fcntl(group, F_SETFL, fcntl(group, F_GETFL) | O_NONBLOCK);
        unsigned long got;
        while ((got = read_batch(group, buf, buf_size, &reads)) > 0)
            events += got;
    }
    fprintf(stderr, "fanotify-floor: %lu events in %lu reads\n", events, reads);
    if (command)
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return 0;
}
