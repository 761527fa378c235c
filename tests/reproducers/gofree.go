// A random Go program for the heap differential: objects of random sizes allocated from
// random goroutines, every page touched, a random share dropped, runtime.GC() twice, then
// idle. Each line read on stdin asks for the runtime's own figures (runtime/metrics),
// printed as one JSON line; "free" first returns the free heap to the OS
// (debug.FreeOSMemory), as an operator's remedy would. At the end of stdin it idles.
//
//	gofree SEED
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

var kept [][][]byte

func figures() map[string]uint64 {
	names := []string{
		"/memory/classes/heap/free:bytes",
		"/memory/classes/heap/released:bytes",
		"/memory/classes/heap/objects:bytes",
		"/memory/classes/heap/unused:bytes",
		"/gc/heap/goal:bytes",
		"/gc/gomemlimit:bytes",
	}
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	metrics.Read(samples)
	out := map[string]uint64{}
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			out[s.Name] = s.Value.Uint64()
		}
	}
	return out
}

func main() {
	seed, err := strconv.ParseInt(os.Args[1], 10, 64)
	if err != nil {
		panic(err)
	}
	r := rand.New(rand.NewSource(seed))
	goroutines := 1 + r.Intn(8)
	budget := (32 + r.Intn(480)) << 20 // 32 to 512 MiB in all
	drop := r.Float64()
	kept = make([][][]byte, goroutines)
	seeds := make([]int64, goroutines)
	for g := range seeds {
		seeds[g] = r.Int63()
	}
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(seeds[g]))
			var objs [][]byte
			for used := 0; used < budget/goroutines; {
				var n int
				switch r.Intn(3) {
				case 0:
					n = 16 + r.Intn(1024)
				case 1:
					n = 1024 + r.Intn(32<<10)
				default:
					n = (32 << 10) + r.Intn(4<<20)
				}
				b := make([]byte, n)
				for i := 0; i < n; i += 4096 {
					b[i] = 1
				}
				objs = append(objs, b)
				used += n
			}
			for i := range objs {
				if r.Float64() < drop {
					objs[i] = nil
				}
			}
			kept[g] = objs
		}(g)
	}
	wg.Wait()
	runtime.GC()
	runtime.GC()
	fmt.Printf("ready goroutines=%d budget=%d drop=%.2f\n", goroutines, budget, drop)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if strings.TrimSpace(in.Text()) == "free" {
			debug.FreeOSMemory()
		}
		line, _ := json.Marshal(figures())
		fmt.Println(string(line))
	}
	// Without a reader on stdin, idle until killed.
	time.Sleep(math.MaxInt64)
	runtime.KeepAlive(kept)
}
