/* A program dressed as a JVM running ZGC, run under the name `java`: it maps a perf-data
 * file (a copy of a real JVM's, at DIR/hsperfdata_USER/PID) and holds a memfd named
 * `java_heap` fallocated to HEAP_MIB MiB of which it maps 2 MiB, beside 72 MiB of touched
 * anonymous memory (a deep-tier candidate). The memfd's pages are its RAM, but no Java
 * heap: its views map 2 MiB of them.
 *
 * usage: java PERFDATA DIR HEAP_MIB
 * Prints "ready PID" once all is in place, then sleeps. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc != 4) return 2;
    /* The perf data: copied to where HotSpot writes it, and mapped shared. */
    FILE *in = fopen(argv[1], "rb");
    if (!in) return 3;
    static char data[1 << 20];
    size_t len = fread(data, 1, sizeof data, in);
    fclose(in);
    struct passwd *pw = getpwuid(getuid());
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/hsperfdata_%s", argv[2], pw ? pw->pw_name : "tenant");
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/%d", dir, (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, data, len) != (ssize_t)len) return 4;
    if (mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED) return 5;
    /* The "heap": a memfd of ZGC's name, its pages allocated, 2 MiB of it mapped. */
    size_t heap = strtoull(argv[3], 0, 0) << 20;
    int m = memfd_create("java_heap", 0);
    if (m < 0 || fallocate(m, 0, 0, heap)) return 6;
    char *view = mmap(NULL, 2 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, m, 0);
    if (view == MAP_FAILED) return 7;
    memset(view, 1, 2 << 20);
    size_t bytes = 72u << 20;
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 8;
    memset(p, 1, bytes);
    printf("ready %d\n", (int)getpid());
    for (;;) pause();
}
