package main

import (
	"io"
	"net/http/httptest"
	"testing"
)

func TestHello(t *testing.T) {
	for _, bare := range []bool{true, false} {
		h, closeFn, err := newHandler(bare)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(closeFn)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		body, _ := io.ReadAll(w.Body)
		if w.Code != 200 || string(body) != "hello\n" || (w.Header().Get("RateLimit") == "") != bare {
			t.Fatalf("GET / with bare=%v = %d %q %v; want 200 \"hello\", RateLimit present %v", bare, w.Code, body, w.Header(), !bare)
		}
	}
}
