// Command frameworks shows protect under gin and echo, with the adapters
// in this example rather than in the protect module (which depends on
// neither). This directory is a module of its own, so that gin and echo
// are its dependencies only.
//
//	go run . -framework gin    # listens on 127.0.0.1:8080
//	go run . -framework echo
//
// Two ways to mount the protector, in both frameworks:
//
//   - Around the whole engine: p.Middleware(engine). gin.Engine and
//     echo.Echo are http.Handlers, so every feature works as it does on
//     net/http: every path (404s included), Skip, OnRefused, CountStatus
//     and FromContext(c.Request.Context()).
//   - On a route group, with an adapter: gin has none of its own (ginProtect
//     below); echo has echo.WrapMiddleware. Under gin's adapter CountStatus
//     does not see the status (gin handlers write to gin's own writer):
//     mount around the engine for that.
//
// Who the client is: protect resolves the client from TrustedProxies,
// never from a header a direct client wrote. gin's c.ClientIP() trusts
// every peer as a proxy by default (SetTrustedProxies has not been
// called) and believes X-Forwarded-For and X-Real-IP: a client that
// connects directly and sends "X-Forwarded-For: 1.2.3.4" is 1.2.3.4 to
// gin, and its own address to protect. Call engine.SetTrustedProxies with
// the list you give protect, so that both agree. echo's c.RealIP() (v4.16)
// uses the peer unless e.IPExtractor is set; set it to
// echo.ExtractIPFromXFFHeader(echo.TrustIPRange(...)) with the same
// proxies. Handlers that need the client should read protect's answer:
// FromContext(...).Addr.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/httpprotect/protect"
	"github.com/labstack/echo/v4"
)

// trustedProxies are the load balancers in front of the service, given
// to protect and to the framework alike.
var trustedProxies = []string{"10.0.0.0/8"}

func newProtector() (*protect.Protector, error) {
	return protect.New(protect.Config{
		TrustedProxies: trustedProxies,
		MaxRequests:    5,
		Skip:           func(r *http.Request) bool { return r.URL.Path == "/healthz" },
	})
}

// ginProtect adapts a net/http middleware such as p.Middleware to gin:
// next runs gin's remaining handlers with the request that carries the
// decision; a refusal (next never called) stops the chain.
func ginProtect(mw func(http.Handler) http.Handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		passed := false
		mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			passed = true
			c.Request = r // FromContext(c.Request.Context()) finds the decision
			c.Next()
		})).ServeHTTP(c.Writer, c.Request)
		if !passed {
			c.Abort()
		}
	}
}

// ginApp is a gin service with /api behind the protector and /healthz
// outside it.
func ginApp(p *protect.Protector) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	if err := r.SetTrustedProxies(trustedProxies); err != nil {
		panic(err) // a constant list: a bad entry is a bug in this file
	}
	r.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok\n") })
	api := r.Group("/api", ginProtect(p.Middleware))
	api.GET("/hello", func(c *gin.Context) {
		d, _ := protect.FromContext(c.Request.Context())
		c.JSON(http.StatusOK, gin.H{"client": d.Addr.String(), "gin_client_ip": c.ClientIP(), "remaining": d.Remaining})
	})
	return r
}

// echoApp is the same service on echo.
func echoApp(p *protect.Protector) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	var ranges []echo.TrustOption
	for _, cidr := range trustedProxies {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			panic(err) // a constant list: a bad entry is a bug in this file
		}
		ranges = append(ranges, echo.TrustIPRange(n))
	}
	e.IPExtractor = echo.ExtractIPFromXFFHeader(ranges...)
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	api := e.Group("/api", echo.WrapMiddleware(p.Middleware))
	api.GET("/hello", func(c echo.Context) error {
		d, _ := protect.FromContext(c.Request().Context())
		return c.JSON(http.StatusOK, map[string]any{"client": d.Addr.String(), "echo_real_ip": c.RealIP(), "remaining": d.Remaining})
	})
	return e
}

func main() {
	framework := flag.String("framework", "gin", "gin or echo")
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()
	p, err := newProtector()
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	var h http.Handler
	switch *framework {
	case "gin":
		h = ginApp(p)
	case "echo":
		h = echoApp(p)
	default:
		log.Fatalf("-framework %q: want gin or echo", *framework)
	}
	fmt.Printf("%s on http://%s: curl http://%[2]s/api/hello (5 without a pause, then 429); /healthz is skipped\n", *framework, *addr)
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
