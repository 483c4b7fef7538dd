package protect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// ErrBadPenalty is wrapped by the error of Penalize when n is not
// positive. Nothing is counted then: a penalty of 0 would be a Check, and a
// negative one would let a caller pay a client's failures back.
var ErrBadPenalty = errors.New("protect: bad penalty")

// Penalize counts n failures for r's client: a wrong password, a bad
// signature, a probe of a path that does not exist. It resolves the client
// as Verify does, counts n in one atomic store step and, when the count
// passes BanLimit, writes a ban that escalates as every automatic ban
// does (its reason: "failures passed the ban limit of N" with
// Config.CountStatus, else the stream's). Unknown, safe and banned clients
// are answered as Verify answers them and not counted. Under a plan n is
// the cost charged, as VerifyConsumerN charges it.
//
// The Decision describes the client after counting, and can answer the
// request in hand (d.WriteResponse). n below 1 is an error wrapping
// ErrBadPenalty, and nothing is counted. Otherwise the error is non-nil
// only when ctx ended before the store answered: pass
// context.WithoutCancel(r.Context()) when the client may already have
// seen the outcome.
func (p *Protector) Penalize(ctx context.Context, r *http.Request, n int64) (Decision, error) {
	if n < 1 {
		return Decision{}, fmt.Errorf("%w: n is %d; want 1 or more", ErrBadPenalty, n)
	}
	return p.penalize(ctx, r, n)
}

// penalize counts n failures for r: Penalize, and Middleware under
// CountStatus.
func (p *Protector) penalize(ctx context.Context, r *http.Request, n int64) (Decision, error) {
	d, err := p.request(ctx, r, n)
	p.stats.stripe(d.hint()).penalties.Add(uint64(n))
	return d, err
}

// failuresReason is the reason of the automatic bans of a protector that
// counts failures (Config.CountStatus).
func failuresReason(banLimit int64) string {
	return "failures passed the ban limit of " + strconv.FormatInt(banLimit, 10)
}
