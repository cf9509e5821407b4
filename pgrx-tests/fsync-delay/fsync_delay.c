/*
 * A slow disk for tests: preloaded into a server (LD_PRELOAD), it makes every fsync and
 * fdatasync sleep first, for as many milliseconds as the file named by FSYNC_DELAY_FILE holds
 * (read at each call, so a test can change it while the server runs), or else as
 * FSYNC_DELAY_MS says. The sleep resumes after signals, as a process blocked on a stalled disk
 * does not wake up for them. Built by the tests that use it (pgrx-tests/src/lib.rs).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long delay_ms(void)
{
    const char *file = getenv("FSYNC_DELAY_FILE");
    const char *fixed = getenv("FSYNC_DELAY_MS");
    long ms = 0;

    if (file != NULL) {
        FILE *f = fopen(file, "r");
        if (f != NULL) {
            if (fscanf(f, "%ld", &ms) != 1)
                ms = 0;
            fclose(f);
        }
    } else if (fixed != NULL) {
        ms = atol(fixed);
    }
    return ms;
}

static void stall(void)
{
    long ms = delay_ms();
    struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};

    if (ms <= 0)
        return;
    while (nanosleep(&left, &left) != 0)
        ;
}

int fsync(int fd)
{
    static int (*real)(int);

    if (real == NULL)
        real = (int (*)(int)) dlsym(RTLD_NEXT, "fsync");
    stall();
    return real(fd);
}

int fdatasync(int fd)
{
    static int (*real)(int);

    if (real == NULL)
        real = (int (*)(int)) dlsym(RTLD_NEXT, "fdatasync");
    stall();
    return real(fd);
}
