package bench

// fields-floor is no limiter: a control that does only what protect's
// middleware must do for every request it passes besides deciding,
// writing the two RateLimit fields (the policy's value built once, the
// other formatted per request, as for the harness's generous limit) and
// putting a protect.Decision in the request's context for the
// handler (FromContext), in one context that holds it, as protect's
// does, and Request.WithContext's copy of the request. Its ratio is the
// ceiling of any middleware that writes what protect writes.

import (
	"context"
	"net/http"
	"strconv"

	protect "github.com/httpprotect/protect"
)

type floorContext struct {
	context.Context
	d protect.Decision // what protect's context holds
}

type floorKey struct{}

func (c *floorContext) Value(key any) any {
	if _, ok := key.(floorKey); ok {
		return c
	}
	return c.Context.Value(key)
}

func fieldsFloor(p Policy) func(http.Handler) http.Handler {
	policy := []string{`"protect";q=` + strconv.FormatInt(int64(p.Limit), 10) + ";w=" + strconv.FormatInt(int64(p.Window.Seconds()), 10)}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h["Ratelimit-Policy"] = policy
			// Formatted per request, as protect formats what is left of
			// a limit too large for its table of ready values.
			h["Ratelimit"] = []string{`"protect";r=` + strconv.FormatInt(int64(p.Limit)-1, 10) + ";t=" + strconv.FormatInt(int64(p.Window.Seconds()), 10)}
			next.ServeHTTP(w, r.WithContext(&floorContext{Context: r.Context()}))
		})
	}
}

func init() {
	RegisterHTTP(HTTPPeer{
		Name: "fields-floor", Rank: RankBaseline, NoEnforce: true,
		Note: "no limiter: only protect's two RateLimit fields and a Decision in the context (a control)",
		New: func(_ *RedisEnv, p Policy) (func(http.Handler) http.Handler, error) {
			return fieldsFloor(p), nil
		},
	})
}
