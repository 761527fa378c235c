/* The population: COUNT idle processes, each touching KIB of its own anonymous memory
 * (in 4 KiB pages) and then sleeping until killed. Each child dies with this parent
 * (PR_SET_PDEATHSIG), so killing the parent by its pid ends the whole population.
 *
 * usage: idle COUNT KIB
 * prints "ready" once every child has touched its memory.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: idle COUNT KIB\n");
        return 2;
    }
    long count = atol(argv[1]);
    size_t bytes = (size_t)atol(argv[2]) * 1024;
    int ready[2];
    if (pipe(ready) != 0) {
        perror("pipe");
        return 1;
    }
    pid_t parent = getpid();
    for (long i = 0; i < count; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(0);
            close(ready[0]);
            char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0);
            if (p != MAP_FAILED) {
                madvise(p, bytes, MADV_NOHUGEPAGE);
                memset(p, 1, bytes);
            }
            char c = 1;
            if (write(ready[1], &c, 1) != 1)
                _exit(1);
            close(ready[1]);
            for (;;)
                pause();
        }
    }
    close(ready[1]);
    char c;
    for (long i = 0; i < count; i++)
        if (read(ready[0], &c, 1) != 1)
            return 1;
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}
