/* spawn_loop N CMD...: runs CMD N times (after 3 warm-up runs), each
 * started with posix_spawn and waited for, and prints the median, minimum
 * and 90th percentile wall time in ms. PAUSE_MS=MS waits that long after
 * each run. Each run gets PROV_BENCH_SPAWNED_NS (the wall clock, ns since
 * the epoch, just before the spawn), so `prov run`'s report
 * (PROV_BENCH_REPORT) can tell prov's own start. See benches/run_phases.
 *
 *     cc -O2 -o spawn_loop benches/spawn_loop.c
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: spawn_loop N CMD [ARG...]\n");
        return 2;
    }
    int n = atoi(argv[1]);
    if (n <= 0) return 2;
    double *ms = malloc(sizeof(double) * (size_t)n);
    const char *pause = getenv("PAUSE_MS");
    for (int i = -3; i < n; i++) {
        struct timespec real, a, b;
        clock_gettime(CLOCK_REALTIME, &real);
        char spawned[32];
        snprintf(spawned, sizeof spawned, "%lld", (long long)real.tv_sec * 1000000000LL + real.tv_nsec);
        setenv("PROV_BENCH_SPAWNED_NS", spawned, 1);
        clock_gettime(CLOCK_MONOTONIC, &a);
        pid_t pid;
        if (posix_spawn(&pid, argv[2], NULL, NULL, argv + 2, environ)) {
            perror("posix_spawn");
            return 1;
        }
        int status;
        waitpid(pid, &status, 0);
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (i >= 0) ms[i] = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
        if (pause) usleep((useconds_t)atoi(pause) * 1000);
    }
    qsort(ms, (size_t)n, sizeof(double), by_value);
    printf("%s: median %.2f ms, min %.2f, p90 %.2f\n", argv[2], ms[n / 2], ms[0], ms[n * 9 / 10]);
    return 0;
}
