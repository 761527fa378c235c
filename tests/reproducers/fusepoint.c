/* A glibc program that points its own arena ring into a file it maps from a FUSE mount: a
 * reader that follows the ring reads a page of the file that is not in memory, and waits
 * on the mount's server for as long as the server keeps the read.
 * usage: fusepoint FILE MIB
 * Holds MIB MiB (a deep-tier candidate), maps FILE private and read-only (never touched),
 * frees a 4 KiB block into the unsorted bin behind a guard (its list pointers then name
 * the main arena), and overwrites the main arena's next (glibc 2.26 and later on x86-64:
 * 0x870 bytes in) with an address in the middle of the mapping. Prints "ready PID ADDR"
 * and sleeps; it never allocates again. */
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Kept where the compiler must assume they are read: neither allocation is dropped. */
void *volatile kept[2];

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc != 3) return 2;
    size_t held = strtoull(argv[2], 0, 0) << 20;
    char *live = malloc(held);
    if (!live) return 3;
    memset(live, 1, held);
    kept[1] = live;
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) return 4;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 3 * 4096) return 5;
    char *file = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (file == MAP_FAILED) return 6;
    void *victim = malloc(4000);
    kept[0] = malloc(32);
    /* Read after the free on purpose: what glibc wrote into the freed block. */
    volatile uintptr_t *volatile words = victim;
    free(victim);
    /* Alone in the unsorted bin: both its pointers name the bin, 0x60 bytes into the
     * main arena. */
    uintptr_t arena = words[0] - 0x60;
    uintptr_t at = ((uintptr_t)file + (uintptr_t)st.st_size / 2) & ~(uintptr_t)4095;
    *(uintptr_t *)(arena + 0x870) = at;
    printf("ready %d %lx\n", (int)getpid(), (unsigned long)at);
    for (;;) pause();
}
