/* Anonymous memory in transparent huge pages: waits for a line on stdin (so a test can
 * first move it into a cgroup), then maps 64 MiB 2 MiB-aligned with MADV_HUGEPAGE and
 * touches it; prints "ready" and sleeps. */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE (2UL << 20)
#define SIZE (64UL << 20)

int main(void) {
    if (getchar() == EOF) return 1;
    char *raw = mmap(NULL, SIZE + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return 1;
    char *p = (char *)(((uintptr_t)raw + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    if (madvise(p, SIZE, MADV_HUGEPAGE)) return 1;
    for (size_t i = 0; i < SIZE; i += 4096) p[i] = 1;
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}
