/* A toy allocator that keeps what it frees, for the reader tests/planted.rs plants: its
 * pool is one private anonymous mapping, and toyalloc_state (in the executable's symbol
 * table) says where it is, how large, and how much of its start is in use.
 * usage: toyalloc POOL_MIB IN_USE_MIB RELEASED_MIB
 * Touches the whole pool, "frees" all past IN_USE_MIB (kept, resident), gives the last
 * RELEASED_MIB back with MADV_DONTNEED, prints "ready HELD" (the bytes it keeps resident
 * and unused: POOL - IN_USE - RELEASED MiB) and waits. SIGUSR2 (its remedy) gives all it
 * keeps back, and it prints "released". */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct toyalloc {
    char magic[8];
    uint64_t pool;
    uint64_t pool_bytes;
    uint64_t in_use_bytes;
};

struct toyalloc toyalloc_state = {{'T', 'O', 'Y', 'A', 'L', 'L', 'O', 'C'}, 0, 0, 0};

static volatile sig_atomic_t give_back;

static void on_usr2(int sig) {
    (void)sig;
    give_back = 1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: toyalloc POOL_MIB IN_USE_MIB RELEASED_MIB\n");
        return 2;
    }
    uint64_t pool = strtoull(argv[1], 0, 10) << 20;
    uint64_t in_use = strtoull(argv[2], 0, 10) << 20;
    uint64_t released = strtoull(argv[3], 0, 10) << 20;
    if (in_use + released > pool) {
        fprintf(stderr, "IN_USE + RELEASED exceeds POOL\n");
        return 2;
    }
    char *p = mmap(0, pool, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    /* No huge pages: the pool's residency is counted in 4 KiB pages, as given back. */
    madvise(p, pool, MADV_NOHUGEPAGE);
    memset(p, 0x5a, pool);
    if (released && madvise(p + pool - released, released, MADV_DONTNEED) != 0) {
        perror("madvise");
        return 1;
    }
    signal(SIGUSR2, on_usr2);
    toyalloc_state.pool = (uint64_t)(uintptr_t)p;
    toyalloc_state.pool_bytes = pool;
    toyalloc_state.in_use_bytes = in_use;
    printf("ready %llu\n", (unsigned long long)(pool - in_use - released));
    fflush(stdout);
    for (;;) {
        pause();
        if (give_back) {
            give_back = 0;
            if (madvise(p + in_use, pool - in_use, MADV_DONTNEED) != 0) {
                perror("madvise");
                return 1;
            }
            printf("released\n");
            fflush(stdout);
        }
    }
}
