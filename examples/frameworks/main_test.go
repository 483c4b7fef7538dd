package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/httpprotect/protect"
)

type hello struct {
	Client      string `json:"client"`
	GinClientIP string `json:"gin_client_ip"`
	EchoRealIP  string `json:"echo_real_ip"`
	Remaining   int64  `json:"remaining"`
}

func get(t *testing.T, h http.Handler, path, peer, xff string) (*httptest.ResponseRecorder, hello) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = peer
	if xff != "" {
		r.Header.Set("X-Forwarded-For", xff)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var body hello
	if w.Code == http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("json.Unmarshal(GET %s body %q) = %v", path, w.Body, err)
		}
	}
	return w, body
}

func TestFrameworks(t *testing.T) {
	for name, app := range map[string]func(*protect.Protector) http.Handler{
		"gin":  func(p *protect.Protector) http.Handler { return ginApp(p) },
		"echo": func(p *protect.Protector) http.Handler { return echoApp(p) },
	} {
		t.Run(name, func(t *testing.T) {
			p, err := newProtector()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			h := app(p)

			// A direct client that forges X-Forwarded-For is itself, to
			// protect and (configured alike) to the framework.
			w, b := get(t, h, "/api/hello", "203.0.113.9:4000", "1.2.3.4")
			fw := b.GinClientIP + b.EchoRealIP
			if w.Code != 200 || b.Client != "203.0.113.9" || fw != "203.0.113.9" || b.Remaining != 4 || w.Header().Get("RateLimit") == "" {
				t.Fatalf("get(/api/hello, 203.0.113.9 forging 1.2.3.4) = %d %+v %v; want 200 from 203.0.113.9 to both, 4 left, RateLimit", w.Code, b, w.Header())
			}
			// Through the load balancer, both read the header it wrote.
			w, b = get(t, h, "/api/hello", "10.0.0.1:4000", "198.51.100.7")
			if w.Code != 200 || b.Client != "198.51.100.7" || b.GinClientIP+b.EchoRealIP != "198.51.100.7" {
				t.Fatalf("get(/api/hello, through the proxy 10.0.0.1 for 198.51.100.7) = %d %+v, want 200 from 198.51.100.7 to both", w.Code, b)
			}
			// The health check is outside the group: never counted.
			for range 10 {
				if w, _ := get(t, h, "/healthz", "203.0.113.9:4000", ""); w.Code != 200 || w.Header().Get("RateLimit") != "" {
					t.Fatalf("get(/healthz) = %d %v, want 200 without RateLimit", w.Code, w.Header())
				}
			}
			for range 4 {
				get(t, h, "/api/hello", "203.0.113.9:4000", "")
			}
			// The 6th request: refused by protect, the handler never runs.
			w, _ = get(t, h, "/api/hello", "203.0.113.9:4000", "")
			var problem struct{ Code string }
			json.Unmarshal(w.Body.Bytes(), &problem)
			if w.Code != 429 || problem.Code != "rate_limited" || w.Header().Get("Retry-After") != "10" {
				t.Fatalf("get(/api/hello), the 6th request = %d %q %v; want 429 rate_limited, Retry-After 10", w.Code, w.Body, w.Header())
			}
		})
	}
}

// gin out of the box trusts every peer as a proxy: a direct client that
// writes X-Forwarded-For picks its own c.ClientIP(). protect does not
// believe it.
func TestGinDefaultClientIPIsForgeable(t *testing.T) {
	p, err := newProtector()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	gin.SetMode(gin.ReleaseMode)
	r := gin.New() // no SetTrustedProxies
	r.GET("/", ginProtect(p.Middleware), func(c *gin.Context) {
		d, _ := protect.FromContext(c.Request.Context())
		c.JSON(200, gin.H{"client": d.Addr.String(), "gin_client_ip": c.ClientIP()})
	})
	_, b := get(t, r, "/", "203.0.113.9:4000", "1.2.3.4")
	if b.GinClientIP != "1.2.3.4" || b.Client != "203.0.113.9" {
		t.Fatalf("get(/, 203.0.113.9 forging 1.2.3.4): gin's ClientIP = %q, protect's client %q; want 1.2.3.4, 203.0.113.9", b.GinClientIP, b.Client)
	}
}

// Around the whole engine, every path is covered and the decision reaches
// gin's handlers through the request's context.
func TestAroundTheEngine(t *testing.T) {
	p, err := newProtector()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.GET("/x", func(c *gin.Context) {
		d, ok := protect.FromContext(c.Request.Context())
		if !ok {
			c.String(500, "no decision")
			return
		}
		c.JSON(200, gin.H{"client": d.Addr.String(), "remaining": d.Remaining})
	})
	h := p.Middleware(r)
	if w, b := get(t, h, "/x", "203.0.113.9:4000", ""); w.Code != 200 || b.Client != "203.0.113.9" || b.Remaining != 4 {
		t.Fatalf("get(/x) = %d %+v, want 200 from 203.0.113.9, 4 left", w.Code, b)
	}
	// gin's own 404 is behind the protector too.
	if w, _ := get(t, h, "/nowhere", "203.0.113.9:4000", ""); w.Code != 404 || w.Header().Get("RateLimit") == "" {
		t.Fatalf("get(/nowhere) = %d %v, want gin's 404 with RateLimit", w.Code, w.Header())
	}
	// Skip passes /healthz untouched even around the engine.
	if w, _ := get(t, h, "/healthz", "203.0.113.9:4000", ""); w.Header().Get("RateLimit") != "" {
		t.Fatalf("get(/healthz) headers = %v, want no RateLimit: Skip passes it", w.Header())
	}
}
