// A Go program with a live heap: its 64 MiB heap arenas look like glibc arena heaps in
// /proc/PID/maps but are not MAP_NORESERVE.
package main

import (
	"fmt"
	"time"
)

var sink [][]byte

func main() {
	for i := 0; i < 96; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		sink = append(sink, b)
	}
	fmt.Println("ready")
	time.Sleep(time.Hour)
}
