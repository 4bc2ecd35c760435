/*
 * libhookcage-statx.so: a preload shim for gVisor releases whose kernel
 * refuses statx() with AT_NO_AUTOMOUNT (EINVAL), e.g. Debian bookworm's
 * runsc 20221219. coreutils 9.1 (ls, stat, ...) always passes that flag, so
 * under such a runsc every `ls` in a hook failed with "Invalid argument".
 *
 * statx() here makes the system call itself; only when it fails with EINVAL
 * and AT_NO_AUTOMOUNT was set does it try once more without that flag.
 * AT_NO_AUTOMOUNT only stops the kernel from mounting an automount point on
 * the last path component, and a hook's container has none, so the answer is
 * the one the flag would have given. A kernel that accepts the flag (runc,
 * a fixed gVisor) never reaches the retry: its results are untouched.
 *
 * Installed by the runner image's /etc/ld.so.preload (images/runner/Dockerfile);
 * built by executor/sandbox/images.py with the host's cc:
 *   cc -O2 -fPIC -shared -o libhookcage-statx.so statx-shim.c
 * It needs only syscall() and errno from libc (GLIBC_2.2.5 symbols), so a
 * newer host glibc makes a library that bookworm's 2.36 loads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef AT_NO_AUTOMOUNT
#define AT_NO_AUTOMOUNT 0x800
#endif

__attribute__((visibility("default")))
int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf)
{
    long result = syscall(SYS_statx, dirfd, path, flags, mask, buf);
    if (result == -1 && errno == EINVAL && (flags & AT_NO_AUTOMOUNT) != 0)
        result = syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
    return (int)result;
}
