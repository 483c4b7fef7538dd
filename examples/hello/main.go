// Command hello is a net/http hello world behind protect, for measuring
// what the middleware costs. -bare serves the same handler without it.
// The limits are set so that a load generator is never refused: every
// request takes the full counted path.
//
//	go run ./examples/hello -addr 127.0.0.1:8090 &
//	wrk -t1 -c32 -d10s http://127.0.0.1:8090/
package main

import (
	"flag"
	"io"
	"log"
	"log/slog"
	"net/http"
	"time"

	"github.com/httpprotect/protect"
)

func newHandler(bare bool) (http.Handler, func(), error) {
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	if bare {
		return hello, func() {}, nil
	}
	p, err := protect.New(protect.Config{MaxRequests: 1 << 40, BanLimit: -1, Logger: slog.Default()})
	if err != nil {
		return nil, nil, err
	}
	return p.Middleware(hello), func() { p.Close() }, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address")
	bare := flag.Bool("bare", false, "serve without the middleware")
	flag.Parse()
	h, closeFn, err := newHandler(*bare)
	if err != nil {
		log.Fatal(err)
	}
	defer closeFn()
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
