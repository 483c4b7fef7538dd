package main

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestLimitsCompose(t *testing.T) {
	h, closeAll, err := newHandler(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeAll)
	send := func(key string, n int) string {
		t.Helper()
		var codes []string
		for range n {
			r := httptest.NewRequest("GET", "/v1/things", nil)
			r.RemoteAddr = "192.0.2.10:4000" // one office NAT for everybody
			if key != "" {
				r.Header.Set("X-API-Key", key)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			codes = append(codes, fmt.Sprint(w.Code))
		}
		return strings.Join(codes, " ")
	}
	// Acme's two keys share one budget of 3.
	if got := send("key_acme_1", 2) + " " + send("key_acme_2", 3); got != "200 200 200 429 429" {
		t.Fatalf("send(key_acme_1, 2), send(key_acme_2, 3) = %s, want 200 200 200 429 429", got)
	}
	// Globex behind the same address is not punished for Acme.
	if got := send("key_globex", 2); got != "200 200" {
		t.Fatalf("send(key_globex, 2) = %s, want 200 200", got)
	}
	// Guessing keys: the address gate (20) stops it after the 13 left.
	got := send("guess", 20)
	if want := strings.TrimSpace(strings.Repeat("401 ", 13) + strings.Repeat("429 ", 7)); got != want {
		t.Fatalf("send(guess, 20) = %s, want %s", got, want)
	}
}
