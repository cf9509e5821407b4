/*
 * A slow disk, for bench/latency: an LD_PRELOAD library that sleeps FSYNC_DELAY_MS milliseconds
 * (0 when unset) before every fsync() and fdatasync(), then makes the real call. A busy cloud
 * disk behaves like this: writes land in the page cache at once, flushes wait.
 *
 *   cc -shared -fPIC -O2 -o fsync-delay.so bench/fsync-delay.c -ldl
 *   LD_PRELOAD=$PWD/fsync-delay.so FSYNC_DELAY_MS=20 postgres ...
 *
 * Only calls through the C library's symbols are delayed (PostgreSQL's WAL and data file
 * flushes, Rust's File::sync_all): a raw syscall would pass, and nothing here makes one.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>

static void delay(void)
{
    const char *env = getenv("FSYNC_DELAY_MS");
    long ms = env ? strtol(env, NULL, 10) : 0;
    if (ms <= 0)
        return;
    int saved = errno;
    struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};
    /* A signal (PostgreSQL's latches use them) must not shorten the delay. */
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
    errno = saved;
}

int fsync(int fd)
{
    static int (*real)(int);
    if (!real)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    delay();
    return real(fd);
}

int fdatasync(int fd)
{
    static int (*real)(int);
    if (!real)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    delay();
    return real(fd);
}
