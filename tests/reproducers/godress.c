/* A C program dressed as a Go binary: a `.go.buildinfo` section and the three runtime
 * symbols the exporter looks up, so it reads the binary's DWARF for a Go layout. The test
 * adds the DWARF (`objcopy --add-section`, compressed): a section that inflates to
 * hundreds of MiB from a file of a few hundred KiB. Touches 72 MiB (a deep-tier
 * candidate), prints "ready PID" and sleeps. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Go 1.18+'s build info: magic, pointer size, flags (inline strings), padding to 32
 * bytes, then the version and the module information, each length-prefixed. */
__attribute__((section(".go.buildinfo"), used, aligned(16))) const unsigned char
    buildinfo[48] = "\xff Go buildinf:\x08\x02\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x08go1.22.0\0";

unsigned char gc_controller[4096] __asm__("runtime.gcController");
unsigned char mheap[4096] __asm__("runtime.mheap_");
unsigned char allp[16] __asm__("runtime.allp");

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    size_t bytes = 72u << 20;
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 3;
    memset(p, 1, bytes);
    gc_controller[0] = mheap[0] = allp[0] = 1;
    printf("ready %d\n", (int)getpid());
    for (;;) pause();
}
