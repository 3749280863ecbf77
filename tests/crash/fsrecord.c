/* fsrecord: an LD_PRELOAD shim recording what a process does to the files under one
 * directory, for the crash-consistency harness (tests/crash/recording.py reads it).
 *
 * Every call is passed on unchanged; once it has returned, a record of it is appended to
 * $FSRECORD_LOG: names created, renamed and removed, truncations, every write with its
 * bytes, and every fsync/fdatasync of a file or a directory. Only paths under
 * $FSRECORD_ROOT are recorded. Files are named by inode (the harness follows names
 * through renames with them). Each record carries a sequence number from one counter
 * and the CLOCK_MONOTONIC time at which the call returned, which the test compares with
 * its clients' acknowledgements. An fsync also carries the number taken before it
 * began: it covers only what had completed by then.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { OP_WRITE = 1, OP_TRUNCATE = 2, OP_CREATE = 3, OP_MKDIR = 4, OP_RENAME = 5, OP_UNLINK = 6,
       OP_RMDIR = 7, OP_FSYNC = 8, OP_FDATASYNC = 9 };

/* The record's fixed part (88 bytes); its names, then its data, follow it. */
struct record {
    uint32_t magic;         /* 0x46535243 "FSRC" */
    uint32_t op;
    uint64_t seq;           /* when the call returned */
    uint64_t seq_start;     /* fsync: taken before it began; others: = seq */
    uint64_t time_ns;       /* CLOCK_MONOTONIC when the call returned */
    uint64_t ino;           /* the file written, truncated or synced; the entry's inode */
    uint64_t parent;        /* the directory holding `name` */
    uint64_t parent2;       /* rename: the directory holding `name2` */
    uint64_t replaced;      /* rename: the inode `name2` held before (0: none) */
    int64_t offset;         /* write: where */
    int64_t length;         /* write: bytes of data following; truncate: the new size */
    uint16_t name_len;
    uint16_t name2_len;
    uint32_t is_dir;
};

static int log_fd = -1;
static char root[PATH_MAX];
static size_t root_len;
static uint64_t counter;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

#define REAL(name) static __typeof__(name) *real_##name; \
    if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

__attribute__((constructor)) static void fsrecord_start(void) {
    const char *path = getenv("FSRECORD_LOG"), *dir = getenv("FSRECORD_ROOT");
    if (!path || !dir || !realpath(dir, root)) return;
    root_len = strlen(root);
    log_fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

static void write_all(const void *data, size_t size) {
    const char *p = data;
    while (size) {
        long n = syscall(SYS_write, log_fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) abort();  /* a recording with a hole would prove nothing */
        p += n;
        size -= (size_t)n;
    }
}

static uint64_t take_seq(void) { return __atomic_add_fetch(&counter, 1, __ATOMIC_SEQ_CST); }

/* Append one record, with `length` bytes of data gathered from `iov`. */
static void emit(uint32_t op, struct record *r, uint64_t seq_start, const char *name, const char *name2,
                 const struct iovec *iov, int iovcnt) {
    struct timespec ts;
    r->magic = 0x46535243u;
    r->op = op;
    r->name_len = name ? (uint16_t)strlen(name) : 0;
    r->name2_len = name2 ? (uint16_t)strlen(name2) : 0;
    pthread_mutex_lock(&lock);
    r->seq = take_seq();
    r->seq_start = seq_start ? seq_start : r->seq;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r->time_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    write_all(r, sizeof *r);
    if (name) write_all(name, r->name_len);
    if (name2) write_all(name2, r->name2_len);
    int64_t left = op == OP_WRITE ? r->length : 0;
    for (int i = 0; i < iovcnt && left > 0; i++) {
        size_t take = iov[i].iov_len < (size_t)left ? iov[i].iov_len : (size_t)left;
        write_all(iov[i].iov_base, take);
        left -= (int64_t)take;
    }
    pthread_mutex_unlock(&lock);
}

/* Whether `path` (absolute, resolved) is the root or under it. */
static int under_root(const char *path) {
    return root_len && strncmp(path, root, root_len) == 0 && (path[root_len] == '/' || path[root_len] == 0);
}

/* The file `fd` names, if it is recorded: its inode and whether it is a directory. */
static int tracked_fd(int fd, uint64_t *ino, int *is_dir) {
    struct stat st;
    char link[64], target[PATH_MAX];
    if (log_fd < 0 || fd < 0 || syscall(SYS_fstat, fd, &st) != 0) return 0;
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    long n = syscall(SYS_readlinkat, AT_FDCWD, link, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = 0;
    if (!under_root(target)) return 0;
    *ino = st.st_ino;
    *is_dir = S_ISDIR(st.st_mode);
    return 1;
}

/* Split `path` (relative to `dirfd`) into its directory's absolute path and its last
 * name; 0 if not under the root. Symbolic links are not followed (Ottla makes none). */
static int resolve(int dirfd, const char *path, char *dir, char *name) {
    char full[PATH_MAX];
    if (log_fd < 0 || !path) return 0;
    if (path[0] == '/') {
        snprintf(full, sizeof full, "%s", path);
    } else {
        char base[PATH_MAX];
        if (dirfd == AT_FDCWD) {
            if (!getcwd(base, sizeof base)) return 0;
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            long n = syscall(SYS_readlinkat, AT_FDCWD, link, base, sizeof base - 1);
            if (n <= 0) return 0;
            base[n] = 0;
        }
        snprintf(full, sizeof full, "%s/%s", base, path);
    }
    size_t len = strlen(full);
    while (len > 1 && full[len - 1] == '/') full[--len] = 0;
    char *slash = strrchr(full, '/');
    if (!slash) return 0;
    snprintf(name, NAME_MAX + 1, "%s", slash + 1);
    if (slash == full) strcpy(dir, "/");
    else { *slash = 0; snprintf(dir, PATH_MAX, "%s", full); }
    if (!strcmp(name, ".") || !strcmp(name, "..")) return 0;
    return under_root(dir);
}

static uint64_t inode_of(const char *dir, const char *name, int *is_dir) {
    char path[PATH_MAX];
    struct stat st;
    if (name) snprintf(path, sizeof path, "%s/%s", dir, name);
    else snprintf(path, sizeof path, "%s", dir);
    if (syscall(SYS_newfstatat, AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) != 0) return 0;
    if (is_dir) *is_dir = S_ISDIR(st.st_mode);
    return st.st_ino;
}

/* --- writes ------------------------------------------------------------------------- */

static void record_write(int fd, const struct iovec *iov, int iovcnt, ssize_t written, off_t at) {
    uint64_t ino;
    int is_dir;
    if (written <= 0 || !tracked_fd(fd, &ino, &is_dir)) return;
    if (at < 0) at = (off_t)syscall(SYS_lseek, fd, 0, SEEK_CUR) - written;  /* O_APPEND too */
    struct record r = {0};
    r.ino = ino;
    r.offset = at;
    r.length = written;
    emit(OP_WRITE, &r, 0, NULL, NULL, iov, iovcnt);
}

ssize_t write(int fd, const void *buf, size_t count) {
    REAL(write);
    int saved;
    ssize_t n = real_write(fd, buf, count);
    saved = errno;
    struct iovec iov = {(void *)buf, count};
    record_write(fd, &iov, 1, n, -1);
    errno = saved;
    return n;
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
    REAL(writev);
    ssize_t n = real_writev(fd, iov, iovcnt);
    int saved = errno;
    record_write(fd, iov, iovcnt, n, -1);
    errno = saved;
    return n;
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    REAL(pwrite);
    ssize_t n = real_pwrite(fd, buf, count, offset);
    int saved = errno;
    struct iovec iov = {(void *)buf, count};
    record_write(fd, &iov, 1, n, offset);
    errno = saved;
    return n;
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    REAL(pwrite64);
    ssize_t n = real_pwrite64(fd, buf, count, offset);
    int saved = errno;
    struct iovec iov = {(void *)buf, count};
    record_write(fd, &iov, 1, n, offset);
    errno = saved;
    return n;
}

ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset) {
    REAL(pwritev);
    ssize_t n = real_pwritev(fd, iov, iovcnt, offset);
    int saved = errno;
    record_write(fd, iov, iovcnt, n, offset);
    errno = saved;
    return n;
}

static void record_truncate(int fd, off_t length) {
    uint64_t ino;
    int is_dir;
    if (!tracked_fd(fd, &ino, &is_dir)) return;
    struct record r = {0};
    r.ino = ino;
    r.length = length;
    emit(OP_TRUNCATE, &r, 0, NULL, NULL, NULL, 0);
}

int ftruncate(int fd, off_t length) {
    REAL(ftruncate);
    int rc = real_ftruncate(fd, length);
    int saved = errno;
    if (rc == 0) record_truncate(fd, length);
    errno = saved;
    return rc;
}

int ftruncate64(int fd, off_t length) {
    REAL(ftruncate64);
    int rc = real_ftruncate64(fd, length);
    int saved = errno;
    if (rc == 0) record_truncate(fd, length);
    errno = saved;
    return rc;
}

/* --- syncs -------------------------------------------------------------------------- */

static int synced(int fd, int op, int (*call)(int)) {
    uint64_t start = log_fd >= 0 ? take_seq() : 0;
    int rc = call(fd);
    int saved = errno;
    uint64_t ino;
    int is_dir;
    if (rc == 0 && tracked_fd(fd, &ino, &is_dir)) {
        struct record r = {0};
        r.ino = ino;
        r.is_dir = (uint32_t)is_dir;
        emit((uint32_t)op, &r, start, NULL, NULL, NULL, 0);
    }
    errno = saved;
    return rc;
}

int fsync(int fd) {
    REAL(fsync);
    return synced(fd, OP_FSYNC, real_fsync);
}

int fdatasync(int fd) {
    REAL(fdatasync);
    return synced(fd, OP_FDATASYNC, real_fdatasync);
}

/* --- names -------------------------------------------------------------------------- */

/* open(..., O_CREAT): a name created if it was not there; O_TRUNC empties what was. */
static int opened(int dirfd, const char *path, int flags, mode_t mode,
                  int (*call)(int, const char *, int, mode_t)) {
    char dir[PATH_MAX], name[NAME_MAX + 1];
    int watch = (flags & (O_CREAT | O_TRUNC)) && resolve(dirfd, path, dir, name);
    uint64_t before = watch ? inode_of(dir, name, NULL) : 0;
    int fd = call(dirfd, path, flags, mode);
    int saved = errno;
    if (fd >= 0 && watch) {
        struct stat st;
        if (syscall(SYS_fstat, fd, &st) == 0) {
            struct record r = {0};
            r.ino = st.st_ino;
            if (before == 0 || before != st.st_ino) {
                r.parent = inode_of(dir, NULL, NULL);
                emit(OP_CREATE, &r, 0, name, NULL, NULL, 0);
            } else if (flags & O_TRUNC) {
                r.length = 0;
                emit(OP_TRUNCATE, &r, 0, NULL, NULL, NULL, 0);
            }
        }
    }
    errno = saved;
    return fd;
}

static int call_openat(int dirfd, const char *path, int flags, mode_t mode) {
    return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

int open(const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }
    return opened(AT_FDCWD, path, flags, mode, call_openat);
}

int open64(const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }
    return opened(AT_FDCWD, path, flags, mode, call_openat);
}

int openat(int dirfd, const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }
    return opened(dirfd, path, flags, mode, call_openat);
}

int openat64(int dirfd, const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }
    return opened(dirfd, path, flags, mode, call_openat);
}

int creat(const char *path, mode_t mode) {
    return opened(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode, call_openat);
}

int creat64(const char *path, mode_t mode) {
    return opened(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode, call_openat);
}

static int made_dir(int dirfd, const char *path, int rc) {
    char dir[PATH_MAX], name[NAME_MAX + 1];
    int saved = errno;
    if (rc == 0 && resolve(dirfd, path, dir, name)) {
        struct record r = {0};
        r.ino = inode_of(dir, name, NULL);
        r.parent = inode_of(dir, NULL, NULL);
        r.is_dir = 1;
        emit(OP_MKDIR, &r, 0, name, NULL, NULL, 0);
    }
    errno = saved;
    return rc;
}

int mkdir(const char *path, mode_t mode) {
    REAL(mkdir);
    return made_dir(AT_FDCWD, path, real_mkdir(path, mode));
}

int mkdirat(int dirfd, const char *path, mode_t mode) {
    REAL(mkdirat);
    return made_dir(dirfd, path, real_mkdirat(dirfd, path, mode));
}

static int removed(int dirfd, const char *path, int want_dir, int (*call)(int, const char *, int), int flags) {
    char dir[PATH_MAX], name[NAME_MAX + 1];
    int is_dir = 0;
    int watch = resolve(dirfd, path, dir, name);
    uint64_t ino = watch ? inode_of(dir, name, &is_dir) : 0;
    uint64_t parent = watch ? inode_of(dir, NULL, NULL) : 0;
    int rc = call(dirfd, path, flags);
    int saved = errno;
    if (rc == 0 && watch && ino) {
        struct record r = {0};
        r.ino = ino;
        r.parent = parent;
        r.is_dir = (uint32_t)(want_dir || is_dir);
        emit(r.is_dir ? OP_RMDIR : OP_UNLINK, &r, 0, name, NULL, NULL, 0);
    }
    errno = saved;
    return rc;
}

static int call_unlinkat(int dirfd, const char *path, int flags) {
    return (int)syscall(SYS_unlinkat, dirfd, path, flags);
}

int unlink(const char *path) { return removed(AT_FDCWD, path, 0, call_unlinkat, 0); }
int rmdir(const char *path) { return removed(AT_FDCWD, path, 1, call_unlinkat, AT_REMOVEDIR); }
int unlinkat(int dirfd, const char *path, int flags) {
    return removed(dirfd, path, (flags & AT_REMOVEDIR) != 0, call_unlinkat, flags);
}

static int renamed(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned flags) {
    char dir[PATH_MAX], name[NAME_MAX + 1], dir2[PATH_MAX], name2[NAME_MAX + 1];
    int is_dir = 0;
    int watch = resolve(olddirfd, oldpath, dir, name) && resolve(newdirfd, newpath, dir2, name2);
    uint64_t ino = watch ? inode_of(dir, name, &is_dir) : 0;
    uint64_t replaced = watch ? inode_of(dir2, name2, NULL) : 0;
    int rc = (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags);
    int saved = errno;
    if (rc == 0 && watch && ino) {
        struct record r = {0};
        r.ino = ino;
        r.parent = inode_of(dir, NULL, NULL);
        r.parent2 = inode_of(dir2, NULL, NULL);
        r.replaced = replaced;
        r.is_dir = (uint32_t)is_dir;
        emit(OP_RENAME, &r, 0, name, name2, NULL, 0);
    }
    errno = saved;
    return rc;
}

int rename(const char *oldpath, const char *newpath) {
    return renamed(AT_FDCWD, oldpath, AT_FDCWD, newpath, 0);
}

int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return renamed(olddirfd, oldpath, newdirfd, newpath, 0);
}

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned flags) {
    return renamed(olddirfd, oldpath, newdirfd, newpath, flags);
}
