/*
 * A slow disk, for the tests (pgrx-tests/src/lib.rs) and bench/latency: preloaded into a server
 * (LD_PRELOAD), it makes every fsync and fdatasync first sleep as many milliseconds as the file
 * named by FSYNC_DELAY_FILE holds (read at each call, so a test can change it), or else as
 * FSYNC_DELAY_MS says: a busy cloud disk's flushes. The sleep resumes after signals, as a process
 * blocked on a stalled disk does not wake for them. Only calls through the C library are delayed.
 *
 *   cc -shared -fPIC -O2 -o fsync-delay.so pgrx-tests/fsync-delay.c -ldl
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
    FILE *f;
    long ms = 0;

    if (file == NULL)
        return fixed != NULL ? atol(fixed) : 0;
    if ((f = fopen(file, "r")) != NULL) {
        if (fscanf(f, "%ld", &ms) != 1)
            ms = 0;
        fclose(f);
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

/* The C library's function NAME, called after the stall. */
#define DELAYED(name)                                               \
    int name(int fd)                                                \
    {                                                               \
        static int (*real)(int);                                    \
                                                                    \
        if (real == NULL)                                           \
            real = (int (*)(int)) dlsym(RTLD_NEXT, #name);          \
        stall();                                                    \
        return real(fd);                                            \
    }

DELAYED(fsync)
DELAYED(fdatasync)
