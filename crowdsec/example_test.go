package crowdsec_test

import (
	"context"
	"log"
	"net/http"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/crowdsec"
)

// A service that enforces a CrowdSec LAPI's decisions: the bouncer polls
// in the background, and the protector refuses what it holds as Blocked.
func Example() {
	ctx := context.Background()
	b, err := crowdsec.New(crowdsec.Options{URL: "http://127.0.0.1:8080", Key: "the key of cscli bouncers add"})
	if err != nil {
		log.Fatal(err)
	}
	go b.Run(ctx)
	p, err := protect.New(protect.Config{BlockLists: []protect.BlockList{b.BlockList()}})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	http.ListenAndServe(":8000", p.Middleware(http.NotFoundHandler()))
}
