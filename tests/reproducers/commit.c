/* Overcommit exposure: a 4 GiB private anonymous mapping, untouched. Prints "ready",
 * waits for a line on stdin, touches every page, prints "touched", sleeps. */
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#define SIZE (4UL << 30)

int main(void) {
    char *p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    printf("ready\n");
    fflush(stdout);
    if (getchar() == EOF) return 1;
    for (size_t i = 0; i < SIZE; i += 4096) p[i] = 1;
    printf("touched\n");
    fflush(stdout);
    for (;;) pause();
}
