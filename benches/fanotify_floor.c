/*
 * fanotify-floor: the least an fanotify tracer like prov can cost a command.
 *
 * Marks the mount holding PATH for the close events prov asks for, with the
 * same group flags (notification class, unlimited queue), and does nothing
 * with each event but close the descriptor the kernel opened for it. A
 * command run while this reader is active pays the kernel's own per-event
 * work (queueing, merging, opening the descriptor on read) and nothing of
 * prov's (path, fstat, hash, SQLite). benches/bench.py runs it as root in
 * the "floor" mode; it prints "ready" once marked and stops on SIGTERM.
 *
 * Usage: fanotify-floor PATH
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/fanotify.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig) { (void)sig; stop = 1; }

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fanotify-floor PATH\n");
        return 2;
    }
    int group = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_UNLIMITED_QUEUE,
                              O_RDONLY | O_LARGEFILE | O_CLOEXEC);
    if (group < 0) {
        fprintf(stderr, "fanotify-floor: fanotify_init: %s\n", strerror(errno));
        return 1;
    }
    if (fanotify_mark(group, FAN_MARK_ADD | FAN_MARK_MOUNT, FAN_CLOSE_WRITE | FAN_CLOSE_NOWRITE,
                      AT_FDCWD, argv[1]) < 0) {
        fprintf(stderr, "fanotify-floor: fanotify_mark %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    /* No SA_RESTART: SIGTERM must interrupt poll(). */
    struct sigaction sa = { .sa_handler = on_term };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    printf("ready\n");
    fflush(stdout);

    static char buf[256 * 1024] __attribute__((aligned(8)));
    unsigned long events = 0;
    while (!stop) {
        struct pollfd p = { .fd = group, .events = POLLIN };
        if (poll(&p, 1, -1) < 0)
            continue;
        for (;;) {
            ssize_t n = read(group, buf, sizeof buf);
            if (n <= 0)
                break;
            struct fanotify_event_metadata *m = (struct fanotify_event_metadata *)buf;
            for (; FAN_EVENT_OK(m, n); m = FAN_EVENT_NEXT(m, n)) {
                if (m->fd >= 0)
                    close(m->fd);
                events++;
            }
        }
    }
    fprintf(stderr, "fanotify-floor: %lu events\n", events);
    return 0;
}
