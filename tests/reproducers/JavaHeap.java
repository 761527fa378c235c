// A JVM that fills its Java heap, drops what it filled and collects, so its collector keeps
// committed heap it no longer uses; then it prints what the JVM itself says of its memory
// pools (MemoryPoolMXBean: committed and used per heap pool and for metaspace) and idles.
// usage: java JavaHeap.java FILL_MIB KEEP_MIB [nogc]
// (nogc: drop without System.gc(), leaving the collector to find the garbage itself)
// Prints "ready" and one NAME:TYPE:COMMITTED:USED:MAX per pool (spaces as _) on
// one line, then waits in a read of stdin, as tests/reproducers/blocked.h's "read" does:
// each byte wakes it to print "woke read CALL DATA" (CALL "ok" where the read gave the
// byte; DATA "ok" where the kept arrays hash as before), then it waits again.
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.util.ArrayList;
import java.util.Arrays;

public class JavaHeap {
    static ArrayList<byte[]> kept = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        int fill = Integer.parseInt(args[0]);
        int keep = Integer.parseInt(args[1]);
        ArrayList<byte[]> dropped = new ArrayList<>();
        // 256 KiB arrays: below G1's humongous size, as most objects are.
        for (int i = 0; i < fill * 4; i++) {
            byte[] b = new byte[1 << 18];
            for (int j = 0; j < b.length; j += 4096) b[j] = 1;
            if (i < keep * 4) kept.add(b); else dropped.add(b);
        }
        dropped = null;
        if (args.length < 3 || !args[2].equals("nogc")) System.gc();
        StringBuilder line = new StringBuilder("ready");
        for (MemoryPoolMXBean p : ManagementFactory.getMemoryPoolMXBeans()) {
            var u = p.getUsage();
            line.append(" " + p.getName().replace(' ', '_') + ":"
                + p.getType().toString().replace(' ', '_') + ":"
                + u.getCommitted() + ":" + u.getUsed() + ":" + u.getMax());
        }
        long start = checksum();
        System.out.println(line);
        System.out.flush();
        for (;;) {
            int c = System.in.read();
            if (c < 0) Thread.sleep(Long.MAX_VALUE);
            System.out.println("woke read " + (c == 'x' ? "ok" : "got=" + c) + " "
                + (checksum() == start ? "ok" : "changed"));
            System.out.flush();
        }
    }

    static long checksum() {
        long h = 0;
        for (byte[] b : kept) h = h * 31 + Arrays.hashCode(b);
        return h;
    }
}
