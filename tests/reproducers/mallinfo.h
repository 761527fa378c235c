/* glibc's own account of the memory it holds: mallinfo2 (glibc 2.33+) where the C library
 * has it, else mallinfo (glibc 2.31: int fields, so the figures are modulo 2^32). The
 * reproducers print these once ready; tests compare the exporter with them. Declared weak
 * under another C name, so a program built against 2.31's headers runs and a program
 * built against newer ones does not clash with <malloc.h>'s declaration. */
#include <malloc.h>
#include <stddef.h>

struct glibc_mallinfo {
    unsigned long long arena, ordblks, smblks, fsmblks, fordblks;
    /* mallinfo2 was there: the figures are whole. */
    int whole;
};

struct mallinfo2_fields {
    size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks,
        keepcost;
};
extern struct mallinfo2_fields mallinfo2_weak(void) __asm__("mallinfo2") __attribute__((weak));

static inline struct glibc_mallinfo glibc_mallinfo(void) {
    struct glibc_mallinfo g;
    if (mallinfo2_weak) {
        struct mallinfo2_fields m = mallinfo2_weak();
        g.arena = m.arena, g.ordblks = m.ordblks, g.smblks = m.smblks, g.fsmblks = m.fsmblks,
        g.fordblks = m.fordblks, g.whole = 1;
    } else {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
        struct mallinfo m = mallinfo();
#pragma GCC diagnostic pop
        g.arena = (unsigned)m.arena, g.ordblks = (unsigned)m.ordblks,
        g.smblks = (unsigned)m.smblks, g.fsmblks = (unsigned)m.fsmblks,
        g.fordblks = (unsigned)m.fordblks, g.whole = 0;
    }
    return g;
}
