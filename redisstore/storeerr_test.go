package redisstore

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	protect "github.com/httpprotect/protect"
)

// A Redis that refuses connections is named as such in Decision.Err,
// whether go-redis retries dialing or not.
func TestRedisOutageMessage(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	s, err := Dial("redis://"+dead+"/0", Options{RangeRefresh: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p, _ := newTestProtector(t, protect.Config{Store: s, OnStoreError: protect.FailOpen})
	d, err := p.VerifyAddr(context.Background(), netip.MustParseAddr("203.0.113.7"))
	if err != nil || d.Err == nil {
		t.Fatalf("VerifyAddr = %v, %v", d.Err, err)
	}
	if want := "connection refused at " + dead; !strings.HasSuffix(d.Err.Error(), want) || strings.Contains(d.Err.Error(), "deadline") {
		t.Fatalf("Decision.Err = %q; want it to end with %q", d.Err, want)
	}
	if err := s.Ping(context.Background()); err == nil || !strings.HasSuffix(err.Error(), "does not answer: connection refused at "+dead) {
		t.Fatalf("Ping = %v", err)
	}
}
