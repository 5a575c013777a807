// fill.go - PUTs key_N -> val_N for N = 0 .. KEYS-1 into BigCache's HTTP
// server, over CONNS keep-alive connections, each key once; exits 1 naming
// the first key not answered 201 (run.sh: go run fill.go URL KEYS CONNS).
// wrk cannot do this: it drops and regenerates a request when it reconnects.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: go run fill.go URL KEYS CONNS (URL: http://HOST:PORT/api/v1/cache/)")
		os.Exit(2)
	}
	url := os.Args[1]
	n, err1 := strconv.ParseInt(os.Args[2], 10, 64)
	conns, err2 := strconv.Atoi(os.Args[3])
	if err1 != nil || err2 != nil || n < 1 || conns < 1 {
		fmt.Fprintln(os.Stderr, "fill: KEYS and CONNS must be positive integers")
		os.Exit(2)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
	var next atomic.Int64
	var failed atomic.Bool
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				key := "key_" + strconv.FormatInt(i, 10)
				req, err := http.NewRequest(http.MethodPut, url+key, strings.NewReader("val_"+strconv.FormatInt(i, 10)))
				if err == nil {
					var resp *http.Response
					if resp, err = client.Do(req); err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusCreated {
							err = fmt.Errorf("answered %s", resp.Status)
						}
					}
				}
				if err != nil {
					once.Do(func() { fmt.Fprintf(os.Stderr, "fill: PUT %s%s: %v\n", url, key, err) })
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() {
		os.Exit(1)
	}
	fmt.Printf("filled %d\n", n)
}
