/* The floor: the least work any reader of these files can do. For every pid it opens,
 * reads and closes stat, status, smaps_rollup, oom_score and oom_score_adj; once per scan
 * it reads meminfo, vmstat and the THP settings. Nothing is parsed. A read shorter than
 * the buffer is taken as the end of the file: each of these files is produced whole by
 * one seq_file show, the same discipline membloat_exporter uses.
 *
 * usage: floor PROCFS SYSFS SCANS [--no-rollup | --files a,b,c]
 * prints one line per scan: the CPU time of that scan in nanoseconds, then "files N".
 * --files reads the named files of each pid instead of the five.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 16];
static long files;

static void slurp(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < (ssize_t)sizeof buf)
            break;
    }
    close(fd);
    files++;
}

static long long cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: floor PROCFS SYSFS SCANS [--no-rollup | --files a,b,c]\n");
        return 2;
    }
    const char *proc = argv[1], *sys = argv[2];
    int scans = atoi(argv[3]);
    int rollup = !(argc > 4 && strcmp(argv[4], "--no-rollup") == 0);
    static const char *sysfiles[] = {
        "enabled", "defrag", "shmem_enabled", "khugepaged/defrag", "khugepaged/max_ptes_none",
        "khugepaged/max_ptes_swap", "khugepaged/max_ptes_shared", "khugepaged/pages_to_scan",
        "khugepaged/scan_sleep_millisecs", "khugepaged/alloc_sleep_millisecs",
        "khugepaged/pages_collapsed", "khugepaged/full_scans",
    };
    const char *pidfiles[16] = {"stat", "status", "oom_score", "oom_score_adj", "smaps_rollup"};
    int npid = rollup ? 5 : 4;
    if (argc > 5 && strcmp(argv[4], "--files") == 0) {
        npid = 0;
        for (char *f = strtok(argv[5], ","); f && npid < 16; f = strtok(NULL, ","))
            pidfiles[npid++] = f;
    }
    char path[4096];
    for (int s = 0; s < scans; s++) {
        long long start = cpu_ns();
        files = 0;
        snprintf(path, sizeof path, "%s/meminfo", proc);
        slurp(path);
        snprintf(path, sizeof path, "%s/vmstat", proc);
        slurp(path);
        for (size_t i = 0; i < sizeof sysfiles / sizeof *sysfiles; i++) {
            snprintf(path, sizeof path, "%s/kernel/mm/transparent_hugepage/%s", sys, sysfiles[i]);
            slurp(path);
        }
        DIR *d = opendir(proc);
        if (!d) {
            perror(proc);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9')
                continue;
            for (int i = 0; i < npid; i++) {
                snprintf(path, sizeof path, "%s/%s/%s", proc, e->d_name, pidfiles[i]);
                slurp(path);
            }
        }
        closedir(d);
        printf("%lld\n", cpu_ns() - start);
    }
    printf("files %ld\n", files);
    return 0;
}
