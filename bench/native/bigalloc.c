/* bigalloc: an LD_PRELOAD shim that logs every malloc, calloc and realloc of BIGALLOC_MIN bytes or more
 * (default 128 KiB, the agent's pinned mmap threshold) with its call stack, and the frees of those blocks,
 * to BIGALLOC_LOG.<pid>, so the blocks still alive at any moment can be listed by where they were made
 * (bench/bigalloc_live.py).  Why: the soak (bench/soak.py) saw the agent's RSS step up by about 0.9 MiB of
 * mmapped memory that no traced Python object explained; this found the block (docs/performance.md).
 *
 *   gcc -O2 -shared -fPIC -o /tmp/bigalloc.so bench/native/bigalloc.c -lpthread
 *   BIGALLOC_LOG=/tmp/ba/log LD_PRELOAD=/tmp/bigalloc.so .venv/bin/python bench/soak.py ...
 *   .venv/bin/python -m bench.bigalloc_live /tmp/ba/log.<agent pid>
 *
 * Small allocations pass straight through (one header read on free); a thread-local guard keeps the
 * shim's own backtrace() and writes from logging themselves.  glibc only (__libc_malloc and the chunk
 * header).  A debugging tool: not built by make, not shipped.
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <stdint.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

#define SLOTS 16384
static void *live[SLOTS];
static int nlive;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static __thread int busy;
static int fd = -1;
static size_t minsize = 131072;
static int inited;

static void init(void) {
    if (inited) return;
    inited = 1;
    const char *m = getenv("BIGALLOC_MIN");
    if (m) minsize = (size_t)atol(m);
    const char *p = getenv("BIGALLOC_LOG");
    if (!p) return;
    char path[512];
    snprintf(path, sizeof path, "%s.%d", p, (int)getpid());
    fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
}
static void add(void *p) { if (nlive < SLOTS) live[nlive++] = p; }
static int forget(void *p) {
    for (int i = nlive - 1; i >= 0; i--) if (live[i] == p) { live[i] = live[--nlive]; return 1; }
    return 0;
}
/* glibc chunk size from the header word before the pointer */
static size_t chunk(void *p) { return ((size_t *)p)[-1] & ~(size_t)7; }

static void logbig(char kind, void *old, void *p, size_t n) {
    char buf[160];
    void *bt[40];
    int k = backtrace(bt, 40);
    int len = snprintf(buf, sizeof buf, "%c %p %p %zu %ld\n", kind, old, p, n, (long)gettid());
    write(fd, buf, len);
    backtrace_symbols_fd(bt, k, fd);
    write(fd, ".\n", 2);
}

void *malloc(size_t n) {
    void *p = __libc_malloc(n);
    if (busy || n < minsize || !p) return p;
    busy = 1;
    pthread_mutex_lock(&mu); init();
    if (fd >= 0) { add(p); logbig('A', NULL, p, n); }
    pthread_mutex_unlock(&mu); busy = 0;
    return p;
}
void *calloc(size_t a, size_t b) {
    void *p = __libc_calloc(a, b);
    size_t n = a * b;
    if (busy || n < minsize || !p) return p;
    busy = 1;
    pthread_mutex_lock(&mu); init();
    if (fd >= 0) { add(p); logbig('A', NULL, p, n); }
    pthread_mutex_unlock(&mu); busy = 0;
    return p;
}
void *realloc(void *o, size_t n) {
    size_t oldsize = o ? chunk(o) : 0;
    void *p = __libc_realloc(o, n);
    if (busy) return p;
    busy = 1;
    pthread_mutex_lock(&mu); init();
    if (fd >= 0) {
        int was = (o && oldsize >= minsize) ? forget(o) : 0;
        if (p && (n >= minsize || was)) {
            add(p);
            logbig('R', o, p, n);
        } else if (was) {
            char buf[64]; int len = snprintf(buf, sizeof buf, "F %p\n", o); write(fd, buf, len);
        }
    }
    pthread_mutex_unlock(&mu); busy = 0;
    return p;
}
void free(void *p) {
    if (p && !busy && chunk(p) >= minsize) {
        busy = 1;
        pthread_mutex_lock(&mu);
        if (fd >= 0 && forget(p)) { char buf[64]; int len = snprintf(buf, sizeof buf, "F %p\n", p); write(fd, buf, len); }
        pthread_mutex_unlock(&mu); busy = 0;
    }
    __libc_free(p);
}
