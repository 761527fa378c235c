/* jemalloc linked in statically (Debian's libjemalloc.a), whose one dirty extent is made
 * shared memory, then forked: each process's jemalloc lists the same pages as its own.
 * usage: jeshare MIB FORKS
 * Allocates MIB MiB (one large extent of its own), touches and frees it (jemalloc keeps it
 * dirty: no decay), maps a shared anonymous mapping over the extent's address range and
 * touches it, then forks FORKS - 1 children that sleep (and end with it). The parent prints "ready PID"
 * once they are all started (each child reads every page of the shared memory), then sleeps.
 * Build: cc -O1 -pthread jeshare.c -Wl,-Bstatic -ljemalloc -Wl,-Bdynamic -lm -ldl */
#include <jemalloc/jemalloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Freed pages stay dirty for good; no arena of its own for large blocks. */
const char *malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1,oversize_threshold:0";

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc != 3) return 2;
    size_t bytes = strtoull(argv[1], 0, 0) << 20;
    long forks = strtol(argv[2], 0, 0);
    char *p = malloc(bytes);
    if (!p) return 3;
    memset(p, 1, bytes);
    free(p);
    /* A large block starts a random number of cache lines into its extent's first page. */
    char *base = (char *)((unsigned long)p & ~4095ul);
    if (mmap(base, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1,
             0) != base)
        return 4;
    memset(base, 2, bytes);
    /* 72 MiB of anonymous memory each process maps (copy-on-write after the fork): a
     * deep-tier candidate, every one of them. */
    size_t anon = 72u << 20;
    char *a = mmap(NULL, anon, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED) return 6;
    memset(a, 1, anon);
    for (long i = 1; i < forks; i++) {
        pid_t c = fork();
        if (c < 0) return 5;
        if (c == 0) {
            /* Ends with its parent, whoever ends it. */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() == 1) return 0;
            /* Its page tables map the shared pages as it reads them. */
            volatile char sum = 0;
            for (size_t at = 0; at < bytes; at += 4096) sum += base[at];
            for (;;) pause();
        }
    }
    printf("ready %d\n", (int)getpid());
    for (;;) pause();
}
