/*
 * lmbench_loops: the loops of lmbench's lat_proc fork / exec and
 * lat_syscall open / stat, for the PROBE workload group (benches/bench.py),
 * since Debian ships no lmbench. A fixed number of iterations instead of
 * lmbench's timed calibration, so every mode runs the same work.
 *
 *     lmbench_loops fork N         fork; the child exits; wait
 *     lmbench_loops exec N         fork; the child execs this program's
 *                                  "hello" (like lmbench's hello); wait
 *     lmbench_loops open N FILE    open FILE read-only; close
 *     lmbench_loops stat N FILE    stat FILE
 *
 *     cc -O2 -o lmbench_loops benches/lmbench_loops.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static void wait_child(pid_t pid)
{
    int status;
    if (waitpid(pid, &status, 0) < 0)
        die("waitpid");
    if (!WIFEXITED(status))
        die("child");
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "hello") == 0) {
        /* lmbench's hello: write a line and exit. */
        static const char msg[] = "Hello world\n";
        return write(1, msg, sizeof msg - 1) == (ssize_t)(sizeof msg - 1) ? 0 : 1;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: lmbench_loops fork|exec|open|stat N [FILE]\n");
        return 2;
    }
    const char *what = argv[1];
    long n = strtol(argv[2], NULL, 10);
    const char *file = argc > 3 ? argv[3] : NULL;
    if ((!strcmp(what, "open") || !strcmp(what, "stat")) && !file) {
        fprintf(stderr, "lmbench_loops %s: FILE missing\n", what);
        return 2;
    }
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len < 0)
        die("readlink /proc/self/exe");
    self[len] = 0;
    for (long i = 0; i < n; i++) {
        if (!strcmp(what, "fork")) {
            pid_t pid = fork();
            if (pid < 0)
                die("fork");
            if (pid == 0)
                _exit(1);
            wait_child(pid);
        } else if (!strcmp(what, "exec")) {
            pid_t pid = fork();
            if (pid < 0)
                die("fork");
            if (pid == 0) {
                char *args[] = {self, "hello", NULL};
                execv(self, args);
                _exit(127);
            }
            wait_child(pid);
        } else if (!strcmp(what, "open")) {
            int fd = open(file, O_RDONLY);
            if (fd < 0)
                die("open");
            close(fd);
        } else if (!strcmp(what, "stat")) {
            struct stat st;
            if (stat(file, &st) < 0)
                die("stat");
        } else {
            fprintf(stderr, "lmbench_loops: unknown loop %s\n", what);
            return 2;
        }
    }
    return 0;
}
