/*
 * A slow disk, for the tests (pgrx-tests/src/lib.rs) and the latency benchmark (bench/latency):
 * preloaded into a server (LD_PRELOAD), it makes every fsync and fdatasync sleep first, for as
 * many milliseconds as the file named by FSYNC_DELAY_FILE holds (read at each call, so a test
 * can change it while the server runs), or else as FSYNC_DELAY_MS says, then makes the real
 * call. A busy cloud disk behaves like this: writes land in the page cache at once, flushes
 * wait. The sleep resumes after signals, as a process blocked on a stalled disk does not wake up
 * for them. Each user builds it with cc into a temporary directory:
 *
 *   cc -shared -fPIC -O2 -o fsync-delay.so scripts/test/fsync-delay.c -ldl
 *
 * Only calls through the C library's symbols are delayed (PostgreSQL's WAL and data file
 * flushes, Rust's File::sync_all): a raw syscall would pass, and nothing here makes one.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
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
    int saved = errno;
    long ms = delay_ms();
    struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};

    if (ms > 0)
        while (nanosleep(&left, &left) != 0 && errno == EINTR)
            ;
    errno = saved;
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
