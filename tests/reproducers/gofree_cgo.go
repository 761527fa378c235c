//go:build withcgo

// With -tags withcgo the random program links the C library through cgo, as most Go
// programs that call C do: its Go heap is the same, glibc's malloc serves the C side.
package main

// #include <stdlib.h>
import "C"

func init() {
	C.free(C.malloc(64))
}
