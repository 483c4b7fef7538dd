package challenge

import (
	"testing"
	"time"
)

// BenchmarkPassCheck measures CheckPass of a valid pass, as a request
// with the pass cookie costs when its stream is past Challenge.After.
// docs/performance.md gives the figure.
func BenchmarkPassCheck(b *testing.B) {
	now := time.Unix(1_800_000_000, 0)
	c, _, err := New(Config{Secret: []byte("0123456789abcdef0123456789abcdef"), Clock: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	const key = "203.0.113.7"
	pass, _ := c.Pass(key)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.CheckPass(key, pass); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzToken: whatever a client sends as a pass or a nonce, CheckPass
// and Verify return an error (never panic) unless it is a token this
// Challenger signed; a signed pass is accepted, for its key alone.
func FuzzToken(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	c, _, err := New(Config{Secret: []byte("0123456789abcdef"), Difficulty: 1, Clock: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	pass, _ := c.Pass("k")
	for _, s := range []string{pass, c.Nonce("k"), "", ".", "a.b", pass + "=", pass[:len(pass)-1], pass[:4] + "\n" + pass[4:]} {
		f.Add(s, "k")
	}
	f.Fuzz(func(t *testing.T, token, key string) {
		if err := c.CheckPass(key, token); err == nil {
			if p, _ := c.Pass(key); p != token {
				t.Fatalf("CheckPass(%q, %q) = nil for a token it did not sign (%q)", key, token, p)
			}
		}
		c.Verify(key, token, "0")
	})
}

// Checks at once share the Challenger's scratch pool safely (go test
// -race): each sees its own token.
func TestCheckPassConcurrent(t *testing.T) {
	c, _, err := New(Config{Secret: []byte("0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 8)
	for g := range 8 {
		go func() {
			key := string(rune('a' + g))
			pass, _ := c.Pass(key)
			other, _ := c.Pass(key + "x")
			for range 500 {
				if err := c.CheckPass(key, pass); err != nil {
					done <- err
					return
				}
				if err := c.CheckPass(key, other); err != ErrKey {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatalf("CheckPass under concurrency = %v, want nil and ErrKey", err)
		}
	}
}
