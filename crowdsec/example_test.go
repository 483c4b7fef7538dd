package crowdsec_test

import (
	"context"
	"log"
	"net/http"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
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

// A service that tells a CrowdSec LAPI of its bans as a machine, so that
// CrowdSec's bouncers enforce them: the machine follows the protector's
// journal until ctx ends.
func ExampleNewMachine() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := protect.New(protect.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	m, err := crowdsec.NewMachine(crowdsec.MachineOptions{URL: "http://127.0.0.1:8080",
		MachineID: "protect", Password: "the password of cscli machines add protect --password"})
	if err != nil {
		log.Fatal(err)
	}
	done, err := m.Start(ctx, admin.New(p))
	if err != nil {
		log.Fatal(err) // the store keeps no journal
	}
	defer func() { cancel(); <-done }()
	http.ListenAndServe(":8000", p.Middleware(http.NotFoundHandler()))
}
