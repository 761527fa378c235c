/* khugepaged regrowth: 256 MiB, 2 MiB aligned, touched without huge pages, then 511 of
 * every 512 pages released with MADV_DONTNEED, then MADV_HUGEPAGE. Prints "ready" and
 * sleeps: any growth after that is khugepaged's, not the program's. */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE (2UL << 20)
#define SIZE (256UL << 20)

int main(void) {
    char *raw = mmap(NULL, SIZE + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return 1;
    char *p = (char *)(((uintptr_t)raw + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    if (madvise(p, SIZE, MADV_NOHUGEPAGE)) return 1;
    for (size_t i = 0; i < SIZE; i += 4096) p[i] = 1;
    for (size_t off = 0; off < SIZE; off += HUGE)
        if (madvise(p + off + 4096, HUGE - 4096, MADV_DONTNEED)) return 1;
    if (madvise(p, SIZE, MADV_HUGEPAGE)) return 1;
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}
